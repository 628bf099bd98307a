"""Writes on memory entries (M8). The tool, the portal, the API, the admin and the
import call these; every write passes the gate (`memory/entries/gate.py`)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from memory.entries import markdown
from memory.entries.gate import Draft, MemoryRefused, check
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


def memory_entries_export(*, entries: Iterable[MemoryEntry]) -> str:
    """memory.md of `entries` (oldest first, so an import keeps their order)."""
    rows = sorted(entries, key=lambda e: (e.saved_at, e.pk))
    return markdown.render(
        [
            markdown.EntryData(
                type=e.type,
                name=e.name,
                content=e.content,
                description=e.description,
                keywords=list(e.keywords),
                project=e.project,
                saved_at=e.saved_at,
            )
            for e in rows
        ]
    )


def memory_entries_import(*, owner_id: int | None, text: str) -> dict[str, int]:
    """Import memory.md for `owner_id`, all or nothing: each entry passes the gate and
    overwrites the owner's entry of its project, type and name. Raises MemoryFileError
    or MemoryRefused (naming the entry)."""
    created = replaced = 0
    with transaction.atomic():
        for number, data in enumerate(markdown.parse(text), start=1):
            draft = Draft(data.type, data.name, data.description, data.keywords, data.content)
            try:
                _, new = memory_entry_write(
                    scope=Scope(owner_id=owner_id, project=data.project), draft=draft, saved_at=data.saved_at
                )
            except MemoryRefused as refused:
                raise MemoryRefused(
                    [f"entry {number} ({data.name!r}): {r}" for r in refused.reasons]
                ) from None
            created, replaced = created + new, replaced + (not new)
    return {"created": created, "replaced": replaced}
