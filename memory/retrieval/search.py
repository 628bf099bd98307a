"""Ranking experiences for a task (M4, M5), with a relevance floor.

    relevance = 4 * intent tags shared + 2 * state tags shared       (intent > state)
              + 3 * coverage: share of the task's words its tags or condition match (stemmed)
    score     = relevance
              + 3 * rank: the database's own full-text rank in [0, 1) (ts_rank_cd / bm25:
                field weights, length normalisation, IDF on SQLite; memory/retrieval/lexical.py)
              + 0.1 * trust: votes / 2 + (confidence - 0.5), in (-1, 1)  (orders near-ties: at
                0.5, ten helpful votes lifted word-salad distractors over lessons that matched
                one more of the task's words; bench/retrieval.py)

With a task embedding (AGENT_EMBEDDING_MODEL), this lexical order is fused with
the embedding order by reciprocal rank fusion (memory/retrieval/fusion.py), which
also owns the floor's embedding half.

An experience is returned only when its relevance reaches
AGENT_EXPERIENCE_MIN_SCORE (default 0.75, calibrated on bench/retrieval.py's
sets): any shared tag clears it; words alone must cover a quarter of the task,
so a task that shares a word with an unrelated lesson gets nothing. The floor
is on coverage, not on the rank, because only coverage means the same on both
databases and in a library of three experiences (bm25's IDF is ~0 there and
ts_rank_cd has none); the rank orders what passes. The database ranks the
candidates in one query (tags and coverage first, the full-text rank for the
best of those) and says which words each of its best POOL rows matched;
coverage, the floor and the final order are computed here for those rows.
Candidates are the experiences in the wanted statuses whose scope fits the run:
everyone (""), the run's agent type (`agent:<type>`), the run's user (`user:<id>`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from memory.models import Experience, ExperienceStatus
from memory.retrieval.fusion import EMBEDDING_POOL, Library, fuse, lexical_order
from memory.retrieval.lexical import query_words, ranked
from memory.tags import normalize_tags
from traces.llm import embedding_model

WEIGHTS = {"intent": 4.0, "state": 2.0, "text": 3.0, "rank": 3.0, "trust": 0.1}
POOL = 50  # rows the database ranks first, then scored here


@dataclass
class Scored:
    experience: Experience
    score: float
    parts: dict[str, float] = field(default_factory=dict)
    matched: dict[str, list[str]] = field(
        default_factory=dict
    )  # {"intent": [...], "state": [...], "words": [...]}
    fusion: dict[str, Any] | None = None  # ranks, cosine and fused score (memory/retrieval/fusion.py)

    @property
    def relevance(self) -> float:
        return sum(v for k, v in self.parts.items() if k in ("intent", "state", "text"))

    def why(self) -> dict[str, Any]:
        """What the trace records about this experience being chosen."""
        return {
            "code": self.experience.code,
            "score": round(self.score, 3),
            "relevance": round(self.relevance, 3),
            "parts": {k: round(v, 3) for k, v in self.parts.items()},
            "matched": self.matched,
            **({"fusion": self.fusion} if self.fusion is not None else {}),
        }


def scopes_for(*, agent_type: str | None, user_id: int | None) -> list[str]:
    """Experiences for everyone, for this agent type, or for this user (seed 003's scope)."""
    scopes = [""]
    if agent_type:
        scopes += [f"agent:{agent_type}", agent_type]
    if user_id is not None:
        scopes.append(f"user:{user_id}")
    return scopes


def experience_search(
    *,
    tags: dict[str, Any] | None = None,
    text: str = "",
    k: int | None = None,
    statuses: tuple[str, ...] = (ExperienceStatus.APPROVED,),
    agent_type: str | None = None,
    user_id: int | None = None,
    query_embedding: list[float] | None = None,
    min_score: float | None = None,
    explain: bool = False,
    codes: list[str] | None = None,
) -> list[Scored]:
    """The top `k` experiences for a task's tags and text at or above the floor, best first.

    Two queries: one ranks the candidates and returns the best POOL with the task
    words each matched, one loads those experiences. With `explain`, each result
    carries the tags and words it matched.
    """
    k = settings.AGENT_EXPERIENCE_TOP_K if k is None else k
    floor = settings.AGENT_EXPERIENCE_MIN_SCORE if min_score is None else min_score
    tags = normalize_tags(tags or {}, canonical=True)
    words = query_words(text)
    if k <= 0 or not (tags["intent"] or tags["state"] or words):
        return []
    scopes = scopes_for(agent_type=agent_type, user_id=user_id)
    rows = ranked(
        statuses=list(statuses),
        scopes=scopes,
        tags=tags,
        words=words,
        weights=WEIGHTS,
        limit=max(POOL, k, EMBEDDING_POOL if query_embedding else 0),
        codes=codes,
        # a lesson matching only in its rule has relevance 0: below any floor above 0, and
        # fusion's cosine half may still take it, so it stays a candidate there
        applies_only=floor > 0 and not query_embedding,
    )
    rows, extra = rows[: max(POOL, k)], [row["pk"] for row in rows[max(POOL, k) :]]
    experiences = Experience.objects.defer("embedding").in_bulk([row["pk"] for row in rows])
    matched = {row["pk"]: row["words"] for row in rows}
    scored = [_scored(experiences[row["pk"]], row, matched, words) for row in rows]
    if query_embedding:
        model = embedding_model()
        library = (
            Library(model=model.model, scopes=scopes, codes=codes)
            if model is not None and tuple(statuses) == (ExperienceStatus.APPROVED,)
            else None
        )
        top = fuse(
            scored,
            extra=extra,
            query_embedding=query_embedding,
            floor=floor,
            k=k,
            make=_unmatched,
            library=library,
        )
    else:
        top = sorted((s for s in scored if s.relevance >= floor), key=lexical_order)[:k]
    if explain:
        _explain(top, tags, matched)
    return top


def _scored(
    experience: Experience,
    row: dict[str, Any],
    matched: dict[int, list[str]],
    words: list[str],
) -> Scored:
    votes = (experience.helpful - experience.harmful) / (experience.helpful + experience.harmful + 1)
    coverage = len(matched.get(row["pk"], [])) / len(words) if words else 0.0
    parts = {
        "intent": WEIGHTS["intent"] * row["intent_hits"],
        "state": WEIGHTS["state"] * row["state_hits"],
        "text": WEIGHTS["text"] * coverage,
        "rank": WEIGHTS["rank"] * row["rank"],
        "trust": WEIGHTS["trust"] * (votes / 2 + experience.confidence - 0.5),
    }
    return Scored(experience, round(sum(parts.values()), 6), parts)


def _unmatched(experience: Experience) -> Scored:
    """An embedding candidate beyond the lexical pool: no lexical part."""
    return Scored(experience, 0.0, {})


def _explain(found: list[Scored], tags: dict[str, list[str]], by_pk: dict[int, list[str]]) -> None:
    for s in found:
        own = normalize_tags(s.experience.tags, canonical=True)
        s.matched = {
            "intent": [t for t in tags["intent"] if t in own["intent"]],
            "state": [t for t in tags["state"] if t in own["state"]],
            "words": by_pk.get(s.experience.pk, []),
        }
