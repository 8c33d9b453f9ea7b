"""Case and result files (JSON Lines, ``eval/CASES.md``): reading, writing, JSON-Schema checks."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from livehost.config import REPO_ROOT

CATEGORIES: tuple[str, ...] = (
    "product_question", "price", "inventory", "promotion", "purchase_intent", "after_sales", "chit_chat",
    "multi_intent", "ambiguous", "injection", "abuse", "compliance", "product_switch", "off_topic",
)
CAPABILITIES: tuple[str, ...] = ("product", "inventory", "coupon", "order", "faq")
FAULTS: tuple[str, ...] = ("timeout", "malformed", "permission_denied")
SCHEMA_DIR = REPO_ROOT / "schemas" / "eval"
DEVSET_PATH = REPO_ROOT / "eval" / "devset.jsonl"
# Hand-written cases in an evaluator's own words and products (not the simulator's): the dev one is read
# while writing rules, the held-out one was written without reading the code and is only ever measured.
DEV_WILD_PATH = REPO_ROOT / "eval" / "dev" / "wild.jsonl"
DEV_WILD2_PATH = REPO_ROOT / "eval" / "dev" / "wild2.jsonl"  # a second batch, written after the first was fixed
# a third batch, mostly English, on the categories the test split fails most (written after the second was fixed)
DEV_WILD3_PATH = REPO_ROOT / "eval" / "dev" / "wild3.jsonl"
# a fourth batch: the catalog's facts asked in other words (synonyms, comparisons, "this"), per-variant stock
DEV_WILD4_PATH = REPO_ROOT / "eval" / "dev" / "wild4.jsonl"
# the first held-out set: scored after each change while the rules were written, so it steered them and is
# dev data now (its text stays protected from the labelled data and the rules: livehost/eval/leakage.py)
FORMER_HOLDOUT_PATH = REPO_ROOT / "eval" / "dev" / "former-holdout.jsonl"
# the sealed holdout: written apart from the code and the rules, stored compressed, scored only by
# `make release-eval` (livehost/eval/release.py); no development command reads it
SEALED_HOLDOUT_PATH = REPO_ROOT / "eval" / "sealed" / "holdout.jsonl.gz"
# the hand-written dev batches by the name the split benchmarks print them under
HAND_WRITTEN_DEV = {"dev-wild": DEV_WILD_PATH, "dev-wild2": DEV_WILD2_PATH, "dev-wild3": DEV_WILD3_PATH,
                    "dev-wild4": DEV_WILD4_PATH, "dev-former-holdout": FORMER_HOLDOUT_PATH}


class CaseFileError(ValueError):
    """A case or result file that does not parse or validate (every problem listed)."""

    def __init__(self, path: str, problems: list[str]):
        self.problems = problems
        super().__init__(f"{path}: {len(problems)} problem(s)\n" + "\n".join(f"  - {p}" for p in problems[:50]))


@cache
def _validator(name: str) -> jsonschema.protocols.Validator:
    schema = json.loads((SCHEMA_DIR / f"{name}.json").read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def case_problems(case: dict[str, Any]) -> list[str]:
    """Schema problems of one case, plus cross-checks the schema cannot express."""
    problems = [f"{'/'.join(str(p) for p in e.absolute_path) or '-'}: {e.message}"
                for e in _validator("case").iter_errors(case)]
    if problems:
        return problems
    links = [item["link_id"] for item in case["catalog"]]
    if len(links) != len(set(links)):
        problems.append("catalog: duplicate link_id")
    current = case["room"].get("current_link")
    if current is not None and current not in links:
        problems.append(f"room.current_link {current} is not in the catalog")
    offsets = [c["offset_ms"] for c in case["comments"]]
    if offsets != sorted(offsets) or offsets[0] != 0:
        problems.append("comments: offset_ms must start at 0 and not decrease")
    return problems


def result_problems(result: dict[str, Any]) -> list[str]:
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '-'}: {e.message}"
            for e in _validator("result").iter_errors(result)]


def _text(path: Path) -> str:
    """A file's text; a ``.gz`` file is read decompressed."""
    if path.suffix == ".gz":
        return gzip.decompress(path.read_bytes()).decode("utf-8")
    return path.read_text(encoding="utf-8")


def read_jsonl(path: Path | str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    for n, line in enumerate(_text(Path(path)).splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"line {n}: not JSON: {exc}")
            continue
        if not isinstance(row, dict):
            problems.append(f"line {n}: not an object")
            continue
        rows.append(row)
    if problems:
        raise CaseFileError(str(path), problems)
    return rows


def write_jsonl(path: Path | str, rows: Iterable[dict[str, Any]]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")
    return path


class SealedError(CaseFileError):
    """The sealed holdout asked for by a development command."""


def is_sealed(path: Path | str) -> bool:
    try:
        return Path(path).resolve() == SEALED_HOLDOUT_PATH.resolve()
    except OSError:
        return False


def load_cases(path: Path | str, *, validate: bool = True, release: bool = False) -> list[dict[str, Any]]:
    """A case file, validated. The sealed holdout is refused unless ``release`` (only the release
    evaluation scores it: a set the development loop scores would steer the work it measures)."""
    if is_sealed(path) and not release:
        raise SealedError(str(path), ["the sealed holdout is scored only by the release evaluation "
                                      "(make release-eval); use a dev or the test split"])
    cases = read_jsonl(path)
    if validate:
        problems = [f"{c.get('id', f'line {i + 1}')}: {p}" for i, c in enumerate(cases) for p in case_problems(c)]
        ids = [c.get("id") for c in cases]
        dupes = sorted({i for i in ids if ids.count(i) > 1}, key=str)
        problems += [f"duplicate case id {d}" for d in dupes]
        if problems:
            raise CaseFileError(str(path), problems)
    return cases


def load_results(path: Path | str, *, validate: bool = True) -> list[dict[str, Any]]:
    results = read_jsonl(path)
    if validate:
        problems = [f"{r.get('id', f'line {i + 1}')}: {p}" for i, r in enumerate(results) for p in result_problems(r)]
        if problems:
            raise CaseFileError(str(path), problems)
    return results


def by_id(rows: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Rows keyed by ``id`` (the last row of an id wins)."""
    return {str(r["id"]): r for r in rows}
