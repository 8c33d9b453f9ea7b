"""Failure clustering and rule-based harness edit proposals.

Clustering: failed result lines are grouped first by *cause* — the first judge code (e.g.
``false_promise:free gift``, ``number_not_in_data``) or, without one, the first hook reason that was
not a pass (digits and quoted values normalised away) — and each cause group is then split by
text similarity (TF-IDF over comment + reply, cosine, average-linkage agglomerative clustering
with a similarity threshold).

Proposals: for the largest clusters a rule maps the cause to a concrete harness edit — add a banned
phrase, add an injection pattern to every hook of kind ``input_validation``, add a
``claims_requiring_evidence`` entry, tighten ``max_reply_chars``, add a campaign rule line, reword
the description of the reply skill most often loaded in the cluster. Edits read the harness they
are given (hooks found by kind, skills by what the failing results loaded): nothing here names a
skill, tool, hook or section. The result is a new bundle plus a diff; it is applied only after a
human review in the registry workflow.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from livehost.harness.diff import format_diff
from livehost.harness.model import Harness

TOKEN = re.compile(r"[a-z0-9%]+")
STOP = frozenset("a an the is are it this that to of and or for in on at be do does with you your my me i "
                 "we our can any how what".split())


@dataclass
class Cluster:
    cause: str
    members: list[dict[str, Any]]
    texts: list[str] = field(default_factory=list)

    @property
    def size(self) -> int:
        return len(self.members)

    def examples(self, k: int = 3) -> list[dict[str, Any]]:
        return self.members[:k]


@dataclass
class Edit:
    cluster: str
    kind: str
    description: str
    rationale: str


def is_failure(result: dict[str, Any], *, include_partial: bool = False) -> bool:
    s = result.get("scores") or {}
    if not s:
        return False
    threshold = 1.0 if include_partial else 0.5
    return s.get("accuracy", 1) == 0 or float(s.get("effectiveness", 1)) < threshold


def _normalise_reason(reason: str) -> str:
    reason = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", reason)
    return re.sub(r"\d+(?:\.\d+)?", "N", reason).strip()


def cause_of(result: dict[str, Any]) -> str:
    codes = (result.get("scores") or {}).get("codes") or []
    acc_codes = [c for c in codes if not c.startswith("eff:")]
    if acc_codes:
        return acc_codes[0]
    for event in result.get("hook_events") or []:
        if event.get("verdict") not in (None, "pass") and event.get("reason"):
            return f"hook:{_normalise_reason(str(event['reason']))}"
    return codes[0] if codes else "unknown"


def tokens(text: str) -> list[str]:
    return [t for t in TOKEN.findall(text.lower()) if t not in STOP]


def tfidf(texts: Sequence[str]) -> np.ndarray:
    """Rows L2-normalised TF-IDF vectors (smooth idf)."""
    docs = [tokens(t) for t in texts]
    vocab = sorted({w for d in docs for w in d})
    index = {w: i for i, w in enumerate(vocab)}
    m = np.zeros((len(docs), max(1, len(vocab))))
    for r, d in enumerate(docs):
        for w, c in Counter(d).items():
            m[r, index[w]] = c
    df = (m > 0).sum(axis=0)
    idf = np.log((1 + len(docs)) / (1 + df)) + 1.0
    m = m * idf
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return m / norms


def agglomerative(vectors: np.ndarray, threshold: float = 0.3) -> list[list[int]]:
    """Average-linkage agglomerative clustering on cosine similarity; merge while the best pair of
    clusters is at least ``threshold`` similar."""
    n = vectors.shape[0]
    clusters: list[list[int]] = [[i] for i in range(n)]
    if n <= 1:
        return clusters
    sim = vectors @ vectors.T
    while len(clusters) > 1:
        best, pair = -1.0, (0, 0)
        for i in range(len(clusters)):
            for j in range(i + 1, len(clusters)):
                s = float(sim[np.ix_(clusters[i], clusters[j])].mean())
                if s > best:
                    best, pair = s, (i, j)
        if best < threshold:
            break
        i, j = pair
        clusters[i] = clusters[i] + clusters[j]
        del clusters[j]
    return sorted(clusters, key=lambda c: (-len(c), c[0]))


def cluster_failures(results: Sequence[dict[str, Any]], cases: Sequence[dict[str, Any]] | None = None, *,
                     threshold: float = 0.3, include_partial: bool = False) -> list[Cluster]:
    comments = {str(c["id"]): " ".join(x.get("text", "") for x in c.get("comments") or []) for c in cases or []}
    failed = [r for r in results if is_failure(r, include_partial=include_partial)]
    by_cause: dict[str, list[dict[str, Any]]] = {}
    for r in failed:
        by_cause.setdefault(cause_of(r), []).append(r)
    clusters: list[Cluster] = []
    for cause, members in by_cause.items():
        texts = [f"{comments.get(str(m['id']), '')} {m.get('reply') or ''}" for m in members]
        for group in agglomerative(tfidf(texts), threshold):
            clusters.append(Cluster(cause, [members[i] for i in group], [texts[i] for i in group]))
    return sorted(clusters, key=lambda c: (-c.size, c.cause))


# -- proposals ----------------------------------------------------------------------------------

def _common_phrase(texts: Sequence[str], min_n: int = 2, max_n: int = 4) -> str | None:
    """The longest word n-gram shared by most texts (at least two, or the one text)."""
    best: tuple[int, int, str] | None = None
    docs = [re.findall(r"[a-z0-9%']+", t.lower()) for t in texts]
    for n in range(max_n, min_n - 1, -1):
        counts: Counter[str] = Counter()
        for d in docs:
            counts.update({" ".join(d[i:i + n]) for i in range(len(d) - n + 1)})
        for gram, c in counts.items():
            if all(w in STOP for w in gram.split()):
                continue
            if (c >= 2 or len(docs) == 1) and (best is None or (c, n) > best[:2]):
                best = (c, n, gram)
    return best[2] if best else None


def _reply_skill(harness: Harness, members: Sequence[dict[str, Any]]) -> str | None:
    reply_ids = {s.id for s in harness.skills if s.kind == "reply"}
    loaded = Counter(s for m in members for s in m.get("skills_loaded") or [] if s in reply_ids)
    return loaded.most_common(1)[0][0] if loaded else None


def propose(harness: Harness, clusters: Sequence[Cluster], cases: Sequence[dict[str, Any]] | None = None, *,
            top: int = 5) -> tuple[Harness, list[Edit]]:
    """Apply one rule-based edit per cluster (largest first, up to ``top``) to a copy of ``harness``."""
    data = harness.canonical()
    rules = data["rules"]
    edits: list[Edit] = []
    case_map = {str(c["id"]): c for c in cases or []}
    for k, cluster in enumerate(clusters[:top], 1):
        label = f"cluster {k} ({cluster.cause}, {cluster.size} case(s))"
        cause = cluster.cause
        member_cases = [case_map.get(str(m["id"])) or {} for m in cluster.members]
        comment_texts = [" ".join(x.get("text", "") for x in c.get("comments") or []) for c in member_cases]
        if cause.startswith("false_promise:") or cause == "must_not_include":
            phrase = cause.split(":", 1)[1] if ":" in cause else None
            if phrase is None:  # the forbidden strings the replies actually said
                said = Counter(s for c, m in zip(member_cases, cluster.members, strict=True)
                               for s in (c.get("expect") or {}).get("must_not_include") or []
                               if s.lower() in str(m.get("reply") or "").lower())
                phrase = said.most_common(1)[0][0] if said else None
            if phrase and phrase.lower() not in [p.lower() for p in rules["banned_phrases"]]:
                rules["banned_phrases"].append(phrase.lower())
                edits.append(Edit(label, "rules.banned_phrases", f"add banned phrase {phrase.lower()!r}",
                                  "replies promised or said something the data does not back"))
                continue
        if cause.startswith("unsupported_claim:"):
            term = cause.split(":", 1)[1]
            if term not in [c.lower() for c in rules["claims_requiring_evidence"]]:
                rules["claims_requiring_evidence"].append(term)
                edits.append(Edit(label, "rules.claims_requiring_evidence", f"require evidence for {term!r}",
                                  "replies claimed a feature the product data does not show"))
                continue
        if cause == "answered_when_silence_expected" or (cause.startswith("eff:answered")):
            phrase = _common_phrase(comment_texts)
            hooks = [h for h in data["hooks"] if h["kind"] == "input_validation" and h["enabled"]]
            if phrase and hooks:
                pattern = r"\b" + r"\W+".join(re.escape(w) for w in phrase.split()) + r"\b"
                for hook in hooks:
                    hook["params"].setdefault("injection_patterns", [])
                    if pattern not in hook["params"]["injection_patterns"]:
                        hook["params"]["injection_patterns"].append(pattern)
                edits.append(Edit(label, "hooks.input_validation.injection_patterns",
                                  f"screen comments matching {pattern!r} in {len(hooks)} input-validation hook(s)",
                                  f"comments like {comment_texts[0][:80]!r} got a substantive answer"))
                continue
        if cause in ("discount_above_cap", "coupon_above_cap"):
            line = (f"Never offer or confirm a discount or coupon above {rules['max_discount_pct']:g}%; say the "
                    f"campaign maximum instead.")
            if line not in rules["extra"]:
                rules["extra"].append(line)
                edits.append(Edit(label, "rules.extra", f"add rule {line!r}",
                                  "replies offered discounts above the campaign maximum"))
                continue
        if cause.startswith("hook:") and "longer than" in cause:
            new = max(80, int(rules["max_reply_chars"] * 0.8))
            if new < rules["max_reply_chars"]:
                edits.append(Edit(label, "rules.max_reply_chars", f"max_reply_chars {rules['max_reply_chars']} → {new}",
                                  "replies kept exceeding the length limit"))
                rules["max_reply_chars"] = new
                continue
        if cause in ("eff:missing_facts", "eff:partial_facts", "eff:no_nudge", "eff:deflection", "number_not_in_data"):
            skill_id = _reply_skill(harness, cluster.members)
            if skill_id:
                skill = next(s for s in data["skills"] if s["id"] == skill_id)
                addition = {"eff:no_nudge": " End by pointing the viewer to the live link.",
                            "number_not_in_data": " Only quote numbers shown in tool results or product data."
                            }.get(cause, " Answer every fact the viewer asked (price, stock, coupon, specs) "
                                         "explicitly.")
                if addition.strip() not in skill["description"]:
                    skill["description"] = skill["description"].rstrip() + addition
                    edits.append(Edit(label, "skills.description", f"reword the description of skill {skill_id}",
                                      f"cases loading it failed with {cause}"))
                    continue
    proposed = Harness.model_validate(data) if edits else harness
    return proposed, edits


def proposal_diff(old: Harness, new: Harness) -> str:
    return format_diff(old, new, "current", "proposed")


def summarize_clusters(clusters: Sequence[Cluster], k: int = 3) -> list[dict[str, Any]]:
    out = []
    for n, c in enumerate(clusters, 1):
        reasons = [((m.get("scores") or {}).get("reasons") or {}) for m in c.members]
        out.append({"cluster": n, "cause": c.cause, "size": c.size,
                    "examples": [{"id": m["id"], "reply": m.get("reply"),
                                  "reason": r.get("accuracy") if (m.get("scores") or {}).get("accuracy") == 0
                                  else r.get("effectiveness")} for m, r in list(zip(c.members, reasons,
                                                                                   strict=True))[:k]]})
    return out
