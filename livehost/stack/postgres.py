"""PostgreSQL of the embedded stack.

Debian's binaries (``/usr/lib/postgresql/<ver>/bin``) when present, else the PostgreSQL 16 binaries of
the ``pgserver`` wheel. The cluster is created once in ``<workdir>/data`` (fsync off, TCP on loopback
only, scram-sha-256 password authentication for every connection), with a login role ``livehost``
owning a database ``livehost``. The passwords (superuser and ``livehost``) are random, made once and
kept in ``<workdir>/<role>.password`` (mode 0600); the DSN the stack writes carries the app password.

PostgreSQL refuses to run as root: when we are root, initdb/postgres/pg_ctl run as ``nobody`` through
``setpriv`` (which execs, so the recorded pid is the postmaster's), the data dir is chowned to it, and
every ancestor directory of the data dir gets the search bit for others (pytest's temp dirs and
``/root`` are 0700, which would hide the data dir from ``nobody``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import secrets
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path
from urllib.parse import quote

from livehost.stack.process import (
    HOST,
    Running,
    StackError,
    busy_ports_hint,
    healthy_if,
    pick_ports,
    pid_alive,
    run_async,
    start_detached,
    stop_pid,
    wait_exit,
    wait_healthy,
    write_record,
)

NAME = "postgres"
SUPERUSER = "postgres"
APP_ROLE = "livehost"
APP_DB = "livehost"
RUN_AS = "nobody"
SCRAM_MARKER = "auth-scram-sha-256"

CONF_LINES = (
    "# livehost embedded stack (development / tests only)",
    "listen_addresses = '127.0.0.1'",
    "unix_socket_directories = ''",
    "fsync = off",
    "synchronous_commit = off",
    "full_page_writes = off",
    "max_connections = 200",
    "shared_buffers = 64MB",
    "log_min_messages = warning",
)


def _pg_major(bin_dir: Path) -> str:
    out = subprocess.run([str(bin_dir / "postgres"), "--version"], capture_output=True, text=True, check=True)
    # "postgres (PostgreSQL) 15.10 (Debian 15.10-0+deb12u1)"
    return out.stdout.split(")")[1].split()[0].split(".")[0]


def _candidate_bin_dirs() -> list[Path]:
    debian = sorted(
        (p for p in Path("/usr/lib/postgresql").glob("*/bin") if (p / "initdb").is_file()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
        reverse=True,
    )
    found: list[Path] = list(debian)
    spec = importlib.util.find_spec("pgserver")
    if spec is not None and spec.submodule_search_locations:
        pg = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
        if (pg / "initdb").is_file():
            found.append(pg)
    return found


def find_bin_dir(data_dir: Path | None = None) -> Path:
    """Debian binaries when present, else pgserver's; the version of an existing cluster wins."""
    candidates = _candidate_bin_dirs()
    if not candidates:
        raise StackError(NAME, "no PostgreSQL binaries: install Debian's postgresql or the pgserver wheel")
    version_file = data_dir / "PG_VERSION" if data_dir is not None else None
    if version_file is not None and version_file.is_file():
        wanted = version_file.read_text().strip()
        for cand in candidates:
            if _pg_major(cand) == wanted:
                return cand
        raise StackError(
            NAME,
            f"cluster in {data_dir} is PostgreSQL {wanted} but only "
            f"{[str(c) for c in candidates]} are available; remove the data dir to recreate it",
        )
    return candidates[0]


