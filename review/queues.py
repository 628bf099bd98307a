"""Reads of review queues (X6): progress, and the order an expert works through one."""

from __future__ import annotations

from typing import Any, NamedTuple

from django.db.models import Count, Q, QuerySet

from review.models import ItemStatus, QueueItem, ReviewQueue


class Progress(NamedTuple):
    total: int
    done: int
    skipped: int

    @property
    def pending(self) -> int:
        return self.total - self.done - self.skipped

    @property
    def percent(self) -> int:
        return round(100 * (self.done + self.skipped) / self.total) if self.total else 0


def queues_with_progress() -> list[tuple[ReviewQueue, Progress]]:
    """Every queue with its item counts, in one query."""
    queues = ReviewQueue.objects.annotate(
        total=Count("items"),
        done=Count("items", filter=Q(items__status=ItemStatus.DONE)),
        skipped=Count("items", filter=Q(items__status=ItemStatus.SKIPPED)),
    ).order_by("-created_at", "-id")
    return [(q, Progress(q.total, q.done, q.skipped)) for q in queues]


def queue_progress(queue: ReviewQueue) -> Progress:
    counts = queue.items.aggregate(
        total=Count("id"),
        done=Count("id", filter=Q(status=ItemStatus.DONE)),
        skipped=Count("id", filter=Q(status=ItemStatus.SKIPPED)),
    )
    return Progress(counts["total"], counts["done"], counts["skipped"])


def queue_items_for(queue: ReviewQueue, user: Any) -> QuerySet[QueueItem]:
    """The items `user` works through: those assigned to them and those assigned to nobody."""
    return queue.items.filter(Q(assignee=user) | Q(assignee__isnull=True)).order_by("position", "id")


def queue_neighbours(item: QueueItem, user: Any) -> tuple[QueueItem | None, QueueItem | None]:
    """The items before and after `item` in the order `user` works through the queue."""
    mine = queue_items_for(item.queue, user)
    before = mine.filter(position__lt=item.position).order_by("-position", "-id").first()
    after = mine.filter(position__gt=item.position).first()
    return before, after


def queue_next_pending(queue: ReviewQueue, user: Any, *, after: int = 0) -> QueueItem | None:
    """The next pending item for `user` after position `after` (wrapping to the start)."""
    pending = queue_items_for(queue, user).filter(status=ItemStatus.PENDING)
    return pending.filter(position__gt=after).first() or pending.first()
