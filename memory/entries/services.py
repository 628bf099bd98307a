"""Writes on memory entries (M8). The tool, the portal, the API, the admin and the
import call these; every write passes the gate (`memory/entries/gate.py`)."""

from __future__ import annotations

from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from memory.entries.gate import Draft, check
from memory.entries.selectors import Scope
from memory.models import MemoryEntry, MemoryType


class MemoryConflict(ValueError):
    """Another entry of the scope already has this type and name."""


def project_for(entry_type: str, scope: Scope) -> str:
    """User entries are about the person, so they follow them into every project;
    the other types belong to the run's project, when it has one."""
    return "" if entry_type == MemoryType.USER else scope.project


def memory_entry_write(
    *, scope: Scope, draft: Draft, trace_id: str | None = None, saved_at: datetime | None = None
) -> tuple[MemoryEntry, bool]:
    """Save `draft` in `scope`: a new entry, or the one with the same type and name
    (case-insensitive) overwritten, keeping its id. Returns (entry, created).

    Raises gate.MemoryRefused with every reason the gate gives.
    """
    draft = check(draft)
    project = project_for(draft.type, scope)
    for _ in range(3):
        try:
            with transaction.atomic():
                entry = (
                    MemoryEntry.objects.select_for_update()
                    .filter(
                        owner_id=scope.owner_id, project=project, type=draft.type, name__iexact=draft.name
                    )
                    .first()
                )
                created = entry is None
                entry = entry or MemoryEntry(owner_id=scope.owner_id, project=project)
                _fill(entry, draft, saved_at)
                entry.trace_id = trace_id
                entry.save()
                return entry, created
        except IntegrityError:
            continue  # a concurrent writer created it: overwrite theirs
    raise IntegrityError("could not save the memory entry")


def memory_entry_update(
    *, entry: MemoryEntry, draft: Draft, project: str | None = None, saved_at: datetime | None = None
) -> MemoryEntry:
    """Edit an entry (portal, API, admin). Raises MemoryRefused, or MemoryConflict when
    another entry of its owner and project has the new type and name."""
    draft = check(draft)
    project = entry.project if project is None else project.strip()
    clash = (
        MemoryEntry.objects.filter(
            owner_id=entry.owner_id, project=project, type=draft.type, name__iexact=draft.name
        )
        .exclude(pk=entry.pk)
        .exists()
    )
    if clash:
        raise MemoryConflict(f"there is already a {draft.type} entry named {draft.name!r}")
    entry.project = project
    _fill(entry, draft, saved_at)
    try:
        with transaction.atomic():
            entry.save()
    except IntegrityError:
        raise MemoryConflict(f"there is already a {draft.type} entry named {draft.name!r}") from None
    return entry


def memory_entry_delete(*, entry: MemoryEntry) -> None:
    entry.delete()


def _fill(entry: MemoryEntry, draft: Draft, saved_at: datetime | None) -> None:
    entry.type = draft.type
    entry.name = draft.name
    entry.description = draft.description
    entry.keywords = draft.keywords
    entry.content = draft.content
    entry.saved_at = saved_at or timezone.now()