def _as_user_prefix() -> tuple[list[str], int | None, int | None]:
    if os.geteuid() != 0:
        return [], None, None
    user = pwd.getpwnam(RUN_AS)
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise StackError(NAME, "running as root needs `setpriv` (util-linux) to drop to an unprivileged user")
    prefix = [setpriv, f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"]
    return prefix, user.pw_uid, user.pw_gid


def _make_traversable(path: Path) -> None:
    """Give 'others' the search bit on every ancestor of ``path`` that lacks it."""
    for parent in path.resolve().parents:
        mode = parent.stat().st_mode
        if not mode & stat.S_IXOTH:
            parent.chmod(mode | stat.S_IXOTH)


def _chown_tree(path: Path, uid: int, gid: int) -> None:
    os.chown(path, uid, gid)
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            os.lchown(os.path.join(root, name), uid, gid)


def _child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["LC_ALL"] = "C"
    env["LANG"] = "C"
    return env


def init_cluster(workdir: Path, log_path: Path) -> Path:
    """Create the cluster in ``<workdir>/data`` once; returns the binaries' dir."""
    data_dir = workdir / "data"
    prefix, uid, gid = _as_user_prefix()
    if uid is not None and gid is not None:
        _make_traversable(workdir)
    if (data_dir / "PG_VERSION").is_file() and (workdir / SCRAM_MARKER).is_file():
        bin_dir = find_bin_dir(data_dir)
        if uid is not None and gid is not None and data_dir.stat().st_uid != uid:
            _chown_tree(data_dir, uid, gid)
        return bin_dir
    bin_dir = find_bin_dir(None)
    if data_dir.exists():  # also a cluster made before password authentication (dev data only)
        shutil.rmtree(data_dir)
    (workdir / SCRAM_MARKER).unlink(missing_ok=True)
    pwfile = workdir / "initdb.pw"  # read by initdb (as the unprivileged user), removed right after
    pwfile.write_text(password(workdir, SUPERUSER) + "\n")
    pwfile.chmod(0o600)
    if uid is not None and gid is not None:
        os.chown(pwfile, uid, gid)
    data_dir.mkdir(parents=True, mode=0o700)
    if uid is not None and gid is not None:
        os.chown(data_dir, uid, gid)
    argv = [
        *prefix,
        str(bin_dir / "initdb"),
        "-D",
        str(data_dir),
        "-U",
        SUPERUSER,
        "--auth-local=scram-sha-256",
        "--auth-host=scram-sha-256",
        f"--pwfile={pwfile}",
        "-E",
        "UTF8",
        "--locale=C",
        "--no-sync",
    ]
    with open(log_path, "ab") as log:
        log.write(f"\n=== initdb: {' '.join(argv)}\n".encode())
        log.flush()
        rc = subprocess.run(
            argv, stdout=log, stderr=subprocess.STDOUT, env=_child_env(), cwd=str(data_dir), check=False
        ).returncode
    pwfile.unlink(missing_ok=True)
    if rc != 0:
        shutil.rmtree(data_dir, ignore_errors=True)
        raise StackError(NAME, f"initdb failed with code {rc} (binaries {bin_dir})", log_path)
    (workdir / SCRAM_MARKER).write_text("password authentication: scram-sha-256\n")
    conf = data_dir / "postgresql.conf"
    with open(conf, "a") as fh:
        fh.write("\n" + "\n".join(CONF_LINES) + "\n")
    return bin_dir


def password(workdir: Path, role: str) -> str:
    """The role's password in ``<workdir>/<role>.password``, made (random, mode 0600) on first use."""
    path = Path(workdir) / f"{role}.password"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_urlsafe(24))
    return path.read_text().strip()


def _url(port: int, user: str, pw: str, database: str) -> str:
    return f"postgresql://{user}:{quote(pw, safe='')}@{HOST}:{port}/{database}"


def dsn(rec: Running, user: str = APP_ROLE, database: str = APP_DB) -> str:
    return _url(rec.ports["postgres"], user, password(Path(rec.workdir), user), database)


async def _select_one(url: str) -> bool:
    import asyncpg  # type: ignore[import-untyped]

    conn = await asyncpg.connect(url, timeout=2)
    try:
        return bool(await conn.fetchval("SELECT 1") == 1)
    finally:
        await conn.close()


async def _ensure_app_db(port: int, workdir: Path) -> None:
    import asyncpg

    conn = await asyncpg.connect(_url(port, SUPERUSER, password(workdir, SUPERUSER), "postgres"), timeout=5)
    try:
        app_pw = password(workdir, APP_ROLE).replace("'", "''")  # url-safe token; quoted all the same
        if not await conn.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", APP_ROLE):
            await conn.execute(f"CREATE ROLE \"{APP_ROLE}\" LOGIN CREATEDB PASSWORD '{app_pw}'")
        else:
            await conn.execute(f"ALTER ROLE \"{APP_ROLE}\" PASSWORD '{app_pw}'")
        if not await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", APP_DB):
            await conn.execute(f'CREATE DATABASE "{APP_DB}" OWNER "{APP_ROLE}"')
    finally:
        await conn.close()


