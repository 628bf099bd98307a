"""Optional embeddings of experiences (AGENT_EMBEDDING_MODEL) through the one litellm wrapper."""

from __future__ import annotations

import logging
import math

from memory.models import Experience, ExperienceStatus
from traces.llm import LLMError, embed, embedding_model

logger = logging.getLogger(__name__)


def cosine(a: list[float], b: list[float]) -> float:
    if len(a) != len(b):
        return 0.0
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


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
