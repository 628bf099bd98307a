"""The lease heartbeat thread: keeps the leases of runs blocked in long tools fresh (W5).

`traces/runner/store.py:RunStore.keep_alive` registers a run here while its caller
blocks; the thread beats with the same fenced UPDATE as `RunStore.heartbeat`.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import connection
from django.utils import timezone

from traces.models import Trace
from traces.process_local import PerProcess

if TYPE_CHECKING:
    from traces.runner.store import RunStore

logger = logging.getLogger(__name__)


class _Heartbeats:
    """A daemon thread refreshing the leases of runs blocked in long tools.

    It wakes a few times a second and beats every registered run whose last beat
    is older than a third of AGENT_LEASE_SECONDS (read each time: it may change).
    """

    TICK = 0.2

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active: dict[int, tuple[RunStore, float]] = {}
        threading.Thread(target=self._run, name="lease-heartbeats", daemon=True).start()

    def add(self, store: RunStore) -> None:
        with self.lock:
            self.active[id(store)] = (store, time.monotonic())

    def discard(self, store: RunStore) -> None:
        with self.lock:
            self.active.pop(id(store), None)

    def _run(self) -> None:
        while True:
            time.sleep(self.TICK)
            interval = max(settings.AGENT_LEASE_SECONDS / 3, self.TICK)
            now = time.monotonic()
            with self.lock:
                due = [store for store, beat in self.active.values() if now - beat >= interval]
            for store in due:
                self._beat(store, now)
            if due:
                connection.close()  # this thread's own connection; beats are seconds apart

    def _beat(self, store: RunStore, now: float) -> None:
        try:
            row = Trace.objects.filter(pk=store.trace.pk, run_token=store.token)
            alive = bool(row.update(heartbeat_at=timezone.now()))
        except Exception:
            logger.exception("heartbeat of trace %s failed", store.trace.pk)
            connection.close()
            return
        with self.lock:
            if id(store) in self.active:
                if alive:
                    self.active[id(store)] = (store, now)
                else:
                    self.active.pop(id(store))  # the lease is lost; the run learns at its next commit


_heartbeats = PerProcess(_Heartbeats)


def lease_heartbeats() -> _Heartbeats:
    """This process's heartbeat thread; a forked worker starts its own."""
    return _heartbeats.get()
