"""Sub-agent progress on the parent's event log (seed 002 「运行时事件流」).

`subagent_started` / `subagent_progress` (each child round) / `subagent_checkpoint`
(every `AGENT_SUBAGENT_CHECKPOINT_ROUNDS` child rounds) / `subagent_completed` /
`subagent_error` are written by the parent's run store, which only the parent's
thread may touch. A child reports through `RunConfig.on_progress`: a delegated
child runs in the parent's thread, so its reports are emitted and committed at
once (the parent's watchers see them live); explore children run in threads of
their own, so theirs wait in a queue the parent's thread drains while it waits
for them (`drain`).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

from django.conf import settings

from traces.models import TraceStatus

Emit = Callable[[str, dict[str, Any]], None]


class ProgressRelay:
    """Child progress to the parent's store; `store` is the parent's RunStore (or None)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.owner = threading.get_ident()
        self._queue: queue.SimpleQueue[tuple[str, dict[str, Any]]] = queue.SimpleQueue()
        self.every = settings.AGENT_SUBAGENT_CHECKPOINT_ROUNDS

    def reporter(self, sub_trace_id: str, mode: str) -> Callable[[dict[str, Any]], None] | None:
        """The child's `on_progress`: its round figures become the parent's events."""
        if self.store is None:
            return None

        def report(progress: dict[str, Any]) -> None:
            payload = {"sub_trace_id": sub_trace_id, "mode": mode, **progress}
            self._put("subagent_progress", payload)
            if self.every and progress["round"] % self.every == 0:
                self._put("subagent_checkpoint", payload)

        return report

    def _put(self, event_type: str, payload: dict[str, Any]) -> None:
        if threading.get_ident() == self.owner:
            self.store.emit(event_type, payload)
            self.store.commit()
        else:
            self._queue.put((event_type, payload))

    def drain(self) -> None:
        """Emit and commit what children in other threads reported (the parent's thread only)."""
        if self.store is None:
            return
        drained = False
        while True:
            try:
                event_type, payload = self._queue.get_nowait()
            except queue.Empty:
                break
            self.store.emit(event_type, payload)
            drained = True
        if drained:
            self.store.commit()


def subagent_started(store: Any, sub_trace_id: str, mode: str, task: str, goal_id: str | None) -> None:
    if store is not None:
        store.emit(
            "subagent_started",
            {"sub_trace_id": sub_trace_id, "mode": mode, "task": task[:500], "goal_id": goal_id},
        )


def subagent_ended(store: Any, mode: str, outcome: Any, **extra: Any) -> None:
    """`subagent_completed` for a child that finished, `subagent_error` for one that failed
    or was stopped (not for one waiting or paused at its step limit: those have their own)."""
    if store is None or outcome.status == TraceStatus.WAITING or outcome.paused:
        return
    payload = {"mode": mode, **outcome.as_dict(), **extra}
    if outcome.status == TraceStatus.COMPLETED:
        store.emit("subagent_completed", payload)
    else:
        store.emit("subagent_error", {**payload, "error": outcome.error or outcome.status})
