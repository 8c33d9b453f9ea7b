# syntax=docker/dockerfile:1
# One image for every LiveHost service; the command selects the service:
#   docker run livehost:local python -m services.ingest        (ingest|prompt|policy|tools|voice|harness)
#   docker run livehost:local python -m services.hooks         (Faust workers: hooks|trajectories)
#
# The package keeps its data next to the code (schemas/, harness/default/, infra/sql/, infra/seed/ are
# found relative to livehost/, see livehost.config.REPO_ROOT), so the source tree is copied to /app and
# installed editable: the dependencies land in site-packages, the code and its data stay together.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm
FROM ${PYTHON_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

# libgomp1: OpenMP runtime of the llama.cpp / onnxruntime wheels (voice, policy_llm helpers).
RUN apt-get update \
 && apt-get install -y --no-install-recommends libgomp1 \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app

# Dependencies first (cached while only the code changes): install the project with empty packages,
# then drop the project itself and keep its pinned dependencies.
COPY pyproject.toml ./
RUN mkdir -p livehost services \
 && touch livehost/__init__.py services/__init__.py \
 && pip install . \
 && pip uninstall -y livehost \
 && rm -rf livehost services build ./*.egg-info

COPY . .
RUN pip install --no-deps -e . \
 && python -c "import livehost.config, livehost.healthcheck, services" \
 && useradd --uid 10001 --user-group --no-create-home --home-dir /var/lib/livehost livehost \
 && mkdir -p /var/lib/livehost/audio /var/lib/livehost/faust \
 && chown -R livehost:livehost /var/lib/livehost

# Containers listen on every interface; state (Faust data, voice audio) goes to a writable volume.
# The three connections (LIVEHOST_KAFKA_BOOTSTRAP, LIVEHOST_POSTGRES_DSN, LIVEHOST_TRITON_URL) are
# given by docker-compose.yml / the Helm chart.
ENV LIVEHOST_GRPC_HOST=0.0.0.0 \
    LIVEHOST_STATE_DIR=/var/lib/livehost \
    HOME=/var/lib/livehost

VOLUME ["/var/lib/livehost"]
EXPOSE 50061 50062 50063 50064 50065 50066
USER 10001:10001

# No default service: say what to run.
CMD ["python", "-c", "import sys; sys.exit('choose a service: python -m services.<ingest|prompt|policy|tools|voice|harness|hooks|trajectories>')"]
