"""Experience retrieval (M4, M5): tag the task, rank experiences, format them for the prompt.

Ranking. Candidates are the experiences in the wanted statuses (approved by
default) that share a tag with the task, or at least a quarter of its content
words. Each gets

    score = 4 * intent tags shared + 2 * state tags shared     (intent > state)
          + 3 * share of the task's words it contains           (full text)
          + (helpful - harmful) / (helpful + harmful + 1)       (in (-1, 1): never outweighs a tag)
          + 3 * embedding similarity    (cosine; only with AGENT_EMBEDDING_MODEL, re-ranks the top 50)

and the whole score is computed and sorted in ONE SQL query on both backends:
tags match the denormalised `intent_index` / `state_index` columns; words match
PostgreSQL's full-text search on PostgreSQL (a stored tsvector, English
stemming, `@@ plainto_tsquery` per word) and the stemmed `search_terms` column
on SQLite. Only the top rows are loaded.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connection

from memory import prompts
from memory.models import Experience, ExperienceStatus, normalize_tags
from traces.llm import LLMError, ModelNotConfigured, embed, embedding_model, utility_model

logger = logging.getLogger(__name__)

INTENT_WEIGHT = 4.0
STATE_WEIGHT = 2.0
TEXT_WEIGHT = 3.0
EMBEDDING_WEIGHT = 3.0
MIN_COVERAGE = 0.25  # a candidate without a shared tag must contain this share of the task's words
EMBEDDING_POOL = 50  # rows re-ranked by embedding similarity

_STOPWORDS = frozenset(
    """a about above after again all also an and any are as at be been before being below between both but by
    can could did do does doing down during each few for from further had has have having he her here hers how
    i if in into is it its itself just me more most my no nor not now of off on once only or other our out over
    own same she should so some such than that the their them then there these they this those through to too
    under until up very was we were what when where which while who whom why will with would you your yours
    please make sure use using get want need new one""".split()
)


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def terms(text: str, *, stem: bool = True) -> list[str]:
    """Distinct content words of `text`, lowercased and (crudely) stemmed, in order."""
    words = re.findall(r"\w+", (text or "").lower().replace("_", " "))
    kept = [w for w in words if w not in _STOPWORDS and (len(w) > 2 or w.isdigit())]
    return list(dict.fromkeys(_stem(w) if stem else w for w in kept))


@dataclass
class Scored:
    experience: Experience
    score: float
    parts: dict[str, float] = field(default_factory=dict)


# --- search --------------------------------------------------------------------------


def _contains(column: str, needle: str) -> tuple[str, list[Any]]:
    """SQL for "column contains needle" (a plain substring test, faster than LIKE)."""
    function = "strpos" if connection.vendor == "postgresql" else "instr"
    return f"{function}({column}, %s) > 0", [needle]


def _term_conditions(text: str) -> list[tuple[str, list[Any]]]:
    """One condition per content word of the task: full-text search on PostgreSQL
    (the stored tsvector, English stemming), the stemmed-terms column elsewhere."""
    if connection.vendor == "postgresql":
        return [
            ("search_vector @@ plainto_tsquery('english', %s)", [word]) for word in terms(text, stem=False)
        ]
    return [_contains("search_terms", f" {term} ") for term in terms(text)]


def _count(conditions: list[tuple[str, list[Any]]]) -> tuple[str, list[Any]]:
    if not conditions:
        return "0", []
    sql = " + ".join(f"(CASE WHEN {condition} THEN 1 ELSE 0 END)" for condition, _ in conditions)
    return sql, [p for _, params in conditions for p in params]


def experience_search(
    *,
    tags: dict[str, Any] | None = None,
    text: str = "",
    k: int | None = None,
    statuses: tuple[str, ...] = (ExperienceStatus.APPROVED,),
    agent_type: str | None = None,
    query_embedding: list[float] | None = None,
) -> list[Scored]:
    """The top `k` experiences for a task's tags and text, best first (see the module doc).

    One query scores and ranks every candidate in SQL; only the top rows are
    loaded (a pool of EMBEDDING_POOL when an embedding re-ranks them).
    """
    k = settings.AGENT_EXPERIENCE_TOP_K if k is None else k
    tags = normalize_tags(tags or {})
    term_conditions = _term_conditions(text)
    if k <= 0 or not (tags["intent"] or tags["state"] or term_conditions):
        return []
    rows = _ranked(tags, term_conditions, statuses, agent_type, EMBEDDING_POOL if query_embedding else k)
    loaded = (
        Experience.objects.all() if query_embedding is not None else Experience.objects.defer("embedding")
    )
    experiences = loaded.in_bulk([row["pk"] for row in rows])
    scored = []
    for row in rows:
        experience = experiences[row["pk"]]
        parts = {
            "intent": INTENT_WEIGHT * row["intent_hits"],
            "state": STATE_WEIGHT * row["state_hits"],
            "text": TEXT_WEIGHT * row["term_hits"] / max(len(term_conditions), 1),
            "helpful": (experience.helpful - experience.harmful)
            / (experience.helpful + experience.harmful + 1),
        }
        if query_embedding is not None and experience.embedding:
            parts["embedding"] = EMBEDDING_WEIGHT * max(0.0, cosine(query_embedding, experience.embedding))
        scored.append(Scored(experience, round(sum(parts.values()), 6), parts))
    scored.sort(key=lambda s: (-s.score, -s.experience.helpful, s.experience.code))
    return scored[:k]


def _ranked(
    tags: dict[str, list[str]],
    term_conditions: list[tuple[str, list[Any]]],
    statuses: tuple[str, ...],
    agent_type: str | None,
    limit: int,
) -> list[dict[str, Any]]:
    """Score every candidate and return the best `limit` as {pk, intent_hits, state_hits, term_hits}.

    Raw SQL so each match is evaluated once per row (the inner query), then
    filtered and sorted on the computed columns.
    """
    intent_sql, intent_params = _count([_contains("intent_index", f" {t} ") for t in tags["intent"]])
    state_sql, state_params = _count([_contains("state_index", f" {t} ") for t in tags["state"]])
    term_sql, term_params = _count(term_conditions)
    where = [f"status IN ({', '.join(['%s'] * len(statuses))})"]
    where_params: list[Any] = list(statuses)
    if agent_type:
        where.append("(scope = '' OR scope = %s OR scope = %s)")
        where_params += [f"agent:{agent_type}", agent_type]
    min_terms = max(1, math.ceil(MIN_COVERAGE * len(term_conditions)))
    text_weight = TEXT_WEIGHT / max(len(term_conditions), 1)
    sql = f"""
        SELECT id, intent_hits, state_hits, term_hits FROM (
            SELECT id, code, helpful, harmful,
                   {intent_sql} AS intent_hits, {state_sql} AS state_hits, {term_sql} AS term_hits
            FROM memory_experience
            WHERE {" AND ".join(where)}
        ) candidates
        WHERE intent_hits > 0 OR state_hits > 0 OR term_hits >= %s
        ORDER BY {INTENT_WEIGHT} * intent_hits + {STATE_WEIGHT} * state_hits + {text_weight!r} * term_hits
                 + (helpful - harmful) / (helpful + harmful + 1.0) DESC, helpful DESC, code
        LIMIT %s
    """
    params = [*intent_params, *state_params, *term_params, *where_params, min_terms, limit]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [
            {"pk": pk, "intent_hits": i, "state_hits": st, "term_hits": t}
            for pk, i, st, t in cursor.fetchall()
        ]


def cosine(a: list[float], b: list[float]) -> float:
    if len(a) != len(b):
        return 0.0
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


# --- embeddings ------------------------------------------------------------------------


def embed_text(text: str) -> list[float] | None:
    """The embedding of `text`, or None (no model configured, or the provider failed)."""
    model = embedding_model()
    if model is None:
        return None
    try:
        return embed([text[:8000]], model=model)[0]
    except LLMError as exc:
        logger.warning("embedding failed, retrieving without it: %s", exc)
        return None


def experience_embed(experience: Experience) -> bool:
    """Store the embedding of an experience's text (when an embedding model is configured)."""
    model = embedding_model()
    if model is None:
        return False
    vector = embed_text(experience.search_text or f"{experience.condition}\n{experience.rule}")
    if vector is None:
        return False
    Experience.objects.filter(pk=experience.pk).update(embedding=vector, embedding_model=model.model)
    experience.embedding, experience.embedding_model = vector, model.model
    return True


