"""Deleting traces and pruning old ones (issue 25; seed 001's `DELETE /sessions/{id}`).

One service for the API, the portal, the admin and `manage.py prune_traces`: a trace
goes with its sub-traces (recursively), messages, goals, events, approvals and inbox
(the database's cascades, as fast deletes), its workspace when it is a root trace
(a sub-trace shares its root's), the spill files of its messages, and the media
blobs no remaining message refers to. Other apps drop what they keep for a trace
through the `trace_deleting` signal (experiences mark their evidence, the browser
drops a paused session's state). A trace with a run in flight is refused (409)
unless `force` (staff), which stops the runs first.
"""

from __future__ import annotations

import logging
import re
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.db import transaction
from django.db.models import TextField
from django.db.models.functions import Cast
from django.dispatch import Signal
from django.utils import timezone

from traces.media.blobs import blob_path
from traces.media.parts import MEDIA_PREFIX
from traces.models import (
    ACTIVE_STATUSES,
    Approval,
    Goal,
    InboxMessage,
    Message,
    Trace,
    TraceEvent,
    TraceStatus,
)
from traces.projects import place
from traces.runner import RunConflict
from traces.runner.store import trace_request_stop
from traces.runner.tool_api import workspace_path
from traces.selectors import trace_visible_or_404

logger = logging.getLogger(__name__)

# Sent inside the deleting transaction, before the rows go: `trace_ids` (the whole tree).
trace_deleting = Signal()

IN_FLIGHT = (*ACTIVE_STATUSES, TraceStatus.WAITING)
FORCE_WAIT_SECONDS = 10.0  # how long a forced delete waits for its runs to stop
_SHA = re.compile(r"[0-9a-f]{64}")


@dataclass
class Deletion:
    """What a delete removes (or, for a plan, would remove)."""

    traces: int = 0
    messages: int = 0
    events: int = 0
    goals: int = 0
    approvals: int = 0
    inbox: int = 0
    files: int = 0
    blobs: int = 0
    trace_ids: list[str] = field(default_factory=list)

    def add(self, other: Deletion) -> None:
        for name in COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in COUNTS}


COUNTS = tuple(f.name for f in fields(Deletion) if f.type == "int")  # what a Deletion counts


def trace_tree_ids(root_ids: Iterable[str]) -> list[str]:
    """The traces and all their sub-traces, one query per level."""
    found = list(dict.fromkeys(root_ids))
    level = found
    while level:
        level = list(Trace.objects.filter(parent_trace_id__in=level).values_list("pk", flat=True))
        found.extend(level)
    return found


def deletion_plan(*, user: Any, trace_id: str) -> Deletion:
    """What deleting `trace_id` would remove (the confirmation shows it); TraceNotFound for a stranger."""
    trace = trace_visible_or_404(user=user, trace_id=trace_id)
    ids = trace_tree_ids([trace.pk])
    return _counts(ids, files=len(_files_of(trace, ids)))


def trace_delete(*, user: Any, trace_id: str, force: bool = False) -> Deletion:
    """Delete a trace the user may see, with everything that belongs to it.

    TraceNotFound (404) for a trace the user may not see; RunConflict (409) while
    the trace or a sub-trace is queued, running or waiting, unless `force` (staff
    only), which stops them and waits up to FORCE_WAIT_SECONDS for the runs to end.
    """
    trace = trace_visible_or_404(user=user, trace_id=trace_id)
    ids = trace_tree_ids([trace.pk])
    busy = _in_flight(ids)
    if busy and not force:
        raise RunConflict(
            f"trace {trace.pk!r} has a run in flight ({_describe(busy)}); stop it first"
            + (", or delete with force=true" if getattr(user, "is_staff", False) else "")
        )
    if busy:
        if not getattr(user, "is_staff", False):
            raise RunConflict("only staff may force the delete of a trace with a run in flight")
        _stop(busy)
    return _delete_tree(trace, ids)


def traces_prune(
    *,
    older_than: timedelta,
    statuses: Iterable[str] = (TraceStatus.COMPLETED, TraceStatus.FAILED, TraceStatus.STOPPED),
    dry_run: bool = False,
    batch: int = 200,
) -> Deletion:
    """Delete root traces whose last change is older than `older_than` and whose status is one
    of `statuses`, with their sub-traces, in batches of `batch` roots (one transaction each,
    so runs in flight wait for short moments only). A tree with a run in flight is kept."""
    statuses = [str(status) for status in statuses]
    if unknown := set(statuses) - set(TraceStatus.values):
        raise ValueError(f"unknown status {', '.join(sorted(unknown))}; use {', '.join(TraceStatus.values)}")
    if set(statuses) & {str(status) for status in IN_FLIGHT}:
        raise ValueError("traces in flight (queued, running, waiting) are never pruned")
    cutoff = timezone.now() - older_than
    roots = Trace.objects.filter(parent_trace__isnull=True, status__in=statuses, updated_at__lt=cutoff)
    total = Deletion()
    after = ""
    while True:
        chunk = list(roots.filter(pk__gt=after).order_by("pk")[:batch])
        if not chunk:
            return total
        after = chunk[-1].pk
        trees = {root.pk: trace_tree_ids([root.pk]) for root in chunk}
        busy = {trace_id for trace_id, _ in _in_flight([i for ids in trees.values() for i in ids])}
        kept = [root for root in chunk if not busy.intersection(trees[root.pk])]
        ids = [i for root in kept for i in trees[root.pk]]
        if not kept:
            continue
        if dry_run:
            files = sum(len(_files_of(root, trees[root.pk])) for root in kept)
            total.add(_counts(ids, files=files))
        else:
            total.add(_delete_trees(kept, ids))
        total.trace_ids.extend(root.pk for root in kept)


