"""What every model request of a run gets from memory (M8), through the runner's
`before_model` extension point (`memory/extensions.py`): the memory index, and from
the second call on, what recall found.

Recall starts in a helper thread at the run's first model call, just before the
request is sent, so the main model and the utility model work in parallel; the
second request joins it (at most `JOIN_SECONDS`), filters the pick against what
the first step did (`recall.survivors`) and keeps the result for the rest of the
run. Both messages are user-role and sit right after the system prompt; they are
not stored, so the index is always a current one (this process's read of the last
second, `index_cache.py`, dropped at once by a save here; recall's candidates too).

Per-run state is keyed by (trace id, run token): a new run of the trace (a new
claim, a new token) recalls afresh; `forget` drops it at the run's end.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from memory.entries.index_cache import scope_candidates, scope_index
from memory.entries.recall import recall_ids, recalled_event, recalled_message, survivors
from memory.entries.selectors import Scope
from memory.models import MemoryEntry
from traces.llm import LLMClient
from traces.models import Trace
from traces.runner.extensions import Emit

logger = logging.getLogger(__name__)

JOIN_SECONDS = 20.0
_pool = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="memory-recall")
_utility_call = LLMClient(retries=0, timeout=15)


@dataclass
class _RunMemory:
    scope: Scope
    recall: concurrent.futures.Future[list[int]] | None = None
    recalled: str | None = None
    recalled_ids: list[int] = field(default_factory=list)


_runs: dict[tuple[str, int], _RunMemory] = {}
_lock = threading.Lock()


def with_memory(trace: Trace, messages: list[dict[str, Any]], emit: Emit) -> list[dict[str, Any]] | None:
    """`messages` with the memory index (and what was recalled) after the system prompt;
    None to leave the request alone (memory off, no entries). `emit`: the run's events
    (`memory_recalled` when recall's pick joins the run)."""
    if not _enabled(trace):
        return None
    try:
        return _with_memory(trace, messages, emit)
    except Exception:
        logger.exception("memory for the request of %s failed; sent without", trace.trace_id)
        return None


def forget(trace: Trace, status: str = "") -> None:
    """The run ended: drop its recall state."""
    with _lock:
        for key in [k for k in _runs if k[0] == trace.trace_id]:
            _runs.pop(key, None)


def _with_memory(trace: Trace, messages: list[dict[str, Any]], emit: Emit) -> list[dict[str, Any]] | None:
    key = (trace.trace_id, trace.run_token)
    with _lock:
        state = _runs.get(key)
    if state is None:
        state = _start(trace, messages)
        with _lock:
            _runs[key] = state
    elif state.recall is not None:
        _join(state, messages, emit)
    index = scope_index(state.scope)  # read at most once a second per process (index_cache.py)
    extra = [m for m in (index.text if index else None, state.recalled) if m]
    if not extra:
        return None
    at = next((i for i, m in enumerate(messages) if m.get("role") != "system"), len(messages))
    return [*messages[:at], *({"role": "user", "content": text} for text in extra), *messages[at:]]


def _start(trace: Trace, messages: list[dict[str, Any]]) -> _RunMemory:
    """The run's first call: start recall in a helper thread (the utility model, no database)."""
    state = _RunMemory(scope=Scope.of_trace(trace))
    found = scope_candidates(state.scope)  # read at most once a second per process, as the index
    task = _task(trace, messages)
    if found and task:
        state.recall = _pool.submit(recall_ids, task, found, _utility_call)
    return state


def _join(state: _RunMemory, messages: list[dict[str, Any]], emit: Emit) -> None:
    """The second call: wait for recall, keep the survivors of the filters; a pick is an event."""
    future, state.recall = state.recall, None
    assert future is not None
    try:
        ids = future.result(timeout=JOIN_SECONDS)
    except concurrent.futures.TimeoutError:
        logger.info("memory recall took over %s s; the run goes on without", JOIN_SECONDS)
        return
    by_id = {e.pk: e for e in MemoryEntry.objects.filter(pk__in=ids)}
    picked = [by_id[i] for i in ids if i in by_id]
    kept, dropped = survivors(picked, messages)
    state.recalled_ids = [e.pk for e in kept]
    state.recalled = recalled_message(kept)
    if picked:
        emit("memory_recalled", recalled_event(kept, dropped))


def _task(trace: Trace, messages: list[dict[str, Any]]) -> str:
    """What the run is asked: the latest user message that is text, else the trace's task."""
    for message in reversed(messages):
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return str(message["content"])
    return trace.task or ""


def _enabled(trace: Trace) -> bool:
    settings = trace.run_settings if isinstance(trace.run_settings, dict) else {}
    return settings.get("enable_memory", True) is not False
