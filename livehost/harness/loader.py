"""Read and write a harness folder, and validate it, reporting every problem at once.

Layout of a harness folder::

    harness.yaml      name, description, instructions, limits, fallback
    skills/*.md       one skill each: YAML front matter (id, kind, description, tools) + body
    tools.yaml        tools: name, description, parameters (JSON Schema), binding, timeout_ms, side_effect
    hooks.yaml        hooks: id, stage, kind, params, on_fail, retry_budget
    prompt.yaml       token_budget, sections (id, source, template), truncation_order
    rules.yaml        campaign and compliance constraints
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from livehost.harness.model import Harness
from livehost.security.parsing import YamlRefused, load_yaml

FILES = ("harness.yaml", "tools.yaml", "hooks.yaml", "prompt.yaml", "rules.yaml")


@dataclass(frozen=True)
class Problem:
    file: str
    field: str
    message: str
    severity: str = "error"  # "error" blocks loading and pushing; "warning" is reported only

    def __str__(self) -> str:
        tag = "" if self.severity == "error" else f"[{self.severity}] "
        return f"{tag}{self.file}: {self.field}: {self.message}"


class HarnessError(ValueError):
    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("invalid harness:\n" + "\n".join(f"  - {p}" for p in problems))


def _yaml_problem(exc: yaml.YAMLError) -> str:
    # a refused construct (alias, deep nesting) is valid YAML: say what is refused, not "invalid"
    return str(exc) if isinstance(exc, YamlRefused) else f"not valid YAML: {exc}"


def _read_yaml(path: Path, problems: list[Problem]) -> Any:
    try:
        return load_yaml(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        problems.append(Problem(path.name, "-", "file is missing"))
    except yaml.YAMLError as exc:
        problems.append(Problem(path.name, "-", _yaml_problem(exc)))
    return None


def _split_front_matter(text: str) -> tuple[dict[str, Any], str] | None:
    if not text.startswith("---"):
        return None
    parts = text.split("\n---", 1)
    if len(parts) != 2:
        return None
    meta = load_yaml(parts[0].lstrip("-\n")) or {}
    body = parts[1].lstrip("-").lstrip("\n")
    return meta, body.rstrip() + "\n"


def read_raw(path: Path) -> tuple[dict[str, Any], list[Problem]]:
    """The bundle as plain data, plus the problems met while reading the files."""
    problems: list[Problem] = []
    if not path.is_dir():
        return {}, [Problem(str(path), "-", "not a harness folder")]
    top = _read_yaml(path / "harness.yaml", problems) or {}
    raw: dict[str, Any] = dict(top) if isinstance(top, dict) else {}
    skills: list[dict[str, Any]] = []
    skill_files = sorted((path / "skills").glob("*.md"))
    for skill_file in skill_files:
        rel = f"skills/{skill_file.name}"
        try:
            parsed = _split_front_matter(skill_file.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            problems.append(Problem(rel, "front matter", _yaml_problem(exc)))
            continue
        if parsed is None:
            problems.append(Problem(rel, "front matter", "missing '---' front matter block"))
            continue
        meta, body = parsed
        skills.append({**meta, "body": body, "_file": rel})
    raw["skills"] = skills
    for name, key in (("tools.yaml", "tools"), ("hooks.yaml", "hooks")):
        data = _read_yaml(path / name, problems)
        raw[key] = (data or {}).get(key, []) if isinstance(data, dict) else []
    raw["prompt"] = _read_yaml(path / "prompt.yaml", problems) or {}
    raw["rules"] = _read_yaml(path / "rules.yaml", problems) or {}
    return raw, problems


def _locate(loc: tuple[Any, ...], raw: dict[str, Any]) -> tuple[str, str]:
    """Map a pydantic error location to (file, field)."""
    head = loc[0] if loc else "-"
    rest = ".".join(str(x) for x in loc[1:])
    if head == "skills" and len(loc) > 1 and isinstance(loc[1], int):
        skill = raw["skills"][loc[1]]
        file = skill.get("_file", "skills/?") if isinstance(skill, dict) else f"skills[{loc[1]}]"
        return file, ".".join(str(x) for x in loc[2:]) or "-"
    files = {"tools": "tools.yaml", "hooks": "hooks.yaml", "prompt": "prompt.yaml", "rules": "rules.yaml"}
    if head in files:
        return files[head], f"{head}.{rest}" if rest else str(head)
    return "harness.yaml", ".".join(str(x) for x in loc)


def check(harness: Harness) -> list[Problem]:
    """Cross-reference checks the type model cannot express (errors only; see validate.py)."""
    from livehost.harness.validate import check_raw

    return [p for p in check_raw(harness.canonical()) if p.severity == "error"]


def load(path: Path | str) -> Harness:
    """Load and validate a harness folder; raise HarnessError listing every problem."""
    from livehost.harness.validate import validate_path

    report = validate_path(path)
    if report.errors or report.harness is None:
        raise HarnessError(report.errors or [Problem(str(path), "-", "could not load")])
    return report.harness


def from_dict(data: dict[str, Any]) -> Harness:
    """A harness from its canonical JSON (as stored in the registry), with the same checks."""
    from livehost.harness.validate import validate_bundle

    report = validate_bundle(data)
    if report.errors or report.harness is None:
        raise HarnessError(report.errors or [Problem("bundle", "-", "could not load")])
    return report.harness


class _PlainDumper(yaml.SafeDumper):
    """Writes a value used twice out twice: the loader refuses aliases, so the dump must not make any."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _yaml_text(obj: Any) -> str:
    return yaml.dump(obj, Dumper=_PlainDumper, sort_keys=False, allow_unicode=True, width=100)


def dump(harness: Harness, path: Path | str) -> Path:
    """Write a harness as a folder an operator can edit and diff."""
    path = Path(path)
    (path / "skills").mkdir(parents=True, exist_ok=True)
    for old in (path / "skills").glob("*.md"):
        old.unlink()
    data = harness.canonical()

    def write(name: str, obj: Any) -> None:
        (path / name).write_text(_yaml_text(obj))

    write("harness.yaml", {k: data[k] for k in ("name", "description", "instructions", "limits", "fallback")})
    write("tools.yaml", {"tools": data["tools"]})
    write("hooks.yaml", {"hooks": data["hooks"]})
    write("prompt.yaml", data["prompt"])
    write("rules.yaml", data["rules"])
    for skill in harness.skills:
        meta = {"id": skill.id, "kind": skill.kind, "description": skill.description, "tools": skill.tools}
        front = _yaml_text(meta)
        (path / "skills" / f"{skill.id}.md").write_text(f"---\n{front}---\n{skill.body}")
    return path
