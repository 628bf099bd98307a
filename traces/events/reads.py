"""Watchers' database reads on a few threads that keep their connection (W3, issue 18).

A watch socket reads the event log on every ring: which traces it follows, then
the events after its cursors. Web servers close their database connection after
each request (`DATABASE_CONN_MAX_AGE` 0, agentsite/settings/__init__.py), and
`database_sync_to_async` closes the connection after each call the same way, so
on PostgreSQL every read paid for a new server process: during a 64-run burst
without Redis the live events' p99 was 375-494 ms (bench/density.py), with
connections kept 103-264 ms.

Here AGENT_WATCH_READ_THREADS threads (4) take the reads from one queue, off the
thread that runs every sync view, and each keeps its connection between reads:
a burst's rings cost a query each, not a connect. A thread idle for
AGENT_WATCH_READ_IDLE_SECONDS (30; 0 closes after every read) closes its
connection, so a quiet server holds none. A read that fails on a kept connection
(the database restarted, a pooler dropped it) is tried once more on a new one:
the reads are idempotent; a read that fails on a fresh connection raises, and the
watcher closes its socket as before (4503).
"""

from __future__ import annotations

import asyncio
import functools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from django.conf import settings
from django.db import InterfaceError, OperationalError, connections

from traces.process_local import PerProcess

T = TypeVar("T")
_Job = tuple[Callable[[], Any], Future[Any]]


def _open() -> bool:
    return any(c.connection is not None for c in connections.all(initialized_only=True))


def _close() -> None:
    for conn in connections.all(initialized_only=True):
        conn.close()


class ReadThreads:
    """A fixed set of daemon threads serving one queue of reads."""

    def __init__(self, size: int) -> None:
        self.jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.size = size
        self.started = 0

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        self.jobs.put((fn, future))
        with self.lock:  # threads start as reads come, up to `size`
            if self.started < self.size:
                self.started += 1
                threading.Thread(target=self._serve, name=f"watch-reads-{self.started}", daemon=True).start()
        return future

    def _serve(self) -> None:
        while True:
            idle = settings.AGENT_WATCH_READ_IDLE_SECONDS
            try:
                fn, future = self.jobs.get(timeout=idle if idle > 0 and _open() else None)
            except queue.Empty:
                _close()  # idle: a quiet server holds no connection
                continue
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(self._call(fn))
            except Exception as exc:  # handed to the awaiting watcher
                future.set_exception(exc)
            finally:
                if settings.AGENT_WATCH_READ_IDLE_SECONDS <= 0:
                    _close()

    @staticmethod
    def _call(fn: Callable[[], T]) -> T:
        kept = _open()
        try:
            return fn()
        except (OperationalError, InterfaceError):
            _close()
            if not kept:
                raise
        return fn()  # once more, on a new connection


_threads = PerProcess(lambda: ReadThreads(settings.AGENT_WATCH_READ_THREADS))


async def read(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`fn(*args, **kwargs)` on a watch-read thread, awaited."""
    return await asyncio.wrap_future(_threads.get().submit(functools.partial(fn, *args, **kwargs)))
