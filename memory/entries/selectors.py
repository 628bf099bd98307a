"""Reads of memory entries: a run's scope, what a user may see, one entry by id or name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Q, QuerySet

from memory.models import MemoryEntry


@dataclass(frozen=True)
class Scope:
    """Whose entries a run reads and writes: its trace's owner, and its project ("" = none)."""

    owner_id: int | None
    project: str = ""

    @classmethod
    def of_trace(cls, trace: Any) -> Scope:
        """The trace's owner and the run's project (`run_settings["project"]`, when set)."""
        settings = getattr(trace, "run_settings", None) or {}
        project = settings.get("project") if isinstance(settings, dict) else None
        return cls(owner_id=trace.owner_id, project=project if isinstance(project, str) else "")


def memory_entries_in_scope(scope: Scope) -> QuerySet[MemoryEntry]:
    """The owner's entries a run sees, newest first: those of no project, and of its own."""
    projects = Q(project="") | Q(project=scope.project) if scope.project else Q(project="")
    return MemoryEntry.objects.filter(projects, owner_id=scope.owner_id).order_by("-saved_at", "-id")


def memory_entries_visible_to(user: Any) -> QuerySet[MemoryEntry]:
    """Staff see every entry, other users their own; anonymous users none."""
    if not getattr(user, "is_authenticated", False):
        return MemoryEntry.objects.none()
    entries = MemoryEntry.objects.select_related("owner").order_by("-saved_at", "-id")
    return entries if user.is_staff else entries.filter(owner=user)


def memory_entries_find(scope: Scope, ref: str) -> list[MemoryEntry]:
    """Entries of the scope with id `ref` ("12" or "#12") or named `ref` (any case, any type)."""
    ref = " ".join(ref.split())
    entries = memory_entries_in_scope(scope)
    number = ref.removeprefix("#")
    if number.isdigit():
        by_id = list(entries.filter(pk=int(number)))
        if by_id:
            return by_id
    return list(entries.filter(name__iexact=ref))
