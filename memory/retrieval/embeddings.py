"""Optional embeddings of experiences (AGENT_EMBEDDING_MODEL) through the one litellm wrapper.

Experiences are embedded in batches of AGENT_EMBEDDING_BATCH texts, one provider
call per batch (`traces/llm.py:embed` retries it on rate limits and transient
errors), and stored as unit vectors with the model's name: in the JSON column as
one string, the base64 of the little-endian float32 values (`pack` / `unpack`).
Retrieval reads a few hundred of them per task: a JSON list of floats takes
~80 us to parse per 256 dimensions (~0.5 ms for a 1536-dimension model), the
string a few microseconds. An edit of the text an
embedding was made from clears it (`memory/models.py:Experience.save`), so
`embed_missing` finds it again. A provider that still fails never blocks an
approval or a retrieval: the failure is logged, the experiences stay unembedded
(retrieval ranks them lexically) and the next `embed_missing` tries again.
"""

from __future__ import annotations

import base64
import logging
import math
import operator
import sys
from array import array
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from django.conf import settings
from django.db.models import Q, QuerySet
from django.utils import timezone

from memory.models import Experience, ExperienceStatus
from memory.retrieval import pgvector
from traces.llm import LLMError, ModelSettings, embed, embedding_model

logger = logging.getLogger(__name__)

MAX_CHARS = 8000  # per text; longer experiences are cut (the condition and tags come first)
Progress = Callable[[int, int], None]  # (embedded so far, to embed)


def dot(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine of two unit vectors (0 when their dimensions differ: another model's)."""
    return sum(map(operator.mul, a, b)) if len(a) == len(b) else 0.0


def unit(vector: list[float]) -> list[float]:
    """`vector` scaled to length 1."""
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else vector


def pack(vector: list[float]) -> str:
    """The stored form of a unit vector: base64 of little-endian float32."""
    values = array("f", vector)
    if sys.byteorder == "big":
        values.byteswap()
    return base64.b64encode(values.tobytes()).decode("ascii")


def unpack(stored: Any) -> Sequence[float]:
    """A stored embedding as floats (`pack`'s string; a JSON list of floats is read as is)."""
    if isinstance(stored, list):
        return stored
    if not isinstance(stored, str) or not stored:
        return ()
    values = array("f", base64.b64decode(stored))
    if sys.byteorder == "big":
        values.byteswap()
    return values


def embedding_text(experience: Experience) -> str:
    """What an experience's embedding is made from: category, tags, condition, rule."""
    return (experience.search_text or f"{experience.condition}\n{experience.rule}")[:MAX_CHARS]


def embed_text(text: str) -> list[float] | None:
    """The embedding of a task's text, or None (no model configured, or the provider failed:
    retrieval then goes on lexically)."""
    model = embedding_model()
    if model is None:
        return None
    try:
        return unit(embed([text[:MAX_CHARS]], model=model)[0])
    except LLMError as exc:
        logger.warning("embedding the task failed, retrieving lexically: %s", exc)
        return None


def embed_task(task: str, tags: dict[str, list[str]] | None = None) -> list[float] | None:
    """The embedding of a task with its tags (as an experience's embedding has its own)."""
    words = [t.replace("_", " ") for kind in ("intent", "state") for t in (tags or {}).get(kind, [])]
    return embed_text(f"{' '.join(words)}\n{task}" if words else task)


def experiences_embed(
    experiences: Iterable[Experience], *, batch: int | None = None, on_progress: Progress | None = None
) -> int:
    """Embed and store `experiences`, `batch` texts per provider call; how many were stored.

    Stops at the first batch that fails after its retries (logged): what was stored stays.
    """
    model = embedding_model()
    if model is None:
        return 0
    size = batch or settings.AGENT_EMBEDDING_BATCH
    todo = list(experiences)
    done = 0
    for start in range(0, len(todo), size):
        chunk = todo[start : start + size]
        if not _embed_batch(chunk, model):
            break
        done += len(chunk)
        if on_progress is not None:
            on_progress(done, len(todo))
    return done


def _embed_batch(chunk: list[Experience], model: ModelSettings) -> bool:
    try:
        vectors = embed([embedding_text(e) for e in chunk], model=model)
    except LLMError as exc:
        logger.warning("embedding %d experience(s) failed, they stay lexical-only: %s", len(chunk), exc)
        return False
    now = timezone.now()
    for experience, vector in zip(chunk, vectors, strict=True):
        experience.embedding, experience.embedding_model = pack(unit(vector)), model.model
        experience.embedded_at = now  # what a process's matrix of vectors watches (vectors.py)
    # bulk_update, not save(): neither updated_at nor the text indexes change
    Experience.objects.bulk_update(chunk, ["embedding", "embedding_model", "embedded_at"])
    pgvector.store((experience, unit(vector)) for experience, vector in zip(chunk, vectors, strict=True))
    return True


def embedding_candidates(*, codes: list[str] | None = None, everything: bool = False) -> QuerySet[Experience]:
    """Approved experiences without an embedding from the configured model (all approved
    ones with `everything`), in code order; none when no model is configured."""
    model = embedding_model()
    approved = Experience.objects.filter(status=ExperienceStatus.APPROVED).order_by("code")
    if model is None:
        return approved.none()
    if codes is not None:
        approved = approved.filter(code__in=codes)
    if everything:
        return approved
    return approved.filter(Q(embedding__isnull=True) | ~Q(embedding_model=model.model))


def embed_missing(
    *, codes: list[str] | None = None, everything: bool = False, on_progress: Progress | None = None
) -> int:
    """Embed the approved experiences that need it (see `embedding_candidates`), in batches."""
    candidates = embedding_candidates(codes=codes, everything=everything).defer("embedding")
    return experiences_embed(candidates.iterator(chunk_size=1000), on_progress=on_progress)