def embed_missing(*, codes: list[str] | None = None) -> int:
    """Embed approved experiences that have no embedding for the configured model."""
    model = embedding_model()
    if model is None:
        return 0
    missing = Experience.objects.filter(status=ExperienceStatus.APPROVED).exclude(embedding_model=model.model)
    if codes is not None:
        missing = missing.filter(code__in=codes)
    return sum(experience_embed(e) for e in missing)


# --- a new trace ------------------------------------------------------------------------


def task_tags(task: str, utility_call: Callable[..., Any]) -> dict[str, list[str]]:
    """The utility model's {state, intent} tags for a task; {} when it fails (the run goes on)."""
    try:
        response = utility_call(
            [{"role": "user", "content": prompts.TAG_PROMPT.format(task=task[:4000])}],
            model=utility_model(),
            params={"max_tokens": 120},
        )
    except (LLMError, ModelNotConfigured) as exc:
        logger.info("tagging the task failed: %s", exc)
        return {}
    data = parse_json_object(response.content or "")
    if not isinstance(data, dict) or not (data.get("state") or data.get("intent")):
        logger.info("tagging the task gave no usable JSON: %r", (response.content or "")[:200])
        return {}
    try:
        return normalize_tags(data)
    except (TypeError, ValueError):
        return {}


def parse_json_object(text: str) -> Any:
    """The JSON object in a model's answer (bare, or in a ```json fence); None if there is none."""
    text = text.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.S)
    if fenced:
        text = fenced.group(1).strip()
    if not text.startswith("{"):
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end <= start:
            return None
        text = text[start : end + 1]
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


@dataclass
class Retrieval:
    tags: dict[str, list[str]]
    experiences: list[Experience]

    def as_context(self) -> dict[str, Any]:
        return {"tags": self.tags, "retrieved": [e.code for e in self.experiences]}


def retrieve_for_task(
    task: str, *, utility_call: Callable[..., Any], agent_type: str | None
) -> Retrieval | None:
    """M4 for a new trace: tag the task, then search. None when there is nothing to search."""
    if (
        settings.AGENT_EXPERIENCE_TOP_K <= 0
        or not Experience.objects.filter(status=ExperienceStatus.APPROVED).exists()
    ):
        return None  # no model call when there is nothing to find
    tags = task_tags(task, utility_call)
    found = experience_search(tags=tags, text=task, agent_type=agent_type, query_embedding=embed_text(task))
    return Retrieval(tags=tags, experiences=[s.experience for s in found])


def format_experiences(experiences: list[Experience]) -> str:
    """The block appended to the first user message."""
    lines = [prompts.EXPERIENCES_HEADING, "", prompts.EXPERIENCES_INTRO, ""]
    lines += [e.prompt_line() for e in experiences]
    return "\n".join(lines)
