"""Reads a process keeps for a second (issue 18): what nearly every run reads and an
operator rarely changes (presets, remote agents, a user's AGENTS.md text, whether any
experience is approved, a scope's memory entries).

In a burst of runs each asked the database for the same rows; a statement costs the
worker ~0.3-0.6 ms of CPU and the database as much again (bench/run_cost.py). A
`Kept` read is made at most once per `fresh` seconds per key and process. A save or
delete in this process (any `save()` / `delete()` of a model named in `changed_by`,
through post_save / post_delete) drops what it holds at once and again when its
transaction commits, so a process sees its own writes on its next read; another
process's write (the web server's portal, API or admin, as seen from a worker) shows
within `fresh` seconds. A read made inside a transaction is not kept: it may see that
transaction's own writes, which a rollback would undo without a signal. Writes that
send no signal (`QuerySet.update()`, `bulk_create`) show within `fresh` seconds too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from django.db import connection, transaction
from django.db.models.signals import post_delete, post_save

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

FRESH_SECONDS = 1.0
MAX_KEYS = 1_000  # beyond this many held keys the next read starts over

_every: list[Kept[Any, Any]] = []


class Kept(Generic[K, V]):
    """`read(key)`, kept per process for `fresh` seconds; dropped by a save of `changed_by`
    (model labels, "app_label.ModelName") in this process."""

    def __init__(
        self, name: str, read: Callable[[K], V], *, changed_by: tuple[str, ...], fresh: float = FRESH_SECONDS
    ) -> None:
        self.name, self.read, self.fresh = name, read, fresh
        self.lock = threading.Lock()
        self.held: dict[K, tuple[float, V]] = {}
        # Bumped by every drop: a read that began before one does not keep what it read.
        self.generation = 0
        for label in changed_by:  # lazy: the model may not be loaded yet
            post_save.connect(self.changed, sender=label, weak=False, dispatch_uid=f"kept {name} saved")
            post_delete.connect(self.changed, sender=label, weak=False, dispatch_uid=f"kept {name} deleted")
        _every.append(self)

    def get(self, key: K) -> V:
        now = time.monotonic()
        with self.lock:
            held, generation = self.held.get(key), self.generation
        if held is not None and now - held[0] < self.fresh:
            return held[1]
        value = self.read(key)
        if connection.in_atomic_block:
            return value  # it may show this transaction's own writes, which may yet roll back
        with self.lock:
            if generation == self.generation:
                if len(self.held) >= MAX_KEYS:
                    self.held.clear()
                self.held[key] = (now, value)
        return value

    def drop(self) -> None:
        with self.lock:
            self.generation += 1
            self.held.clear()

    def changed(self, sender: Any, using: str = "default", **kwargs: Any) -> None:
        """post_save / post_delete: drop now (this thread's next read) and at commit (a read
        another thread made before the commit saw the old rows)."""
        self.drop()
        transaction.on_commit(self.drop, using=using)


def drop_all() -> None:
    """Forget every kept read (a database emptied without signals: a test's rollback)."""
    for kept in _every:
        kept.drop()
