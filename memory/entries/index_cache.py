"""A scope's memory index, kept per process for `FRESH_SECONDS` (issue 18).

Every model call of a run sends its scope's index (`requests.py`), and in a burst of
runs of one owner each call asked the database for the same page of entries (3.7 %
of a worker cluster's CPU in a 64-run burst, py-spy). A process now reads a scope's
index at most once per `FRESH_SECONDS`. A save or delete in this process (the
`write_memory` tool, the portal, the API, the admin: all `save()` / `delete()`)
drops what it holds at once and again when its transaction commits, so a run sees its
own save on its next call; another process's write (the web server's portal or API)
shows within `FRESH_SECONDS`. A read made inside a transaction is not kept (it may see
that transaction's own writes, which a rollback would undo without a signal).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from django.db import connection, transaction

from memory.entries.index import MAX_LINES, MemoryIndex, memory_index
from memory.entries.selectors import Scope, memory_entries_in_scope

FRESH_SECONDS = 1.0
MAX_SCOPES = 1_000  # beyond this many held scopes the next read starts over


class _Kept:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.indexes: dict[Scope, tuple[float, MemoryIndex | None]] = {}
        # Bumped by every drop: a read that began before one does not keep what it read.
        self.generation = 0

    def index(self, scope: Scope) -> MemoryIndex | None:
        now = time.monotonic()
        with self.lock:
            held, generation = self.indexes.get(scope), self.generation
        if held is not None and now - held[0] < FRESH_SECONDS:
            return held[1]
        index = _read(scope)
        if connection.in_atomic_block:
            return index  # it may show this transaction's own writes, which may yet roll back
        with self.lock:
            if generation == self.generation:
                if len(self.indexes) >= MAX_SCOPES:
                    self.indexes.clear()
                self.indexes[scope] = (now, index)
        return index

    def drop(self) -> None:
        with self.lock:
            self.generation += 1
            self.indexes.clear()


_kept = _Kept()  # a forked worker starts with the parent's (empty: the parent runs no run)


def scope_index(scope: Scope) -> MemoryIndex | None:
    """The index of `scope`'s entries; None when it has none."""
    return _kept.index(scope)


def drop_all() -> None:
    """Forget every kept index (a database emptied without signals: a test's)."""
    _kept.drop()


def entries_changed(sender: Any, using: str = "default", **kwargs: Any) -> None:
    """post_save / post_delete of a MemoryEntry: drop now (this thread's next read) and
    at commit (a read another thread made before the commit saw the old rows)."""
    _kept.drop()
    transaction.on_commit(_kept.drop, using=using)


def _read(scope: Scope) -> MemoryIndex | None:
    entries = memory_entries_in_scope(scope)
    listed = list(entries[:MAX_LINES])
    # Fewer than a page: that is all of them, no COUNT needed.
    return memory_index(listed, total=len(listed) if len(listed) < MAX_LINES else entries.count())
