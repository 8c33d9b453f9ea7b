"""The Apache Kafka broker's jars: fetched once from Maven Central with the pinned pom, then verified.

``infra/kafka/pom.xml`` pins the broker (``org.apache.kafka:kafka_2.13``) and its log4j2 binding.
Maven fetches with strict checksums (``-C``: a jar that does not match the repository's ``.sha1``
fails the fetch); every copied jar is then checked against ``infra/kafka/jars.sha256``, committed
with the pom, so a changed artifact or a tampered local Maven cache is refused. The jars land in
``<dist dir>/<pom+lock digest>/libs`` and are reused by every later start, test session and stack.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

from livehost.config import REPO_ROOT
from livehost.stack.process import StackError

NAME = "kafka"
POM = REPO_ROOT / "infra" / "kafka" / "pom.xml"
LOCK = REPO_ROOT / "infra" / "kafka" / "jars.sha256"
MAVEN_TIMEOUT_S = 600


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_lock(lock: Path = LOCK) -> dict[str, str]:
    """``jar file name -> sha256`` from the lock file (``<sha256>  <name>`` lines, ``#`` comments)."""
    out: dict[str, str] = {}
    for line in lock.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        digest, _, name = line.partition("  ")
        out[name.strip()] = digest.strip()
    return out


def _fingerprint(pom: Path, lock: Path) -> str:
    digest = hashlib.sha256(pom.read_bytes())
    if lock.exists():
        digest.update(lock.read_bytes())
    return digest.hexdigest()[:16]


def _maven(pom: Path, out_dir: Path) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise StackError(NAME, "Maven (`mvn`) is not on PATH; it fetches the Apache Kafka jars once "
                               "(install Maven, or start the stack with --broker tansu)")
    argv = [mvn, "-q", "-B", "-C", "-f", str(pom), "dependency:copy-dependencies",
            f"-DoutputDirectory={out_dir}", "-DincludeScope=runtime"]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=MAVEN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise StackError(NAME, f"Maven did not fetch the Kafka jars within {MAVEN_TIMEOUT_S} s") from None
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
        raise StackError(NAME, f"Maven could not fetch the Kafka jars (exit {proc.returncode}):\n{tail}")


def verify(libs: Path, lock: Path = LOCK) -> None:
    """Every jar in ``libs`` is in the lock with the same sha256, and none is missing."""
    expected = read_lock(lock)
    found = {p.name: p for p in libs.glob("*.jar")}
    missing = sorted(set(expected) - set(found))
    extra = sorted(set(found) - set(expected))
    bad = sorted(name for name, path in found.items() if name in expected and sha256(path) != expected[name])
    problems = []
    if missing:
        problems.append(f"missing {missing}")
    if extra:
        problems.append(f"not in the lock {extra}")
    if bad:
        problems.append(f"checksum mismatch {bad}")
    if problems:
        raise StackError(NAME, f"Kafka jars in {libs} do not match {lock}: " + "; ".join(problems)
                         + " (after changing the pom, run `make kafka-lock`)")


def ensure_jars(dist_dir: Path, pom: Path = POM, lock: Path = LOCK) -> Path:
    """The verified ``libs`` folder for this pom and lock, fetching it first if needed."""
    libs = dist_dir / _fingerprint(pom, lock) / "libs"
    if libs.is_dir():
        verify(libs, lock)
        return libs
    libs.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=libs.parent, prefix="fetch-") as tmp:
        staged = Path(tmp) / "libs"
        _maven(pom, staged)
        verify(staged, lock)
        try:
            staged.rename(libs)  # atomic: a concurrent fetch that won the race is just as good
        except OSError:
            if not libs.is_dir():
                raise
    return libs


def write_lock(pom: Path = POM, lock: Path = LOCK) -> Path:
    """Fetch with the pom and write the lock from what Maven (strict checksums) delivered."""
    with tempfile.TemporaryDirectory() as tmp:
        staged = Path(tmp) / "libs"
        _maven(pom, staged)
        lines = ["# sha256 of every jar `infra/kafka/pom.xml` resolves to; written by `make kafka-lock`."]
        lines += [f"{sha256(p)}  {p.name}" for p in sorted(staged.glob("*.jar"))]
        lock.write_text("\n".join(lines) + "\n")
    return lock


if __name__ == "__main__":
    print(f"wrote {write_lock()}")