# --- helpers -------------------------------------------------------------------


def _in_flight(ids: list[str]) -> list[tuple[str, str]]:
    return list(Trace.objects.filter(pk__in=ids, status__in=IN_FLIGHT).values_list("pk", "status"))


def _describe(busy: list[tuple[str, str]]) -> str:
    shown = ", ".join(f"{trace_id} {status}" for trace_id, status in busy[:3])
    return shown + (f" and {len(busy) - 3} more" if len(busy) > 3 else "")


def _stop(busy: list[tuple[str, str]]) -> None:
    """Stop every run in the tree and wait for the running ones to let go."""
    now = timezone.now()
    for trace_id, status in busy:
        if status == TraceStatus.RUNNING:
            trace_request_stop(trace_id=trace_id)
        else:  # queued or waiting: no worker holds it, so it stops here
            Trace.objects.filter(pk=trace_id, status=status).update(
                status=TraceStatus.STOPPED, run_request=None, completed_at=now, updated_at=now
            )
    ids = [trace_id for trace_id, _ in busy]
    deadline = time.monotonic() + FORCE_WAIT_SECONDS
    while still := _in_flight(ids):
        if time.monotonic() > deadline:
            raise RunConflict(f"the runs are still stopping ({_describe(still)}); try again in a moment")
        time.sleep(0.2)


def _counts(ids: list[str], *, files: int) -> Deletion:
    return Deletion(
        traces=len(ids),
        messages=Message.objects.filter(trace_id__in=ids).count(),
        events=TraceEvent.objects.filter(trace_id__in=ids).count(),
        goals=Goal.objects.filter(trace_id__in=ids).count(),
        approvals=Approval.objects.filter(trace_id__in=ids).count(),
        inbox=InboxMessage.objects.filter(to_trace_id__in=ids).count(),
        files=files,
    )


def _delete_tree(trace: Trace, ids: list[str]) -> Deletion:
    deleted = _delete_trees([trace], ids)
    logger.info("deleted trace %s: %s", trace.pk, deleted.as_dict())
    return deleted


def _delete_trees(roots: list[Trace], ids: list[str]) -> Deletion:
    """Delete `ids` (the trees of `roots`) in one transaction, then their files."""
    files = [path for root in roots for path in _files_of(root, ids)]  # spill files are named by message id
    shas = _media_of(ids)
    with transaction.atomic():
        counts = _counts(ids, files=0)
        trace_deleting.send(sender=Trace, trace_ids=ids)
        # Children first, each a single DELETE (nothing refers to these rows).
        for model, column in (
            (TraceEvent, "trace_id__in"),
            (Message, "trace_id__in"),
            (Goal, "trace_id__in"),
            (Approval, "trace_id__in"),
            (InboxMessage, "to_trace_id__in"),
        ):
            model.objects.filter(**{column: ids}).delete()
        Trace.objects.filter(pk__in=ids).delete()
    counts.files = _remove_files(files)
    counts.blobs = _remove_unreferenced(shas)
    counts.trace_ids = [root.pk for root in roots]
    return counts


def _files_of(trace: Trace, ids: list[str]) -> list[Path]:
    """A root trace's workspace under AGENT_WORKSPACE_ROOT, whole; otherwise (a sub-trace
    shares its root's; a project's directory is the operator's) the tree's spill files."""
    root = trace
    while root.parent_trace_id is not None:
        parent = Trace.objects.filter(pk=root.parent_trace_id).only("pk", "parent_trace_id", "run_settings")
        if (found := parent.first()) is None:
            break
        root = found
    project = (root.run_settings or {}).get("project")
    if project:
        try:
            return _spill_files(place(str(project)).workspace, ids)
        except ValueError:  # the project is no longer declared: nothing of ours to find there
            return []
    workspace = workspace_path(root.pk)
    if root.pk == trace.pk:
        return [workspace] if workspace.exists() else []
    return _spill_files(workspace, ids)


def _spill_files(workspace: Path, ids: list[str]) -> list[Path]:
    spill = workspace / ".agentsite" / "spill"
    if not spill.is_dir():
        return []
    names = Message.objects.filter(trace_id__in=ids).values_list("message_id", flat=True)
    return [path for path in (spill / f"{name}.txt" for name in names.iterator()) if path.exists()]


def _remove_files(paths: list[Path]) -> int:
    removed = 0
    for path in paths:
        if path.is_dir():
            removed += sum(1 for child in path.rglob("*") if child.is_file() or child.is_symlink())
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
            removed += 1
    return removed


def _with_media(queryset: Any, needle: str) -> Any:
    return queryset.annotate(text=Cast("content", TextField())).filter(text__contains=needle)


def _media_of(ids: list[str]) -> set[str]:
    shas: set[str] = set()
    rows = _with_media(Message.objects.filter(trace_id__in=ids), MEDIA_PREFIX).values_list("text", flat=True)
    for text in rows.iterator():
        for part in text.split(MEDIA_PREFIX)[1:]:
            if match := _SHA.match(part):
                shas.add(match.group(0))
    return shas


def _remove_unreferenced(shas: set[str]) -> int:
    """Blobs are shared by content: remove only those no remaining message names."""
    removed = 0
    for sha in shas:
        if _with_media(Message.objects.all(), MEDIA_PREFIX + sha).exists():
            continue
        path = blob_path(sha)
        removed += path.exists()
        path.unlink(missing_ok=True)
        path.with_suffix(".thumb.jpg").unlink(missing_ok=True)
    return removed


__all__ = [
    "Deletion",
    "FORCE_WAIT_SECONDS",
    "deletion_plan",
    "trace_delete",
    "trace_deleting",
    "trace_tree_ids",
    "traces_prune",
]
