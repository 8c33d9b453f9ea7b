"""Training rewards computed from a recorded trajectory alone (judge ``trajectory-deterministic-v1``).

Live requests have no evaluation case: the evidence is the trajectory itself — the product data and
FAQ the prompt showed (``prompt`` steps' ``evidence``), the ``tool_result`` steps, the room state of
the ``input`` step (campaign), ``hook_verdict``, ``correction`` and ``skill_load`` steps.

- **accuracy** (0/1): the model's final reply states a number the evidence does not contain (the
  factual-risk hook's evidence and number logic, :func:`livehost.hooks.step.evidence_text`), a claim
  the evidence does not back or contradicts (the evaluation judge's claim and promise checks, run on
  a case built from the evidence), a stock claim with no stock data, or a discount above the
  campaign maximum of the room state. No reply: nothing to contradict (1).
- **effectiveness** (0/0.5/1): a question answered with facts from tool results (or, when no tool
  ran, from the product data the prompt showed) *and* a nudge toward the product (link, product
  title, call to action) scores 1, one of the two 0.5, neither 0. A fallback, rejection or no reply
  to a question scores 0 (0.5 for a comment that asked nothing); silence on input the input hooks
  rejected or dropped scores 1.
- **tool_rationality** ([0, 1]): ``1 - bad / attempts`` over tool-call attempts, where an attempt is
  bad when it repeats a failed call identically, duplicates an earlier identical call, was corrected
  or rejected by a hook (invalid arguments), or returned a result that nothing later used (neither
  the final reply nor a later call's arguments). No tool call: 1.
- **skill_selection** ([0, 1], None when the request did not end in a reply attempt): 1 when a reply
  skill was loaded before the final reply and no skill-load correction was needed, 0.5 when it took
  a correction, 0 when none was loaded. Skill kinds come from the request's harness version when
  given; without it any loaded skill counts.

Nothing here names a skill, tool, hook or prompt section: steps are found by kind, tools and skills
by what the trajectory says about them.

The second half streams stored trajectories from PostgreSQL and upserts their rewards into
``trajectory_rewards`` (``livehost trajectories score``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from livehost.eval.judge import (
    CALL_TO_ACTION,
    COUNT_LEFT,
    DEFLECTION,
    LINK_REF,
    POS_STOCK,
    DeterministicJudge,
    is_refusal,
    referenced_products,
)
from livehost.harness.model import Harness
from livehost.hooks.step import _numbers as numbers_of
from livehost.hooks.step import evidence_text, strip_control_tokens
from livehost.training.export import REWARDS_TABLE, ExportFilter, HarnessCache
from livehost.training.formats import Turn, steps_of, turns_of

JUDGE = "trajectory-deterministic-v1"
REWARD_COLUMNS = ("accuracy", "effectiveness", "tool_rationality", "skill_selection")
SILENT_OUTCOMES = ("no_reply", "rejected", "fallback", "cancelled")
SKILL_HOOK_KIND = "skill_load_requirement"  # a hook *kind* of the harness schema, not a hook of any harness
QUESTION = re.compile(
    r"[?？]|^\s*(?:how|what|which|when|where|why|who|whose|is|are|was|does|do|did|can|could|will|would|should|"
    r"any|got|have you|has it)\b|吗|多少|怎么|什么|哪|几|有没有|能不能|是不是", re.I | re.M)
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")
WORD = re.compile(r"[^\W\d_]{4,}")
FACT_STOPWORDS = {"this", "that", "with", "from", "have", "your", "will", "they", "them", "what", "when", "there"}
_judge = DeterministicJudge()


@dataclass(frozen=True)
class Rewards:
    accuracy: int
    effectiveness: float
    tool_rationality: float
    skill_selection: float | None
    reasons: dict[str, Any] = field(default_factory=dict)
    judge: str = JUDGE

    def as_dict(self) -> dict[str, Any]:
        return {"accuracy": self.accuracy, "effectiveness": self.effectiveness,
                "tool_rationality": self.tool_rationality, "skill_selection": self.skill_selection,
                "judge": self.judge, "reasons": dict(self.reasons)}


# -- the trajectory, read once -------------------------------------------------------------------

@dataclass
class _View:
    row: dict[str, Any]
    steps: list[dict[str, Any]]
    turns: list[Turn]
    room: dict[str, Any]
    comments_text: str
    final: Turn | None  # the turn of the model's last reply attempt
    text: str | None  # what the model's final reply says (spoken, or the last rejected attempt)
    spoken: bool

    def upto(self, turn: Turn | None) -> list[dict[str, Any]]:
        """Steps up to the end of ``turn`` (all steps when None)."""
        if turn is None or not turn.steps:
            return self.steps
        last = turn.steps[-1]
        idx = next((i for i, s in enumerate(self.steps) if s is last), len(self.steps) - 1)
        return self.steps[: idx + 1]


def _view(row: dict[str, Any]) -> _View:
    steps = steps_of(row)
    turns = turns_of(steps)
    first_input: dict[str, Any] = next((s["data"] for s in steps if s["kind"] == "input"), {})
    room = first_input.get("room") or {}
    comments = row.get("comments") or []
    comments_text = " / ".join(str(c.get("text", "")) for c in comments) or str(row.get("merged_text") or "")
    replies = [t for t in turns if (t.action or {}).get("kind") == "reply"]
    final = replies[-1] if replies else None
    if row["outcome"] == "reply":
        text = row.get("reply_text") or ((final.action or {}).get("text") if final is not None else None)
        spoken = True
    else:
        text = (final.action or {}).get("text") if final is not None else None
        spoken = False
    return _View(row, steps, turns, room if isinstance(room, dict) else {}, comments_text, final,
                 str(text) if text else None, spoken)


def _walk_values(value: Any) -> Iterator[Any]:
    """Leaf values (not keys) of a JSON value."""
    if isinstance(value, dict):
        for v in value.values():
            yield from _walk_values(v)
    elif isinstance(value, list):
        for v in value:
            yield from _walk_values(v)
    elif value is not None and not isinstance(value, bool):
        yield value


def _facts(value: Any) -> set[str]:
    """Checkable facts of a tool result: numbers (normalised as the factual-risk hook does) and strings."""
    out: set[str] = set()
    for leaf in _walk_values(value):
        if isinstance(leaf, int | float):
            out.add(f"{float(leaf):g}")
        elif isinstance(leaf, str):
            s = leaf.strip().lower()
            if len(s) >= 3 or (CJK.search(s) and len(s) >= 2):
                out.add(s)
    return out


def _said(fact: str, text: str, numbers: set[str]) -> bool:
    if re.fullmatch(r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?", fact):
        return fact in numbers
    if CJK.search(fact):
        return fact in text
    if len(fact) <= 60:
        return re.search(rf"(?<!\w){re.escape(fact)}(?!\w)", text) is not None
    words = {w for w in WORD.findall(fact)} - FACT_STOPWORDS
    return len(words) >= 3 and sum(w in text for w in words) >= 0.6 * len(words)


def _used(facts: Iterable[str], text: str, exclude: str = "") -> list[str]:
    """Facts the text states (and that the ``exclude`` text — the viewers' comments — did not already say)."""
    low, ex = text.lower(), exclude.lower()
    nums, ex_nums = numbers_of(strip_control_tokens(low)), numbers_of(ex)
    return sorted(f for f in facts if _said(f, low, nums) and not _said(f, ex, ex_nums))


def _ok_results(steps: list[dict[str, Any]]) -> list[Any]:
    return [s["data"].get("result") for s in steps if s["kind"] == "tool_result" and s["data"].get("ok")]


def _prompt_evidence(steps: list[dict[str, Any]]) -> list[Any]:
    out: list[Any] = []
    for s in steps:
        if s["kind"] == "prompt":
            ev = s["data"].get("evidence") or {}
            out.extend(x for x in (ev.get("product"), ev.get("faq")) if x)
    return out


def _is_faq(d: dict[str, Any]) -> bool:
    return isinstance(d.get("q"), str) and isinstance(d.get("a"), str)


def _is_product(d: dict[str, Any]) -> bool:
    link = d.get("link_id")
    return isinstance(link, int) and not isinstance(link, bool) and any(k in d for k in ("title", "stock", "coupons"))


def _case(view: _View, steps: list[dict[str, Any]]) -> dict[str, Any]:
    """An evaluation-style case built from the trajectory's evidence: the room state, the products the
    prompt and the tool results showed (merged by link), and every other result as extra data."""
    products: dict[int, dict[str, Any]] = {}
    faq: list[dict[str, Any]] = []
    other: list[Any] = []

    def collect(value: Any) -> None:
        if isinstance(value, dict):
            if _is_faq(value):
                faq.append(value)
            elif _is_product(value):
                item = products.setdefault(int(value["link_id"]), {})
                item.update({k: v for k, v in value.items() if v is not None})
            else:
                for v in value.values():
                    collect(v)
        elif isinstance(value, list):
            for v in value:
                collect(v)

    for value in [*_prompt_evidence(steps), *_ok_results(steps)]:
        collect(value)
        if not isinstance(value, dict) or not _is_product(value):
            other.append(value)
    for item in products.values():
        item["faq"] = [f for f in faq if f.get("link_id") in (None, item["link_id"])] + list(item.get("faq") or [])
    return {"room": view.room, "catalog": list(products.values()), "orders": other,
            "comments": view.row.get("comments") or []}


# -- accuracy ------------------------------------------------------------------------------------

def accuracy(view: _View) -> tuple[int, str, list[str]]:
    if not view.text or not strip_control_tokens(view.text).strip():
        return 1, "no reply from the model: nothing to contradict", []
    steps = view.upto(view.final)
    which = "the reply" if view.spoken else "the model's last reply attempt (not spoken)"
    state = {"room_json": json.dumps(view.room, sort_keys=True),
             "steps": [{**s, "data_json": json.dumps(s["data"], default=str)} for s in steps]}
    spoken = strip_control_tokens(view.text)
    problems: list[tuple[str, str]] = []
    unsupported = sorted(numbers_of(spoken) - numbers_of(evidence_text(state)))
    if unsupported:
        problems.append(("number_not_in_evidence", f"states {', '.join(unsupported)}, which no tool result, "
                                                   "product data or room state shows"))
    case = _case(view, steps)
    acc, reason, codes = _judge.accuracy(case, {"responded": True, "reply": view.text})
    if acc == 0:
        problems.extend(zip(codes, reason.split("; "), strict=False))
    low = spoken.lower()
    if POS_STOCK.search(low) or COUNT_LEFT.search(low):
        products = referenced_products(spoken, case)
        if not any("stock" in p or "available" in p for p in products):
            problems.append(("unsupported_claim:stock", "claims stock, but no tool result or product data "
                                                        "shows stock"))
    if problems:
        return 0, f"{which}: " + "; ".join(msg for _, msg in problems), [code for code, _ in problems]
    return 1, f"{which}: every number and claim is backed by the trajectory's evidence; no false promise", []


# -- effectiveness -------------------------------------------------------------------------------

def _input_rejected(view: _View) -> bool:
    flagged = any(s["kind"] == "input_hook" and s["data"].get("verdict") in ("reject", "drop") for s in view.steps)
    return flagged and not any(t.action is not None for t in view.turns)


def is_question(text: str) -> bool:
    return bool(QUESTION.search(text))


def _nudge(text: str, case: dict[str, Any]) -> str | None:
    low = text.lower()
    if LINK_REF.search(text):
        return "names a link"
    for item in case["catalog"]:
        title = str(item.get("title") or "").strip().lower()
        if len(title) >= 3 and title in low:
            return f"names the product {item.get('title')!r}"
    m = CALL_TO_ACTION.search(text)
    return f"calls to action ({m.group(0)!r})" if m else None


def effectiveness(view: _View) -> tuple[float, str]:
    question = is_question(view.comments_text)
    outcome = view.row["outcome"]
    if _input_rejected(view):
        return 1.0, "input rejected by the input hooks: staying silent is correct"
    if outcome != "reply" or not view.text:
        what = {"no_reply": "no reply", "fallback": "fallback instead of a reply", "cancelled": "cancelled",
                "rejected": "rejected"}.get(outcome, outcome)
        if question:
            return 0.0, f"{what} to a question"
        return 0.5, f"{what} to a comment that asked nothing"
    steps = view.upto(view.final)
    case = _case(view, steps)
    results = _ok_results(steps)
    source = "tool results" if results else "the product data the prompt showed"
    facts = set().union(*(_facts(r) for r in (results or _prompt_evidence(steps))))
    used = _used(facts, strip_control_tokens(view.text), view.comments_text)
    nudge = _nudge(strip_control_tokens(view.text), case)
    if is_refusal(view.text) and not question:
        return (1.0, f"refuses and {nudge}") if nudge else (0.5, "refuses without steering to the products")
    if not question:
        return (1.0, f"reply {nudge}") if nudge else (0.5, "replies but points to no product or purchase")
    facts_txt = f"answers with facts from {source} ({', '.join(used[:5])})"
    if used and nudge:
        return 1.0, f"{facts_txt} and {nudge}"
    if used:
        return 0.5, f"{facts_txt} but no nudge toward the product"
    if DEFLECTION.search(view.text):
        return 0.0, "deflects the question without any fact"
    if nudge:
        return 0.5, f"{nudge} but states no fact from {source}"
    return 0.0, f"answers the question with no fact from {source} and no nudge"


# -- tool rationality ----------------------------------------------------------------------------

def _signature(action: dict[str, Any]) -> str:
    return json.dumps([action.get("tool"), action.get("arguments") or {}], sort_keys=True, default=str)


def tool_rationality(view: _View) -> tuple[float, str, list[str]]:
    calls = [t for t in view.turns if (t.action or {}).get("kind") == "call_tool"]
    if not calls:
        return 1.0, "no tool calls", []
    final_text = strip_control_tokens(view.text or "")
    seen: dict[str, bool] = {}  # signature -> did its last execution succeed
    issues: list[str] = []
    for i, t in enumerate(calls):
        a = t.action or {}
        sig, tool = _signature(a), a.get("tool")
        problem: str | None = None
        executed = t.tool_call is not None
        if sig in seen:
            problem = (f"{tool}: failed call retried with identical arguments" if not seen[sig]
                       else f"{tool}: duplicate identical call")
        elif not executed:
            problem = f"{tool}: call corrected or rejected by a hook (invalid call)"
        if executed:
            ok = bool((t.tool_result or {}).get("ok"))
            seen[sig] = ok
            if ok and problem is None:
                facts = _facts((t.tool_result or {}).get("result")) - _facts(a.get("arguments") or {})
                later_args = set().union(*(_facts((c.action or {}).get("arguments") or {}) for c in calls[i + 1:]))
                if not _used(facts, final_text, view.comments_text) and not facts & later_args:
                    problem = f"{tool}: result never used"
        if problem is not None:
            issues.append(problem)
    score = round(1.0 - len(issues) / len(calls), 4)
    if not issues:
        return 1.0, f"{len(calls)} tool call(s), each useful", []
    return score, f"{len(issues)} of {len(calls)} tool call(s) wasted: " + "; ".join(issues), issues


# -- skill selection -----------------------------------------------------------------------------

def _failing_kinds(t: Turn) -> set[str]:
    return {str(s["data"].get("kind")) for s in t.steps
            if s["kind"] == "hook_verdict" and s["data"].get("verdict") in ("correct", "reject")}


def skill_selection(view: _View, harness: Harness | None = None) -> tuple[float | None, str]:
    if view.final is None:
        return None, "the request did not end in a reply attempt"

    def is_reply_skill(skill: str) -> bool:
        if harness is None:
            return True
        found = harness.skill(skill)
        return found is not None and found.kind == "reply"

    loaded: list[str] = []
    corrected = 0
    for t in view.turns:
        if t.number > view.final.number:
            break
        kind = (t.action or {}).get("kind")
        if t.failed and kind == "load_skill":
            corrected += 1
        elif t.failed and kind == "reply" and (SKILL_HOOK_KIND in _failing_kinds(t)
                                               or not any(is_reply_skill(s) for s in loaded)):
            corrected += 1
        if t.skill_load is not None and not t.failed:
            loaded.append(t.skill_load)
    reply_skills = [s for s in loaded if is_reply_skill(s)]
    basis = "" if harness is not None else " (skill kinds unknown: any loaded skill counts)"
    if not reply_skills:
        return 0.0, "no reply skill loaded before the reply" + basis
    if corrected:
        return 0.5, f"reply skill {reply_skills[-1]} loaded after {corrected} skill-load correction(s)" + basis
    return 1.0, f"reply skill {reply_skills[-1]} loaded before the reply, no correction needed" + basis


# -- all four ------------------------------------------------------------------------------------

def score_trajectory(row: dict[str, Any], harness: Harness | None = None) -> Rewards:
    """The four reward components of one stored trajectory row (``trajectories`` table / raw export
    shape: steps with ``data_json`` or decoded ``data``). ``harness``: the request's harness version,
    used only to tell reply skills from others."""
    view = _view(row)
    acc, acc_reason, codes = accuracy(view)
    eff, eff_reason = effectiveness(view)
    tool, tool_reason, _ = tool_rationality(view)
    skill, skill_reason = skill_selection(view, harness)
    reasons = {"accuracy": acc_reason, "effectiveness": eff_reason, "tool_rationality": tool_reason,
               "skill_selection": skill_reason, "codes": codes}
    return Rewards(acc, eff, tool, skill, reasons)


# -- PostgreSQL: score stored trajectories -------------------------------------------------------

@dataclass
class ScoreStats:
    matched: int = 0  # trajectories matching the filter
    scored: int = 0  # rewards written by this run
    kept: int = 0  # already scored and left alone (no --rescore)
    means: dict[str, float | None] = field(default_factory=dict)  # over every scored trajectory in the filter
    rewarded: int = 0  # trajectories in the filter that have rewards after the run


def _decode(record: asyncpg.Record) -> dict[str, Any]:
    row = dict(record)
    for key in ("comments", "steps"):
        if isinstance(row.get(key), str):
            row[key] = json.loads(row[key])
    return row


UPSERT = (f"INSERT INTO {REWARDS_TABLE} (request_id, accuracy, effectiveness, tool_rationality, skill_selection,"
          " judge, reasons, scored_at) VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, now())"
          " ON CONFLICT (request_id) DO ")
UPDATE = ("UPDATE SET accuracy = EXCLUDED.accuracy, effectiveness = EXCLUDED.effectiveness,"
          " tool_rationality = EXCLUDED.tool_rationality, skill_selection = EXCLUDED.skill_selection,"
          " judge = EXCLUDED.judge, reasons = EXCLUDED.reasons, scored_at = EXCLUDED.scored_at")


async def score_stored(dsn_or_pool: str | asyncpg.Pool, flt: ExportFilter | None = None, *, rescore: bool = False,
                       harness_folder: Path | None = None, prefetch: int = 200, batch: int = 200,
                       on_total: Callable[[int], None] | None = None,
                       on_progress: Callable[[int], None] | None = None) -> ScoreStats:
    """Score the trajectories matching ``flt`` (all of them with ``rescore``, else only those without
    rewards) and upsert their rewards. Idempotent: without ``rescore`` existing rewards are kept."""
    flt = flt or ExportFilter()
    own = isinstance(dsn_or_pool, str)
    pool: asyncpg.Pool = (await asyncpg.create_pool(dsn_or_pool, min_size=2, max_size=2)  # type: ignore[assignment]
                          if isinstance(dsn_or_pool, str) else dsn_or_pool)
    stats = ScoreStats()
    try:
        where, args = flt.where()
        unscored = f"NOT EXISTS (SELECT 1 FROM {REWARDS_TABLE} r WHERE r.request_id = t.request_id)"
        todo_where = where if rescore else (f"{where} AND {unscored}" if where else f" WHERE {unscored}")
        upsert = UPSERT + (UPDATE if rescore else "NOTHING")
        # Harness versions first (the registry lookups need a connection of the pool of their own).
        cache = HarnessCache(pool, harness_folder)
        versions = [r["harness_version"] for r in
                    await pool.fetch(f"SELECT DISTINCT t.harness_version FROM trajectories t{todo_where}", *args)]
        harnesses = {v: await cache.get(v) for v in versions}
        async with pool.acquire() as reader, pool.acquire() as writer:
            stats.matched = int(await reader.fetchval(f"SELECT count(*) FROM trajectories t{where}", *args))
            todo = int(await reader.fetchval(f"SELECT count(*) FROM trajectories t{todo_where}", *args))
            stats.kept = stats.matched - todo
            if on_total is not None:
                on_total(todo)
            pending: list[tuple[Any, ...]] = []

            async def flush() -> None:
                if pending:
                    await writer.executemany(upsert, pending)
                    stats.scored += len(pending)
                    pending.clear()

            query = f"SELECT t.* FROM trajectories t{todo_where} ORDER BY t.created_ms, t.request_id"
            async with reader.transaction(readonly=True, isolation="repeatable_read"):
                async for record in reader.cursor(query, *args, prefetch=prefetch):
                    row = _decode(record)
                    r = score_trajectory(row, harnesses.get(row["harness_version"]))
                    pending.append((row["request_id"], r.accuracy, r.effectiveness, r.tool_rationality,
                                    r.skill_selection, r.judge, json.dumps(r.reasons, default=str)))
                    if len(pending) >= batch:
                        await flush()
                    if on_progress is not None:
                        on_progress(1)
            await flush()
            means = ", ".join(f"avg(r.{c}) AS {c}" for c in REWARD_COLUMNS)
            agg = await writer.fetchrow(
                f"SELECT count(*) AS n, {means} FROM trajectories t JOIN {REWARDS_TABLE} r"
                f" ON r.request_id = t.request_id{where}", *args)
            stats.rewarded = int(agg["n"])
            stats.means = {c: (float(agg[c]) if agg[c] is not None else None) for c in REWARD_COLUMNS}
    finally:
        if own:
            await pool.close()
    return stats
