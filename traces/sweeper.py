"""The stale-run sweep in every worker process, every AGENT_SWEEP_SECONDS (W5, issue 19).

The sweep (traces/services/sweep.py:runs_sweep_stale) also runs on a django-q2
schedule, but that is once a minute at best (django-q2's finest step), and the
schedule itself goes through the broker. A machine's death then costs up to a
minute plus the lease before its runs resume, and its queued runs (lost with
its cluster's prefetched tasks) as long again. Here each worker process sweeps
from a daemon thread, with jitter, so recovery takes about AGENT_LEASE_SECONDS
+ AGENT_SWEEP_SECONDS (+ AGENT_QUEUE_REQUEUE_SECONDS for a queued run). Every
action of the sweep is a compare-and-swap on the trace's run token, so any
number of concurrent sweepers is safe; each costs three small queries a cycle.
"""

from __future__ import annotations

import logging
import os
import random
import threading

from django.conf import settings
from django.db import connection

logger = logging.getLogger(__name__)

_started: dict[int, tuple[threading.Thread, threading.Event]] = {}
_lock = threading.Lock()


def start() -> threading.Thread | None:
    """Start this process's sweeper once (a forked worker starts its own); None when turned off."""
    interval = settings.AGENT_SWEEP_SECONDS
    if interval <= 0:
        return None
    with _lock:
        thread, _ = _started.get(os.getpid(), (None, None))
        if thread is None or not thread.is_alive():
            stopping = threading.Event()
            thread = threading.Thread(target=_loop, args=(interval, stopping), name="sweeper", daemon=True)
            thread.start()
            _started[os.getpid()] = (thread, stopping)
        return thread


def stop() -> None:
    """End this process's sweeper (tests); it finishes a sweep in progress first."""
    with _lock:
        thread, stopping = _started.pop(os.getpid(), (None, None))
    if thread is not None and stopping is not None:
        stopping.set()
        thread.join(timeout=30)


def _loop(interval: float, stopping: threading.Event) -> None:
    from traces.services.sweep import runs_sweep_stale

    while not stopping.wait(interval * random.uniform(0.75, 1.25)):
        try:
            runs_sweep_stale()
        except Exception:
            logger.exception("periodic stale-run sweep failed")
        finally:
            connection.close()  # back to the pool (PostgreSQL) between cycles
