"""Reads of memory: which experiences a user may see, filtered listings."""

from __future__ import annotations

from collections import Counter
from typing import Any

from django.db.models import QuerySet

from memory.filters import ExperienceFilter
from memory.models import Experience, ExperienceStatus
from traces.models import TraceEvent


def experiences_visible_to(user: Any) -> QuerySet[Experience]:
    """Experts (staff) see every experience; other users only approved ones (M5)."""
    if not getattr(user, "is_authenticated", False):
        return Experience.objects.none()
    if user.is_staff:
        return Experience.objects.all()
    return Experience.objects.filter(status=ExperienceStatus.APPROVED)


def experience_list(*, user: Any, filters: Any) -> QuerySet[Experience]:
    """The experiences `user` may see, narrowed by `filters` (memory/filters.py:ExperienceFilter)."""
    experiences = experiences_visible_to(user).defer("embedding")
    return ExperienceFilter(filters, queryset=experiences).qs.order_by("code")


def tag_counts(*, statuses: tuple[str, ...] | None = None) -> dict[str, Counter[str]]:
    """How many experiences carry each tag, per kind (state, intent)."""
    experiences = Experience.objects.all()
    if statuses is not None:
        experiences = experiences.filter(status__in=statuses)
    counts: dict[str, Counter[str]] = {"state": Counter(), "intent": Counter()}
    for state_index, intent_index in experiences.values_list("state_index", "intent_index").iterator():
        counts["state"].update(state_index.split())
        counts["intent"].update(intent_index.split())
    return counts


def experiences_injected(trace: Any, *, runs: int = 20) -> list[dict[str, Any]]:
    """Why each experience was given to the trace's runs (their `experiences_retrieved`
    events, newest first): code, score, relevance and the tags and words it matched."""
    events = TraceEvent.objects.filter(trace=trace, type="experiences_retrieved").order_by("-event_id")
    shown: dict[str, dict[str, Any]] = {}
    for payload in events.values_list("payload", flat=True)[:runs]:
        for why in payload.get("why") or []:
            if isinstance(why, dict) and why.get("code"):
                shown.setdefault(
                    why["code"], {**why, "floor": payload.get("floor"), "tags": payload.get("tags")}
                )
    return list(shown.values())
