"""Skill and tool choice by what descriptions mean.

The policy knows what it *needs* (a product's details, stock, usable discount codes, …) and what kind
of reply it is about to give (a price answer, an after-sales answer, a refusal, …). Each need and
reply kind is described here once, in plain words of our own; the harness's tools and skills are
matched to them by the cosine similarity of sentence embeddings (MiniLM, :mod:`embed`) of those
descriptions against each tool's name, description and parameter descriptions, or each skill's id,
description and body. Nothing here copies the shipped harness's wording, and a harness whose ids are
opaque and whose descriptions are reworded is matched the same way.

Needs and tools are matched one to one (most similar pairs first). A reply skill is ranked for a
reply kind by how much more similar it is to that kind than the other reply skills are.
Without the embedding model, a bag-of-stems overlap is used.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import cache, lru_cache
from typing import Any

NEEDS: dict[str, str] = {
    "product": "look up one listed item's details by its link number: name, how much it costs, currency, "
               "and its properties such as colours, sizes and materials",
    "inventory": "how many units of an item remain and whether it can still be bought or has sold out",
    "coupon": "which discount codes a shopper may use on an item, the percent taken off and the minimum "
              "purchase amount",
    "coupon_issue": "grant one particular viewer a discount code, sending it to their account",
    "faq": "search the merchant's help answers to common questions such as care, fit, delivery and returns",
    "order": "the progress of a purchase a viewer already made: shipped or not, courier, arrival date",
    "pin": "show the item's purchase card on the live screen so people can tap it and pay",
    "search": "find which items in the room match words a viewer used to name an item",
}
REPLIES: dict[str, str] = {
    "price": "answer how much an item costs: its price, and any deal or discount on it",
    "coupon": "tell a viewer which promotion codes and price reductions apply",
    "stock": "tell a viewer whether an item is still in stock, how many are left, or that it sold out",
    "attribute": "answer a viewer's question about what an item is like: properties, materials, options, "
                 "measurements",
    "faq": "answer common questions about care, fit, delivery and returns from the merchant's answers",
    "purchase": "help a viewer who wants to buy now: point to the item and how to pay",
    "post_purchase": "help a buyer with an order already placed: delivery progress, returns, refunds",
    "chit_chat": "greet viewers and answer small talk that is not about the products, warmly",
    "refusal": "politely decline a request that breaks the rules or is not allowed",
}
# Why a compliance risk is declined, each with what the host says: a viewer who asks for a medical
# promise should hear why not and whom to ask, one who asks about another viewer hears about privacy.
REFUSAL_KINDS: dict[str, tuple[str, str]] = {
    "privacy": ("personal details of another person: their address, phone number, name, who bought "
                "something, where a buyer lives",
                "Sorry, I can't share anyone's personal information: every viewer's privacy is protected."),
    "health": ("a medical or health effect: curing or treating an illness or disease, pain, losing weight, "
               "medicine for a person or a pet, whether a sick person, a baby or an animal will be fine",
               "I can't make medical promises: this is not a medicine, so please ask a doctor (or a vet for "
               "pets) about a health condition."),
    "promise": ("a promise of certain results: one hundred percent sure, results within days, works for "
                "everyone, forever",
                "I can't promise results: they differ from person to person."),
    "fraud": ("fake or copied goods: a replica or knockoff of a famous brand, a forged receipt, invoice or "
              "certificate, paid reviews, dodging tax or customs",
              "Sorry, I can't help with that: we only sell genuine goods, with real receipts and honest reviews."),
}
CALL_TO_ACTION = "end the answer by inviting the viewer to tap the link or card and buy"
SKILL_CORRECTION = "a reply instruction set must be loaded before answering; load the one that fits"

_WORD = re.compile(r"[a-z]+")


@lru_cache(maxsize=4096)  # a pure function of a name; every policy call re-reads the same tools' names
def split_identifier(text: str) -> str:
    return re.sub(r"([a-z])([A-Z])", r"\1 \2", text).replace("_", " ").replace("-", " ")


def tool_text(tool: dict[str, Any]) -> str:
    params = (tool.get("parameters") or {}).get("properties") or {}
    parts = [split_identifier(str(tool.get("name", ""))), str(tool.get("description", ""))]
    for name, schema in params.items():
        desc = schema.get("description", "") if isinstance(schema, dict) else ""
        parts.append(f"{split_identifier(str(name))} {desc}")
    return ". ".join(p for p in parts if p)


def skill_text(skill: dict[str, Any]) -> str:
    return f"{split_identifier(str(skill.get('id', '')))}. {skill.get('description', '')}"


def _lexical(a: str, b: str, stem: Callable[[str], str], stop: set[str]) -> float:
    sa = {stem(w) for w in _WORD.findall(a.lower()) if w not in stop}
    sb = {stem(w) for w in _WORD.findall(b.lower()) if w not in stop}
    return len(sa & sb) / max(1.0, (len(sa) * len(sb)) ** 0.5)


def similarity_matrix(left: list[str], right: list[str], stem: Callable[[str], str], stop: set[str]
                      ) -> list[list[float]]:
    from livehost.understanding import embed

    if left and right and embed.available():
        name = embed.backend(" ".join(left))
        a = embed.embed(left, name)
        b = embed.embed(right, name)
        return [[float(x) for x in row] for row in embed.rescale(a @ b.T, name)]
    return [[_lexical(x, y, stem, stop) for y in right] for x in left]


_ASSIGN_CACHE: dict[str, dict[str, list[tuple[float, int]]]] = {}


def assign(kinds: dict[str, str], items: list[str], stem: Callable[[str], str], stop: set[str],
           descriptions: list[str] | None = None) -> dict[str, list[tuple[float, int]]]:
    """kind -> [(similarity, item index)]: a one-to-one matching of kinds and items, most similar pairs
    first (a greedy maximum matching), so two kinds never take the same item and an item that is a bit
    similar to everything is not taken by the wrong kind."""
    key = json.dumps([sorted(kinds), items, descriptions])
    if key in _ASSIGN_CACHE:
        return _ASSIGN_CACHE[key]
    names = list(kinds)
    sims = similarity_matrix([kinds[n] for n in names], items, stem, stop)
    if descriptions is not None:  # an opaque name adds noise: the description alone may mean more
        alone = similarity_matrix([kinds[n] for n in names], descriptions, stem, stop)
        sims = [[max(a, b) for a, b in zip(r1, r2, strict=True)] for r1, r2 in zip(sims, alone, strict=True)]
    pairs = sorted(((sims[i][j], i, j) for i in range(len(names)) for j in range(len(items))), reverse=True)
    out: dict[str, list[tuple[float, int]]] = {n: [] for n in names}
    used_kind: set[int] = set()
    used_item: set[int] = set()
    for sim, i, j in pairs:
        if i in used_kind or j in used_item:
            continue
        used_kind.add(i)
        used_item.add(j)
        out[names[i]].append((sim, j))
    if len(_ASSIGN_CACHE) > 256:
        _ASSIGN_CACHE.clear()
    _ASSIGN_CACHE[key] = out
    return out


def similarity(a: str, b: list[str], stem: Callable[[str], str], stop: set[str]) -> list[float]:
    return similarity_matrix([a], b, stem, stop)[0] if b else []


INTENT_EXAMPLES_PATH = __import__("pathlib").Path(__file__).resolve().parent / "data" / "intents.jsonl"


@cache
def _intent_examples() -> list[tuple[str, str]]:
    rows = [json.loads(line) for line in INTENT_EXAMPLES_PATH.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [(str(r["intent"]), str(r["text"])) for r in rows]


def intent_scores(text: str, stem: Callable[[str], str], stop: set[str], k: int = 3) -> list[tuple[str, float]]:
    """Intents ranked by the mean similarity of their ``k`` labelled examples (``data/intents.jsonl``)
    most similar to ``text``: a vote of neighbours, so one lucky example does not decide alone."""
    examples = _intent_examples()
    sims = similarity(text, [t for _, t in examples], stem, stop)
    by_label: dict[str, list[float]] = {}
    for (label, _), sim in zip(examples, sims, strict=True):
        by_label.setdefault(label, []).append(sim)
    scores = {label: sum(top := sorted(v, reverse=True)[:k]) / len(top) for label, v in by_label.items()}
    return sorted(scores.items(), key=lambda kv: -kv[1])


def nearest_intent(text: str, stem: Callable[[str], str], stop: set[str], minimum: float = 0.5,
                   margin: float = 0.0) -> tuple[str, float] | None:
    """The intent whose labelled examples are most similar to ``text``, when similar enough and ahead of
    the next intent by ``margin``: the fallback for comments that no lexical cue explains ("what do you
    want for that?", "is the blue one gone?")."""
    from livehost.understanding import embed

    if not embed.available():
        return None
    ranked = intent_scores(text, stem, stop)
    best, score = ranked[0]
    second = ranked[1][1] if len(ranked) > 1 else 0.0
    return (best, score) if score >= minimum and score - second >= margin else None


def refusal_kind(text: str, stem: Callable[[str], str], stop: set[str], threshold: float) -> str | None:
    """The reason (a key of :data:`REFUSAL_KINDS`) a declined comment is most like, when it is clearly
    one of them; None for the others (counterfeits, fake receipts, …: a plain refusal)."""
    from livehost.understanding import embed

    kinds = list(REFUSAL_KINDS)
    descriptions = [REFUSAL_KINDS[k][0] for k in kinds]
    if embed.available():
        scores = embed.similarity(text, descriptions)
    else:
        q = {stem(w) for w in _WORD.findall(text.lower())} - stop
        scores = [len(q & ({stem(w) for w in _WORD.findall(d)} - stop)) / max(len(q), 1) for d in descriptions]
    best = max(range(len(kinds)), key=lambda i: scores[i])
    return kinds[best] if scores[best] >= threshold else None


def warm_up() -> None:
    """Embed the labelled intent examples and the descriptions of needs, replies and refusal reasons
    once, before the first request: several hundred texts would otherwise be embedded by whichever
    request needs them first (seconds on a CPU)."""
    from livehost.understanding import embed

    if embed.available():
        texts = [t for _, t in _intent_examples()] + list(NEEDS.values()) + list(REPLIES.values()) + [
            description for description, _ in REFUSAL_KINDS.values()] + [CALL_TO_ACTION, SKILL_CORRECTION]
        embed.embed(texts, embed.backend())
