"""One object per process, made on first use: a forked child makes its own.

Threads and sockets do not survive `fork`, so what owns them (the heartbeat thread,
the wait watcher, the doorbell's sender, the run host) is made again in a worker
forked from a process that had one.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class PerProcess(Generic[T]):
    """`get()` returns this process's object, made by `make` the first time it is asked for here."""

    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self._lock = threading.Lock()
        self._pid = 0
        self._value: T | None = None

    def get(self) -> T:
        pid = os.getpid()
        if self._pid == pid:  # made here already (`_value` is set before `_pid`): no lock
            return self._value  # type: ignore[return-value]
        with self._lock:
            if self._pid != pid:
                self._value, self._pid = self._make(), pid
            return self._value  # type: ignore[return-value]  # made above for this pid
