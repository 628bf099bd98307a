"""Reads of memory: which experiences a user may see, filtered listings."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from memory.models import Experience, ExperienceStatus, normalize_tag


def experiences_visible_to(user: Any) -> QuerySet[Experience]:
    """Experts (staff) see every experience; other users only approved ones (M5)."""
    if not getattr(user, "is_authenticated", False):
        return Experience.objects.none()
    if user.is_staff:
        return Experience.objects.all()
    return Experience.objects.filter(status=ExperienceStatus.APPROVED)


def experience_list(*, user: Any, filters: dict[str, Any]) -> QuerySet[Experience]:
    experiences = experiences_visible_to(user).defer("embedding")
    for field in ("status", "category", "source"):
        if field in filters:
            experiences = experiences.filter(**{field: filters[field]})
    if "tag" in filters:
        tag = f" {normalize_tag(filters['tag'])} "
        experiences = experiences.filter(Q(intent_index__contains=tag) | Q(state_index__contains=tag))
    if "q" in filters:
        experiences = experiences.filter(
            Q(condition__icontains=filters["q"]) | Q(rule__icontains=filters["q"])
        )
    return experiences.order_by("code")
