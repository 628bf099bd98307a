"""The process's MCP event loop: one thread running asyncio, owning every MCP session.

The `mcp` SDK is asyncio (anyio) and a session's transport must be entered and left
in one task; runs execute in threads (traces/runhost.py). So each process keeps one
daemon thread with one loop, sessions live there as tasks (client.py), and a run's
thread hands it a coroutine and blocks on the result: `call(coro, timeout)`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_loop_pid = 0


def loop() -> asyncio.AbstractEventLoop:
    """The process's MCP loop, started on first use (also after a fork: a child gets its own)."""
    global _loop
    with _lock:
        if _loop is None or not _loop.is_running() or _loop_pid != os.getpid():
            _start()
        assert _loop is not None
        return _loop


def _start() -> None:
    global _loop, _loop_pid
    new_loop = asyncio.new_event_loop()
    ready = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(new_loop)
        new_loop.call_soon(ready.set)
        new_loop.run_forever()

    threading.Thread(target=run, name="mcp-loop", daemon=True).start()
    ready.wait()
    _loop, _loop_pid = new_loop, os.getpid()


def call(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run `coro` on the MCP loop and wait for its result; TimeoutError after `timeout` s (cancelled).

    Must not be called from the loop's own thread (it would wait on itself).
    """
    future = asyncio.run_coroutine_threadsafe(coro, loop())
    try:
        return future.result(timeout=timeout)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise TimeoutError(f"no answer within {timeout:g} s") from None
