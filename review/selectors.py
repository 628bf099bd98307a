"""Reads of the review app (X6)."""

from __future__ import annotations

from django.db.models import QuerySet

from review.models import Score, ScoreDefinition
from traces.models import Trace


def score_definitions(*, active: bool = True) -> QuerySet[ScoreDefinition]:
    return ScoreDefinition.objects.filter(active=active).order_by("name")


def trace_scores(*, trace: Trace, message_sequence: int | None = None) -> QuerySet[Score]:
    """The trace's scores (trace-level and per message), oldest first."""
    scores = Score.objects.filter(trace=trace).select_related("definition", "author", "message")
    if message_sequence is not None:
        scores = scores.filter(message__sequence=message_sequence)
    return scores.order_by("created_at", "id")
