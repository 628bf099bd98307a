"""Read-only tool calls of one reply run at once (seed 002 AgentExecutor), bounded.

The runner (`traces/runner/calls.py`) decides which calls may share a batch and
keeps everything with an order in its own thread: events, hooks, results and
commits, in call order. Only the tools' bodies run here, each in a thread of a
per-batch pool of at most `AGENT_PARALLEL_TOOLS`.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Sequence

from django.conf import settings

from traces.runner.extensions import Tool
from traces.runner.tool_api import ToolResult


def may_share_a_batch(tool: Tool | None) -> bool:
    """Whether a call of `tool` may run beside others: read-only, safe, asks no one,
    and not inline (inline tools change the run's own state in its thread)."""
    if tool is None or settings.AGENT_PARALLEL_TOOLS < 2:
        return False
    return tool.read_only and not tool.inline and tool.risk == "safe" and tool.confirm is None


class Batch:
    """The bodies of a batch's calls, running; results read in call order."""

    def __init__(self, bodies: Sequence[Callable[[], ToolResult]]) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=min(len(bodies), settings.AGENT_PARALLEL_TOOLS), thread_name_prefix="tool-batch"
        )
        self._seconds = [0.0] * len(bodies)
        self.futures = [self._pool.submit(self._timed, index, body) for index, body in enumerate(bodies)]

    def done_within(self, seconds: float) -> bool:
        """Whether every call finishes within `seconds` (waited for here)."""
        _, running = concurrent.futures.wait(self.futures, timeout=seconds)
        return not running

    def _timed(self, index: int, body: Callable[[], ToolResult]) -> ToolResult:
        started = time.perf_counter()
        try:
            return body()
        finally:
            self._seconds[index] = time.perf_counter() - started

    def seconds(self, index: int) -> float:
        """How long the `index`th call's tool ran (read once its result is in)."""
        return self._seconds[index]

    def result(self, index: int, stopping: Callable[[], bool]) -> ToolResult | None:
        """The `index`th call's result; None when `stopping()` turned true first (polled
        every AGENT_STOP_POLL_SECONDS)."""
        future = self.futures[index]
        while True:
            try:
                return future.result(timeout=settings.AGENT_STOP_POLL_SECONDS)
            except concurrent.futures.TimeoutError:
                if stopping():
                    return None

    def close(self) -> None:
        """Calls not started are cancelled; running ones finish in their threads (results dropped)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
