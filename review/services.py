"""Writes of the review app (X6): scoring, and filling and working through queues."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from review.filters import ScoredTraceFilter
from review.models import ItemStatus, MessageEdit, QueueItem, ReviewQueue, Score, ScoreDefinition, ScoreKind
from traces.models import Message, Trace
from traces.runner import InvalidRun
from traces.selectors import trace_visible_or_404, traces_visible_to

COMMENT_LIMIT = 10_000


class InvalidScore(InvalidRun):
    """A score that its definition does not allow (400, code `invalid_score`)."""


def score_value(*, definition: ScoreDefinition, value: Any) -> tuple[float | None, str]:
    """(number, label) for `value` as `definition` allows it, else InvalidScore."""
    if definition.kind == ScoreKind.BOOLEAN:
        if not isinstance(value, bool):
            raise InvalidScore(f"value: {definition.name} takes true or false")
        return float(value), "true" if value else "false"
    if definition.kind == ScoreKind.CATEGORICAL:
        if not isinstance(value, str) or value not in definition.categories:
            allowed = ", ".join(map(str, definition.categories))
            raise InvalidScore(f"value: {definition.name} takes one of: {allowed}")
        return None, value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidScore(f"value: {definition.name} takes a number")
    low, high = definition.minimum, definition.maximum
    if low is not None and high is not None and not low <= value <= high:
        raise InvalidScore(f"value: {definition.name} takes a number from {low:g} to {high:g}")
    return float(value), f"{value:g}"


def score_set(
    *,
    user: Any,
    trace_id: str,
    definition: str,
    value: Any,
    comment: str = "",
    message_sequence: int | None = None,
) -> tuple[Score, bool]:
    """Record `user`'s score of a trace they may see (or one of its messages); scoring the
    same target with the same definition again replaces the earlier score.
    Returns (score, created)."""
    trace = trace_visible_or_404(user=user, trace_id=trace_id)
    found = ScoreDefinition.objects.filter(name=definition, active=True).first()
    if found is None:
        raise InvalidScore(f"definition: no active score definition named {definition!r}")
    if len(comment) > COMMENT_LIMIT:
        raise InvalidScore(f"comment: at most {COMMENT_LIMIT} characters")
    number, label = score_value(definition=found, value=value)
    message = _message(trace, message_sequence)
    defaults = {"value": number, "label": label, "comment": comment, "updated_at": timezone.now()}
    try:
        with transaction.atomic():
            score, created = Score.objects.update_or_create(
                trace=trace, message=message, definition=found, author=user, defaults=defaults
            )
    except IntegrityError:  # a concurrent first score of the same target won the insert
        score = Score.objects.get(trace=trace, message=message, definition=found, author=user)
        Score.objects.filter(pk=score.pk).update(**defaults)
        score.refresh_from_db()
        created = False
    return score, created


def _message(trace: Trace, sequence: int | None) -> Message | None:
    if sequence is None:
        return None
    message = Message.objects.filter(trace=trace, sequence=sequence).first()
    if message is None:
        raise InvalidScore(f"message_sequence: trace {trace.trace_id!r} has no message {sequence}")
    return message


# --- queues ---------------------------------------------------------------------------


QUEUE_FILL_LIMIT = 500


def queue_create(
    *,
    user: Any,
    name: str,
    description: str = "",
    definitions: Sequence[str] = (),
    filters: dict[str, str] | None = None,
    trace_ids: Sequence[str] = (),
    assignees: Sequence[Any] = (),
) -> ReviewQueue:
    """A queue of the traces `filters` select (as the trace list does) and/or `trace_ids`
    (by hand), among those `user` sees; items are shared round-robin among `assignees`."""
    name = name.strip()
    if not name:
        raise InvalidRun("name: a queue needs a name")
    if ReviewQueue.objects.filter(name=name).exists():
        raise InvalidRun(f"name: a queue named {name!r} exists already")
    found = list(ScoreDefinition.objects.filter(name__in=definitions))
    missing = sorted(set(definitions) - {d.name for d in found})
    if missing:
        raise InvalidRun(f"definitions: no score definition named {', '.join(missing)}")
    with transaction.atomic():
        queue = ReviewQueue.objects.create(
            name=name, description=description, created_by=user, filters=filters or {}
        )
        queue.definitions.set(found)
        selected = list(trace_ids) + (_filtered(user, filters) if filters else [])
        queue_add_traces(user=user, queue=queue, trace_ids=selected, assignees=assignees)
    return queue


def _filtered(user: Any, filters: dict[str, str]) -> list[str]:
    """The trace ids the trace list's filters select for `user`, newest first."""
    traces = traces_visible_to(user).order_by("-created_at", "-trace_id")
    selected = ScoredTraceFilter(filters, queryset=traces).qs.values_list("trace_id", flat=True)
    return list(selected[:QUEUE_FILL_LIMIT])


def queue_add_traces(
    *, user: Any, queue: ReviewQueue, trace_ids: Sequence[str], assignees: Sequence[Any] = ()
) -> int:
    """Append the traces `user` sees to `queue`, shared round-robin among `assignees`;
    those already in it stay where they are (a trace is in a queue at most once: the
    unique constraint, checked here first under the queue's row lock). Returns how many
    were added."""
    with transaction.atomic():
        queue = ReviewQueue.objects.select_for_update().get(pk=queue.pk)
        present = set(queue.items.values_list("trace_id", flat=True))
        wanted = [t for t in dict.fromkeys(trace_ids) if t not in present]
        visible = set(traces_visible_to(user).filter(pk__in=wanted).values_list("pk", flat=True))
        last = queue.items.aggregate(last=Max("position"))["last"] or 0
        people = list(assignees)
        items = [
            QueueItem(
                queue=queue,
                trace_id=trace_id,
                position=last + index + 1,
                assignee=people[index % len(people)] if people else None,
            )
            for index, trace_id in enumerate(t for t in wanted if t in visible)
        ]
        QueueItem.objects.bulk_create(items)
    return len(items)


def queue_item_finish(*, user: Any, item: QueueItem, status: str = ItemStatus.DONE) -> QueueItem:
    """Mark an item done or skipped by `user` (or pending again)."""
    if status not in ItemStatus.values:
        raise InvalidRun(f"status: one of {', '.join(ItemStatus.values)}")
    done = status != ItemStatus.PENDING
    QueueItem.objects.filter(pk=item.pk).update(
        status=status, done_by=user if done else None, done_at=timezone.now() if done else None
    )
    item.refresh_from_db()
    return item


def reviews_forget_traces(*, trace_ids: list[str], **_: Any) -> None:
    """trace_deleting receiver: the traces' scores, queue items and message edits go
    (caller's transaction)."""
    Score.objects.filter(trace_id__in=trace_ids).delete()
    MessageEdit.objects.filter(trace_id__in=trace_ids).delete()
    QueueItem.objects.filter(trace_id__in=trace_ids).delete()
