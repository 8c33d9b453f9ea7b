"""CPU per call of the deterministic reference policy (``livehost.policy.reference.respond``), the
model the Triton ``policy_reference`` python backend serves, in process and on one thread.

Contexts come from the dev split only (``eval/devset.jsonl`` and ``eval/dev/wild*.jsonl``; never a
held-out or test split): a seeded sample of cases is run through the minimal agent loop of
:mod:`livehost.policy.testing` under the shipped harness, and every context the policy was asked to
decide is kept (first turn, after a tool result, after a skill load, after a hook correction), plus a
ReAct-mode copy (``"mode": "react"``, the shape of :mod:`livehost.react.prompt`) of each first-turn
and after-tool-result context. ``--contexts PATH`` saves them (JSON Lines, one trajectory per line) the
first time and reads them afterwards, so runs compare the same inputs.

    .venv/bin/python benchmarks/bench_policy_cpu.py [--cases 160] [--seed 11] [--contexts PATH] [--repeat 3]
        [--mode both|cached|new] [--profile [--top 30]]
    ... --contexts PATH --record out.jsonl   # respond() of every context, one JSON string a line
    ... --contexts PATH --compare out.jsonl  # byte-identical to a record? (cold caches, then warm)

Measured:

- ``warm-up``: the first pass (screening classifier training, embedding model load, every text's first
  embedding), reported apart and excluded from the figures below;
- ``repeated texts``: every context again, every text already embedded (a request's 2nd-4th policy
  call, and all of them for a comment seen before);
- ``new texts``: each trajectory with the embeddings of its comment-derived texts (the queries the
  policy embeds: the comment as normalised for intent, retrieval and option queries, correction
  messages) evicted first, as for a comment never seen before; the harness's and the catalog's texts
  stay cached, as they do in a serving process (they repeat across requests). The policy's own caches
  (``reference.cache_clear``) are emptied too, the catalog's and harness's words with them, so this
  figure is an upper bound: nothing of the comment is remembered.

Each call gets a fresh ``json.loads`` of its context (as the Triton model does, outside the timing), so
no call sees another's objects. Figures are ms per ``respond()`` call, p50 / p95 / mean, of process CPU
time (what the Triton stub is billed) and of wall time. numpy's OpenBLAS keeps a second thread that
spins after each matrix product (the embedding similarities) and is billed to the process as well; run
with ``OPENBLAS_NUM_THREADS=1`` for CPU figures that do not depend on whether another job holds the
other core (the outputs are the same either way).
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import gc
import importlib.util
import json
import os
import pstats
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if importlib.util.find_spec("livehost") is None:  # a checkout that is not pip-installed
    sys.path.append(str(ROOT))

from livehost.eval.cases import DEVSET_PATH, HAND_WRITTEN_DEV, load_cases  # noqa: E402
from livehost.harness.loader import load  # noqa: E402
from livehost.harness.model import Harness  # noqa: E402
from livehost.policy import reference  # noqa: E402
from livehost.policy.actions import parse_action  # noqa: E402
from livehost.policy.testing import Sandbox, build_context, run_loop  # noqa: E402
from livehost.understanding import choice, embed, screening  # noqa: E402

Trajectory = list[str]  # the JSON text of each context of one case, in turn order


# ---------------------------------------------------------------------------------------- contexts

def _react_copy(ctx: dict[str, Any]) -> dict[str, Any]:
    """The context as the ReAct baseline builds it (livehost.react.prompt.build_context): no skills,
    product, FAQ, rules or lineup; the transcript's tool calls, results and corrections only."""
    room = {k: v for k, v in (ctx.get("room") or {}).items() if k != "lineup"}
    return ctx | {
        "mode": "react", "instructions": "", "room": room, "product": None, "faq": [], "skills": [],
        "loaded_skills": [], "rules": {},
        "transcript": [e for e in ctx.get("transcript") or []
                       if e.get("kind") in ("tool_call", "tool_result", "correction")],
    }


def _hook_message(harness: Harness, kind: str, reason: str) -> tuple[str, str]:
    """(hook id, correction message) of the harness's hook of this kind, as the step hooks word it."""
    hook = next(h for h in harness.hooks if h.kind == kind)
    return hook.id, hook.on_fail.message.replace("{reason}", reason)


