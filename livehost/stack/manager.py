"""``up`` / ``down`` / ``status`` of the embedded stack (Apache Kafka or Tansu, PostgreSQL, Triton) in the state dir.

Each component lives in ``<state_dir>/<name>/`` with its log, pid file and a JSON record; ``up`` writes
the connection settings to ``<state_dir>/stack.env``, which :func:`livehost.config.load_settings` reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from livehost.config import Settings, load_settings, stack_env_file, state_dir
from livehost.security import ensure_local_pki, pki_dir
from livehost.stack import kafka, postgres, triton
from livehost.stack.process import Running, StackError, pid_alive, read_record, remove_record

COMPONENTS: tuple[str, ...] = ("kafka", "postgres", "triton")

Echo = Callable[[str], None]


@dataclass
class StackInfo:
    state_dir: Path
    env_file: Path
    components: dict[str, Running] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    started: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)


def _module(name: str) -> ModuleType:
    modules: dict[str, ModuleType] = {"kafka": kafka, "postgres": postgres, "triton": triton}
    return modules[name]


def _select(components: Iterable[str] | None) -> list[str]:
    if components is None:
        return list(COMPONENTS)
    wanted = list(dict.fromkeys(components))
    unknown = [c for c in wanted if c not in COMPONENTS]
    if unknown:
        raise ValueError(f"unknown stack component(s) {unknown}; known: {list(COMPONENTS)}")
    return [c for c in COMPONENTS if c in wanted]


def _configured_ports(name: str, settings: Settings) -> dict[str, int]:
    if name == "kafka":
        if settings.stack_broker == "tansu":
            return {"kafka": settings.stack_kafka_port}
        return {"kafka": settings.stack_kafka_port, "controller": settings.stack_kafka_controller_port}
    if name == "postgres":
        return {"postgres": settings.stack_postgres_port}
    return {
        "grpc": settings.stack_triton_grpc_port,
        "http": settings.stack_triton_http_port,
        "metrics": settings.stack_triton_metrics_port,
    }


def _reusable(name: str, rec: Running, settings: Settings) -> bool:
    for port_name, port in _configured_ports(name, settings).items():
        if port and rec.ports.get(port_name) != port:
            return False
    if name == "kafka" and kafka.flavour_of(rec) != ("tansu" if settings.stack_broker == "tansu" else kafka.FLAVOUR):
        return False
    if name == "kafka" and settings.stack_broker != "tansu" and \
            (rec.extra.get("security") == "sasl_ssl") != settings.stack_kafka_security:
        return False
    if name == "triton":
        repo = str(Path(settings.triton_model_repository).resolve())
        if rec.extra.get("model_repository") != repo:
            return False
    return bool(_module(name).healthy(rec))


def _start(name: str, workdir: Path, settings: Settings) -> Running:
    ports = _configured_ports(name, settings)
    timeout = settings.component_start_timeout_s
    if name == "kafka":
        return kafka.start(workdir, ports["kafka"], timeout=timeout, broker=settings.stack_broker,
                           controller_port=ports.get("controller", 0), heap_mb=settings.stack_kafka_heap_mb,
                           dist_dir=Path(settings.stack_kafka_dist_dir),
                           pki=pki_dir(settings) if settings.stack_kafka_security else None)
    if name == "postgres":
        return postgres.start(workdir, ports["postgres"], timeout=timeout)
    return triton.start(
        workdir,
        Path(settings.triton_model_repository),
        grpc_port=ports["grpc"],
        http_port=ports["http"],
        metrics_port=ports["metrics"],
        timeout=timeout,
        exit_timeout_s=settings.stack_triton_exit_timeout_s,
    )


def _stop(rec: Running) -> None:
    _module(rec.name).stop(rec)
    remove_record(Path(rec.workdir), rec.name)


def _write_env_file(path: Path, env: dict[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# Written by `livehost stack up`; removed by `livehost stack down`."]
    lines += [f"{key}={value}" for key, value in sorted(env.items())]
    tmp = path.with_suffix(".env.tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.chmod(0o600)  # it carries the database password
    tmp.replace(path)


def _running_records(root: Path) -> dict[str, Running]:
    out: dict[str, Running] = {}
    for name in COMPONENTS:
        rec = read_record(root / name, name)
        if rec is not None and pid_alive(rec.pid, rec.cmd_match):
            out[name] = rec
    return out


def up(
    settings: Settings | None = None,
    components: Iterable[str] | None = None,
    echo: Echo = print,
) -> StackInfo:
    """Start (or reuse) the components, wait until each is healthy, write the env file.

    On failure stops what this call started and raises :class:`StackError` (component, reason, log tail).
    """
    settings = settings if settings is not None else load_settings()
    names = _select(components)
    root = state_dir()
    root.mkdir(parents=True, exist_ok=True)
    info = StackInfo(state_dir=root, env_file=stack_env_file())
    repo = Path(settings.triton_model_repository)
    if "triton" in names and not repo.is_dir():  # fail before starting anything else
        raise StackError(
            "triton", f"model repository {repo} does not exist (settings.triton_model_repository)"
        )
    made = ensure_local_pki(settings)  # the local CA and every identity's credential (the broker's too)
    if made:
        echo(f"credentials made in {pki_dir(settings)}: {', '.join(made)}")
    started_now: list[Running] = []
    try:
        for name in names:
            workdir = root / name
            rec = read_record(workdir, name)
            if rec is not None:
                if _reusable(name, rec, settings):
                    echo(f"reusing {name} (pid {rec.pid}, ports {rec.ports})")
                    info.reused.append(name)
                    info.components[name] = rec
                    continue
                echo(f"{name}: recorded pid {rec.pid} is not healthy or differs from settings; restarting")
                _stop(rec)
            rec = _start(name, workdir, settings)
            started_now.append(rec)
            info.started.append(name)
            info.components[name] = rec
            echo(f"started {name} (pid {rec.pid}, ports {rec.ports}) in {rec.start_seconds:.2f} s")
    except BaseException:
        for rec in reversed(started_now):
            try:
                _stop(rec)
            except Exception as exc:  # keep the original error; report the cleanup failure
                echo(f"{rec.name}: cleanup failed: {exc}")
        raise
    running = _running_records(root)
    running.update(info.components)
    for name in COMPONENTS:
        if name in running:
            info.env.update(_module(name).env(running[name]))
    _write_env_file(info.env_file, info.env)
    return info


def down(settings: Settings | None = None, echo: Echo = print) -> list[str]:
    """Stop every recorded component (Triton, PostgreSQL, Kafka), remove records and the env file."""
    del settings  # the state dir alone says what runs
    root = state_dir()
    stopped: list[str] = []
    errors: list[str] = []
    for name in reversed(COMPONENTS):
        rec = read_record(root / name, name)
        if rec is None:
            continue
        try:
            _stop(rec)
            stopped.append(name)
            echo(f"stopped {name} (pid {rec.pid})")
        except Exception as exc:
            errors.append(f"{name}: {exc}")
    stack_env_file().unlink(missing_ok=True)
    if errors:
        raise StackError("stack", "down failed: " + "; ".join(errors))
    return stopped


def status(settings: Settings | None = None) -> dict[str, dict[str, object]]:
    """Per component: recorded, pid, port(s), alive, healthy, log path, start seconds."""
    del settings
    root = state_dir()
    out: dict[str, dict[str, object]] = {}
    for name in COMPONENTS:
        rec = read_record(root / name, name)
        if rec is None:
            out[name] = {"recorded": False, "pid": None, "port": None, "alive": False, "healthy": False}
            continue
        alive = pid_alive(rec.pid, rec.cmd_match)
        out[name] = {
            "recorded": True,
            "pid": rec.pid,
            "port": rec.port,
            "ports": dict(rec.ports),
            "alive": alive,
            "healthy": bool(alive and _module(name).healthy(rec)),
            "log": rec.log_path,
            "start_seconds": rec.start_seconds,
        }
    return out