def probe(url: str) -> bool:
    """asyncpg connects to ``url`` and ``SELECT 1`` answers."""
    return run_async(lambda: _select_one(url))


def healthy(rec: Running) -> bool:
    return healthy_if(rec, lambda: probe(dsn(rec)))


def env(rec: Running) -> dict[str, str]:
    return {"LIVEHOST_POSTGRES_DSN": dsn(rec)}


def start(workdir: Path, port: int = 0, timeout: float = 60.0) -> Running:
    """initdb once, start the postmaster on ``127.0.0.1:port``, ensure role + database, wait for SELECT 1."""
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / "postgres.log"
    t0 = time.monotonic()
    bin_dir = init_cluster(workdir, log_path)
    t_init = time.monotonic() - t0
    data_dir = workdir / "data"
    prefix, _, _ = _as_user_prefix()
    configured = {"postgres": port}
    ports = pick_ports(configured)
    stale = data_dir / "postmaster.pid"
    if stale.exists():
        try:
            old_pid = int(stale.read_text().split()[0])
        except (ValueError, IndexError):
            old_pid = 0
        if pid_alive(old_pid, "postgres"):
            raise StackError(NAME, f"another postmaster (pid {old_pid}) already runs on {data_dir}", log_path)
        stale.unlink()
    postgres_bin = bin_dir / "postgres"
    argv = [*prefix, str(postgres_bin), "-D", str(data_dir), "-p", str(ports["postgres"]), "-h", HOST]
    t1 = time.monotonic()
    proc = start_detached(argv, log_path, env=_child_env(), cwd=data_dir)
    rec = Running(
        name=NAME,
        pid=proc.pid,
        ports=ports,
        log_path=str(log_path),
        workdir=str(workdir),
        cmd_match=str(postgres_bin),
        started_at=time.time(),
        extra={"data_dir": str(data_dir), "bin_dir": str(bin_dir), "initdb_seconds": f"{t_init:.3f}"},
    )
    try:
        wait_healthy(
            NAME,
            lambda: probe(_url(ports["postgres"], SUPERUSER, password(workdir, SUPERUSER), "postgres")),
            timeout=timeout,
            proc=proc,
            log_path=log_path,
            hint=lambda: busy_ports_hint(ports, configured),
            interval=0.05,
        )
        run_async(lambda: _ensure_app_db(ports["postgres"], workdir))
        if not probe(dsn(rec)):
            raise StackError(NAME, f"SELECT 1 as {APP_ROLE} failed", log_path)
    except StackError:
        stop(rec, 10.0)
        raise
    except BaseException as exc:
        stop(rec, 10.0)
        if isinstance(exc, Exception):
            raise StackError(NAME, f"setting up role/database failed: {exc}", log_path) from exc
        raise
    rec.extra["postmaster_seconds"] = f"{time.monotonic() - t1:.3f}"
    rec.start_seconds = round(time.monotonic() - t0, 3)
    write_record(rec)
    return rec


def stop(rec: Running, timeout: float = 15.0) -> None:
    """``pg_ctl stop -m fast``, then the generic SIGTERM/SIGKILL path if the postmaster is still there."""
    data_dir = rec.extra.get("data_dir")
    bin_dir = rec.extra.get("bin_dir")
    if pid_alive(rec.pid, rec.cmd_match) and data_dir and bin_dir:
        prefix, _, _ = _as_user_prefix()
        argv = [*prefix, str(Path(bin_dir) / "pg_ctl"), "stop", "-D", data_dir, "-m", "fast", "-w"]
        argv += ["-t", str(max(1, int(timeout)))]
        with open(rec.log_path, "ab") as log:
            subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, env=_child_env(), cwd="/", check=False)
        wait_exit(rec.pid, timeout, rec.cmd_match)
    stop_pid(rec.pid, timeout, rec.cmd_match)


def crash_restart(rec: Running, down_s: float = 2.0) -> Running:
    """A crash, for fault drills and tests: SIGKILL of the postmaster, its orphaned backends killed
    ``down_s`` later, then a start on the same data and port (PostgreSQL's crash recovery)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(rec.pid, signal.SIGKILL)
    time.sleep(down_s)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(rec.pid, signal.SIGKILL)
    return start(Path(rec.workdir), port=rec.ports["postgres"])