def corrected_loop(harness: Harness, case: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    """The contexts of a case whose first tool call (``kind="tool"``) or first reply (``"reply"``: its
    format; ``"skill"``: the reply skill) a step hook turns down. As in the real path, the turned-down
    action is not recorded: the transcript gets the correction only. Tool calls run against the case's
    sandbox; at most ``max_turns`` turns."""
    ctx = build_context(harness, case)
    sandbox = Sandbox(case)
    seen: list[dict[str, Any]] = []
    corrected = False
    for turn in range(1, harness.limits.max_turns + 1):
        ctx["turn"] = turn
        seen.append(copy.deepcopy(ctx))
        action = parse_action(reference.respond(copy.deepcopy(ctx))).as_dict()
        transcript = ctx["transcript"]
        if not corrected and action["kind"] == ("call_tool" if kind == "tool" else "reply"):
            corrected = True
            if kind == "tool":
                hook, message = _hook_message(harness, "side_effect_gate", "not allowed in this room")
            elif kind == "skill":
                ids = ", ".join(s.id for s in harness.skills if s.kind == "reply")
                hook, message = _hook_message(harness, "skill_load_requirement",
                                              f"no reply skill loaded; load one of: {ids}")
            else:
                hook, message = _hook_message(harness, "reply_format", "the reply is too long for this room")
            transcript.append({"turn": turn, "kind": "correction", "name": hook,
                               "data": {"hook": hook, "reason": message, "message": message}})
            continue
        if action["kind"] == "load_skill":
            skill = harness.skill(action.get("skill") or "")
            if skill is None:
                break
            transcript.append({"turn": turn, "kind": "skill_load", "name": skill.id, "data": {"skill": skill.id}})
            ctx["loaded_skills"].append({"id": skill.id, "body": skill.body})
        elif action["kind"] == "call_tool":
            tool = harness.tool(action.get("tool") or "")
            if tool is None:
                break
            args = action.get("arguments") or {}
            transcript.append({"turn": turn, "kind": "tool_call", "name": tool.name,
                               "data": {"tool": tool.name, "arguments": args}})
            op_args = {p: args[a] for p, a in tool.binding.arguments.items() if a in args}
            ok, result, code, msg = sandbox.run(tool.binding.operation, op_args)
            transcript.append({"turn": turn, "kind": "tool_result", "name": tool.name, "data": {
                "call_id": f"c{turn}", "tool": tool.name, "ok": ok, "result": result,
                "error_code": code, "error_message": msg}})
        else:
            break
    return seen


def build_trajectories(n_cases: int, seed: int) -> list[Trajectory]:
    cases = load_cases(DEVSET_PATH) + [c for p in HAND_WRITTEN_DEV.values() for c in load_cases(p)]
    rng = random.Random(seed)
    picked = rng.sample(cases, min(n_cases, len(cases)))
    harness = load(ROOT / "harness/default")
    out: list[Trajectory] = []
    for case in picked:
        seen: list[dict[str, Any]] = []

        def recording(ctx: dict[str, Any], seen: list[dict[str, Any]] = seen) -> str:
            seen.append(copy.deepcopy(ctx))
            return reference.respond(ctx)

        run_loop(recording, harness, case)
        traj = [json.dumps(c, ensure_ascii=False, sort_keys=True) for c in seen]
        # a quarter of the cases again with a hook turning down a step (a tool call, or the reply)
        if rng.random() < 0.25:
            corrected = corrected_loop(harness, case, rng.choice(("tool", "reply", "skill")))
            out.append([json.dumps(c, ensure_ascii=False, sort_keys=True) for c in corrected])
        react = [_react_copy(c) for c in seen
                 if not c.get("transcript") or c["transcript"][-1].get("kind") == "tool_result"]
        out.append(traj)
        if react:
            out.append([json.dumps(c, ensure_ascii=False, sort_keys=True) for c in react])
    return out


def load_or_build(path: Path | None, n_cases: int, seed: int) -> list[Trajectory]:
    if path is not None and path.exists():
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    trajectories = build_trajectories(n_cases, seed)
    if path is not None:
        path.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in trajectories), encoding="utf-8")
    return trajectories


