"""Watchers' database reads on a few threads that keep their connection (W3, issue 18).

A watch socket reads the event log on every ring: which traces it follows, then
the events after its cursors. Web servers close their database connection after
each request (`DATABASE_CONN_MAX_AGE` 0, agentsite/settings/__init__.py), and
`database_sync_to_async` closes the connection after each call the same way, so
on PostgreSQL every read paid for a new server process: during a 64-run burst
without Redis the live events' p99 was 375-494 ms (bench/density.py), with
connections kept 103-264 ms.

Here AGENT_WATCH_READ_THREADS threads (4, agentsite/kept_threads.py) take the
reads from one queue, off the threads that serve requests, and each keeps its
connection between reads: a burst's rings cost a query each, not a connect. A thread idle for
AGENT_WATCH_READ_IDLE_SECONDS (30; 0 closes after every read) closes its
connection, so a quiet server holds none. A read that fails on a kept connection
(the database restarted, a pooler dropped it) is tried once more on a new one:
the reads are idempotent; a read that fails on a fresh connection raises, and the
watcher closes its socket as before (4503).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings
from django.db import InterfaceError, OperationalError

from agentsite.kept_threads import KeptThreads, close_connections, connections_open
from traces.process_local import PerProcess

T = TypeVar("T")


class ReadThreads(KeptThreads):
    """The watch-read threads: a failed read on a kept connection is tried once more."""

    def __init__(self, size: int) -> None:
        super().__init__(size, "watch-reads", lambda: settings.AGENT_WATCH_READ_IDLE_SECONDS)

    def _call(self, fn: Callable[[], T]) -> T:
        kept = connections_open()
        try:
            return fn()
        except (OperationalError, InterfaceError):
            close_connections()
            if not kept:
                raise
        return fn()  # once more, on a new connection


_threads = PerProcess(lambda: ReadThreads(settings.AGENT_WATCH_READ_THREADS))


async def read(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`fn(*args, **kwargs)` on a watch-read thread, awaited."""
    return await asyncio.wrap_future(_threads.get().submit(functools.partial(fn, *args, **kwargs)))
