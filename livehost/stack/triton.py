"""Triton Inference Server of the embedded stack: the ``tritonserver`` binary of the ``nvidia-pytriton``
wheel, run directly on a plain model repository with every model loaded at start.

Traps handled here (DESIGN.md part 2):

- ``--backend-directory`` wants ``<dir>/python/`` holding ``libtriton_python.so``,
  ``triton_python_backend_utils.py`` *and* ``triton_python_backend_stub``; the wheel ships the stubs
  per Python version elsewhere, so we assemble ``<workdir>/backends/python`` with the stub of the
  running interpreter's version.
- The stub must load the running interpreter's ``libpython`` (sysconfig ``LIBDIR`` first in
  ``LD_LIBRARY_PATH``, then ``nvidia_pytriton.libs``), and finds its environment through ``python3`` on
  ``PATH``, so the interpreter's bin dir goes first.
- All three endpoints bind 127.0.0.1; a short ``--exit-timeout-secs`` bounds a hanging shutdown.
"""

from __future__ import annotations

import filecmp
import importlib.util
import os
import shutil
import sys
import sysconfig
import time
from pathlib import Path

from livehost.stack.process import (
    HOST,
    Running,
    StackError,
    busy_ports_hint,
    healthy_if,
    pick_ports,
    start_detached,
    stop_pid,
    wait_healthy,
    write_record,
)

NAME = "triton"
PORT_NAMES = ("grpc", "http", "metrics")


def _site_dir(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise StackError(NAME, f"package {package} is not installed (nvidia-pytriton carries tritonserver)")
    return Path(next(iter(spec.submodule_search_locations)))


def server_dir() -> Path:
    return _site_dir("pytriton") / "tritonserver"


def binary() -> Path:
    path = server_dir() / "bin" / "tritonserver"
    if not path.is_file():
        raise StackError(NAME, f"tritonserver binary missing at {path}")
    return path


def libs_dir() -> Path:
    return server_dir().parent.parent / "nvidia_pytriton.libs"


def prepare_backends(workdir: Path) -> Path:
    """Assemble ``<workdir>/backends/python`` (backend .so, utils, this Python's stub); returns backends/."""
    src = server_dir()
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    stub = src / "python_backend_stubs" / version / "triton_python_backend_stub"
    if not stub.is_file():
        raise StackError(NAME, f"no python backend stub for Python {version} at {stub}")
    backends = workdir / "backends"
    target = backends / "python"
    target.mkdir(parents=True, exist_ok=True)
    files = [p for p in (src / "backends" / "python").iterdir() if p.is_file()] + [stub]
    for path in files:
        dest = target / path.name
        if not dest.exists() or not filecmp.cmp(path, dest, shallow=True):
            shutil.copy2(path, dest)
    return backends


# Environment of the python-backend model processes (Triton's stubs inherit the server's). numpy's
# OpenBLAS starts a thread per core, which spins after every matrix product (the policy's embedding
# similarities) and is billed to the stub: measured (benchmarks/bench_policy_cpu.py) ~2x the CPU per
# policy call of one thread, with identical outputs. On a loaded host the second thread only takes a
# core from the other services. infra/triton/Dockerfile sets the same (tests/deploy checks it).
MODEL_ENV = {"OPENBLAS_NUM_THREADS": "1"}


def child_env() -> dict[str, str]:
    env = {**MODEL_ENV, **os.environ}  # an operator's own value wins
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    ld = [p for p in (libdir, str(libs_dir()), env.get("LD_LIBRARY_PATH", "")) if p]
    env["LD_LIBRARY_PATH"] = ":".join(ld)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def grpc_url(rec: Running) -> str:
    return f"{HOST}:{rec.ports['grpc']}"


def http_url(rec: Running) -> str:
    return f"{HOST}:{rec.ports['http']}"


def probe(url: str) -> bool:
    """``tritonclient.grpc`` says the server is ready (with strict readiness: every model loaded)."""
    import tritonclient.grpc as grpcclient  # type: ignore[import-untyped]

    client = grpcclient.InferenceServerClient(url)
    try:
        return bool(client.is_server_ready(client_timeout=2.0))
    finally:
        client.close()


def healthy(rec: Running) -> bool:
    return healthy_if(rec, lambda: probe(grpc_url(rec)))


def env(rec: Running) -> dict[str, str]:
    return {
        "LIVEHOST_TRITON_URL": grpc_url(rec),
        "LIVEHOST_TRITON_HTTP_URL": http_url(rec),
        "LIVEHOST_TRITON_METRICS_URL": f"http://{HOST}:{rec.ports['metrics']}/metrics",
    }


def start(
    workdir: Path,
    model_repository: Path,
    *,
    grpc_port: int = 0,
    http_port: int = 0,
    metrics_port: int = 0,
    timeout: float = 60.0,
    exit_timeout_s: int = 5,
) -> Running:
    """Start tritonserver on ``model_repository`` and wait until ``is_server_ready()``."""
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / "triton.log"
    model_repository = Path(model_repository).resolve()
    if not model_repository.is_dir():
        raise StackError(
            NAME, f"model repository {model_repository} does not exist (settings.triton_model_repository)"
        )
    exe = binary()
    backends = prepare_backends(workdir)
    configured = {"grpc": grpc_port, "http": http_port, "metrics": metrics_port}
    ports = pick_ports(configured)
    argv = [
        str(exe),
        f"--model-repository={model_repository}",
        f"--backend-directory={backends}",
        f"--grpc-address={HOST}",
        f"--grpc-port={ports['grpc']}",
        f"--http-address={HOST}",
        f"--http-port={ports['http']}",
        f"--metrics-address={HOST}",
        f"--metrics-port={ports['metrics']}",
        f"--exit-timeout-secs={exit_timeout_s}",
        "--strict-readiness=true",
        "--exit-on-error=true",
        "--log-verbose=0",
    ]
    t0 = time.monotonic()
    proc = start_detached(argv, log_path, env=child_env(), cwd=workdir)
    rec = Running(
        name=NAME,
        pid=proc.pid,
        ports=ports,
        log_path=str(log_path),
        workdir=str(workdir),
        cmd_match="tritonserver",
        started_at=time.time(),
        extra={"model_repository": str(model_repository), "exit_timeout_s": str(exit_timeout_s)},
    )
    try:
        wait_healthy(
            NAME,
            lambda: probe(f"{HOST}:{ports['grpc']}"),
            timeout=timeout,
            proc=proc,
            log_path=log_path,
            hint=lambda: busy_ports_hint(ports, configured),
            interval=0.1,
        )
    except BaseException:
        stop_pid(proc.pid, exit_timeout_s + 5.0)
        raise
    rec.start_seconds = round(time.monotonic() - t0, 3)
    write_record(rec)
    return rec


def stop(rec: Running, timeout: float | None = None) -> None:
    """SIGTERM, let Triton drain for its exit timeout (+ margin), then SIGKILL the group. rc=1 is fine."""
    if timeout is None:
        timeout = float(rec.extra.get("exit_timeout_s", "5")) + 5.0
    stop_pid(rec.pid, timeout, rec.cmd_match)