def describe(trajectories: list[Trajectory]) -> str:
    kinds: dict[str, int] = {}
    for traj in trajectories:
        for raw in traj:
            ctx = json.loads(raw)
            transcript = ctx.get("transcript") or []
            kind = "first turn" if not transcript else f"after {transcript[-1].get('kind')}"
            kind = ("react: " if ctx.get("mode") == "react" else "") + kind
            kinds[kind] = kinds.get(kind, 0) + 1
    return ", ".join(f"{k} {v}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1]))


# ---------------------------------------------------------------------------------------- caches

class QueryLog:
    """Records the comment-derived texts the policy embeds: the query of ``embed.similarity`` and of
    ``choice.similarity``, and a correction message compared to the fixed description of a skill
    correction (the other documents, harness and catalog texts, are not recorded)."""

    def __init__(self) -> None:
        self.texts: set[str] = set()
        self._embed_similarity = embed.similarity
        self._choice_similarity = choice.similarity

    def __enter__(self) -> QueryLog:
        def embed_similarity(query: str, docs: list[str]) -> list[float]:
            self.texts.add(query)
            return self._embed_similarity(query, docs)

        def choice_similarity(a: str, b: list[str], stem: Callable[[str], str], stop: set[str]) -> list[float]:
            self.texts.add(a)
            if a == choice.SKILL_CORRECTION:
                self.texts.update(b)  # a correction's message (other documents are the harness's skills)
            return self._choice_similarity(a, b, stem, stop)

        embed.similarity = embed_similarity  # type: ignore[assignment]
        choice.similarity = choice_similarity  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        embed.similarity = self._embed_similarity  # type: ignore[assignment]
        choice.similarity = self._choice_similarity  # type: ignore[assignment]


def _clear_text_caches() -> None:
    """The policy's own caches (``reference.cache_clear``, absent before they were added): all of them,
    the catalog's and harness's words too, so the "new texts" figure is an upper bound."""
    clear = getattr(reference, "cache_clear", None)
    if clear is not None:
        clear()


def _static_texts() -> set[str]:
    """Texts embedded by the serving process's warm-up (the labelled intents, needs, replies ...)."""
    texts = [t for _, t in choice._intent_examples()] + list(choice.NEEDS.values()) + list(choice.REPLIES.values())
    texts += [d for d, _ in choice.REFUSAL_KINDS.values()] + [choice.CALL_TO_ACTION, choice.SKILL_CORRECTION]
    return set(texts)


# ---------------------------------------------------------------------------------------- runs

def timed_pass(trajectories: list[Trajectory], evict: list[set[str]] | None = None) -> list[tuple[float, float]]:
    """(CPU ms, wall ms) per respond() call; with ``evict``, each trajectory's comment texts are dropped
    from the embedding cache (and the policy's caches cleared) before it runs."""
    out: list[tuple[float, float]] = []
    for i, traj in enumerate(trajectories):
        if evict is not None:
            for text in evict[i]:
                for name in ("e5", "minilm"):
                    embed._CACHE.pop(name + "\x00" + text, None)
            _clear_text_caches()
        for raw in traj:
            ctx = json.loads(raw)
            c0, t0 = time.process_time(), time.perf_counter()
            reference.respond(ctx)
            out.append(((time.process_time() - c0) * 1000, (time.perf_counter() - t0) * 1000))
    return out


def summary(label: str, ms: list[float]) -> str:
    ms = sorted(ms)
    p = lambda q: ms[min(len(ms) - 1, int(q * len(ms)))]  # noqa: E731
    return (f"{label:<22} n={len(ms):<5} p50 {p(0.5):7.2f} ms  p95 {p(0.95):7.2f} ms  mean "
            f"{statistics.fmean(ms):7.2f} ms  total {sum(ms) / 1000:6.2f} s")


def profile(trajectories: list[Trajectory], evict: list[set[str]] | None, top: int) -> None:
    prof = cProfile.Profile()
    prof.enable()
    timed_pass(trajectories, evict)
    prof.disable()
    stats = pstats.Stats(prof, stream=sys.stdout)
    stats.strip_dirs()
    print(f"\n--- top {top} by cumulative time")
    stats.sort_stats("cumulative").print_stats(top)
    print(f"--- top {top} by self time")
    stats.sort_stats("tottime").print_stats(top)


def record(trajectories: list[Trajectory]) -> list[str]:
    return [reference.respond(json.loads(raw)) for traj in trajectories for raw in traj]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=160, help="dev cases sampled (default 160)")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--contexts", type=Path, default=None, help="save the contexts here, or read them if it exists")
    ap.add_argument("--repeat", type=int, default=3, help="timed passes per mode (the figures pool them)")
    ap.add_argument("--profile", action="store_true", help="cProfile one pass of each mode")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--mode", choices=("both", "cached", "new"), default="both")
    ap.add_argument("--record", type=Path, default=None, help="write respond() of every context (JSON Lines)")
    ap.add_argument("--compare", type=Path, default=None, help="compare respond() of every context to a record")
    args = ap.parse_args()

    t0 = time.perf_counter()
    trajectories = load_or_build(args.contexts, args.cases, args.seed)
    n = sum(len(t) for t in trajectories)
    print(f"contexts: {n} in {len(trajectories)} trajectories ({describe(trajectories)}); "
          f"built/loaded in {time.perf_counter() - t0:.1f} s; embeddings: {embed.backend()}; "
          f"policy: {reference.__file__}; OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', '-')}")

    if args.record or args.compare:
        outputs = record(trajectories)
        if args.record:
            args.record.write_text("".join(json.dumps(o, ensure_ascii=False) + "\n" for o in outputs),
                                   encoding="utf-8")
            print(f"recorded {len(outputs)} outputs to {args.record}")
        if args.compare:
            want = [json.loads(line) for line in args.compare.read_text(encoding="utf-8").splitlines()]
            # twice: with cold caches, then with every cache warm (a cache must never change an output)
            failed = False
            for label, got in (("cold caches", outputs), ("warm caches", record(trajectories))):
                diffs = [i for i, (a, b) in enumerate(zip(got, want, strict=True)) if a != b]
                print(f"compared {len(got)} outputs ({label}) with {args.compare}: {len(diffs)} differ")
                for i in diffs[:10]:
                    print(f"  #{i}: now {got[i]!r}\n       was {want[i]!r}")
                failed = failed or bool(diffs)
            if failed:
                sys.exit(1)
        return

    # warm-up: model loads and first embeddings, timed apart; it also logs each trajectory's queries
    t0 = time.perf_counter()
    screening.model()
    t_screen = time.perf_counter() - t0
    t0 = time.perf_counter()
    choice.warm_up()
    t_warm = time.perf_counter() - t0
    static = _static_texts()
    evict: list[set[str]] = []
    t0 = time.perf_counter()
    for traj in trajectories:
        _clear_text_caches()  # so that every trajectory logs all of its queries, whatever ran before it
        with QueryLog() as log:
            timed_pass([traj])
        evict.append(log.texts - static)
    t_first = time.perf_counter() - t0
    print(f"warm-up: screening model {t_screen:.2f} s, embedding model + warm-up texts {t_warm:.2f} s, "
          f"first pass (every text embedded once) {t_first:.2f} s ({t_first * 1000 / n:.1f} ms per call); "
          f"embedding cache {len(embed._CACHE)} texts")

    gc.collect()
    modes = {"cached": None, "new": evict}
    for mode, ev in modes.items():
        if args.mode not in ("both", mode):
            continue
        ms: list[tuple[float, float]] = []
        for _ in range(args.repeat):
            ms += timed_pass(trajectories, ev)
        label = "repeated texts" if ev is None else "new texts"
        print(summary(f"{label} (CPU)", [c for c, _ in ms]))
        print(summary(f"{label} (wall)", [w for _, w in ms]))
        if ev is not None:
            evicted = sum(len(e) for e in ev)
            print(f"{'':<22} ({evicted} comment texts evicted before their trajectory, "
                  f"{evicted / len(trajectories):.1f} per trajectory)")
    if args.profile:
        for mode, ev in modes.items():
            if args.mode not in ("both", mode):
                continue
            print(f"\n===== profile: {'repeated texts' if ev is None else 'new texts'}")
            profile(trajectories, ev, args.top)


if __name__ == "__main__":
    main()
