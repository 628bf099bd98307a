"""AgentRunner: the agent loop as one readable generator (R1-R10).

`run(messages, config)` yields the Trace, then each Message as it is persisted,
then the Trace again when the run ends. Each step is committed as it happens
(message, events, goal stats and the trace row in one fenced transaction), and
the main path stays in memory for the whole run: a step only appends.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Generator, Iterator
from typing import Any

from django.conf import settings
from django.utils import timezone

from traces import prompts
from traces.guards.confirm import RUN_APPROVED
from traces.guards.hooks import LifecycleHooks, hooks_from_settings
from traces.llm import (
    LLMClient,
    LLMError,
    LLMResponse,
)
from traces.models import Message, MessageKind, Trace, TraceStatus
from traces.runner.calls import ToolCalls
from traces.runner.compaction import info_for
from traces.runner.config import (
    STEP_LIMIT_PREFIX,
    LeaseLost,
    RunConfig,
    RunResult,
)
from traces.runner.context import ContextHook, ContextManagement, default_context_hooks
from traces.runner.extensions import ToolSet, extensions
from traces.runner.model_call import EVENTS_WAIT_SECONDS, ModelCalls
from traces.runner.prepare import validate_messages
from traces.runner.setup import RunSetup
from traces.runner.state import RunState, StepEnd
from traces.runner.store import trace_request_stop, worker_identity
from traces.runner.strategies import Strategies
from traces.runner.turns import Unturned

logger = logging.getLogger(__name__)

# The event a run's end emits by its status; any other status ends with "error".
END_EVENTS: dict[str, str] = {
    TraceStatus.COMPLETED: "final",
    TraceStatus.STOPPED: "stopped",
    TraceStatus.WAITING: "waiting",
}


class AgentRunner(RunSetup, ModelCalls, ContextManagement, ToolCalls, Strategies):
    """Runs agents. Infrastructure is fixed at construction; each run gets a RunConfig."""

    def __init__(
        self,
        *,
        llm_call: Callable[..., LLMResponse] | None = None,
        utility_llm_call: Callable[..., LLMResponse] | None = None,
        tool_registry: ToolSet | None = None,
        context_hooks: list[ContextHook] | None = None,
        hooks: LifecycleHooks | None = None,
        worker_id: str | None = None,
        model_pool: concurrent.futures.Executor | None = None,
    ) -> None:
        # A call made in a run's thread (a compaction's summary, a router's choice) is a
        # wait: the run's turn goes to the next run meanwhile (turns.py).
        self.llm_call = Unturned(llm_call or LLMClient())
        self.utility_llm_call = Unturned(utility_llm_call or LLMClient(retries=0, timeout=15))
        self.tool_registry = tool_registry or extensions.require_tools()
        self.context_hooks = list(context_hooks if context_hooks is not None else default_context_hooks())
        self.hooks = hooks if hooks is not None else hooks_from_settings()
        self.worker_id = worker_id or worker_identity()
        self._stops: dict[str, threading.Event] = {}
        # A run host shares one model-call pool among its runs (traces/runhost.py);
        # a runner on its own makes and owns one.
        self._owns_pool = model_pool is None
        self._pool = model_pool or concurrent.futures.ThreadPoolExecutor(
            max_workers=8, thread_name_prefix="llm"
        )
        # Per thread: runs on one runner in several threads (explore children) each
        # see their own run's figures.
        self._local = threading.local()

    @property
    def last_run_stats(self) -> dict[str, Any]:
        """Figures of the last run this thread consumed (iterations, model and total seconds)."""
        return getattr(self._local, "stats", {})

    # --- public API --------------------------------------------------------------

    def run(
        self, messages: list[dict[str, Any]] | None, config: RunConfig | None = None
    ) -> Iterator[Trace | Message]:
        """Run (new, continue, rewind or regenerate) and yield the trace and each message."""
        config = config or RunConfig()
        run = self._prepare(validate_messages(messages), config)
        self._stops[run.trace.trace_id] = run.stop_event
        extensions.observe("segment_started", run)
        try:
            yield run.trace
            yield from self._prepared_messages(run)
            yield from self._loop(run)
            yield run.trace
        except LeaseLost:
            logger.warning("run of %s lost its lease; another run owns the trace", run.trace.trace_id)
            raise
        except GeneratorExit:
            self._end_abruptly(run, "the caller stopped consuming the run")
            raise
        except BaseException as exc:
            self._end_abruptly(run, f"{type(exc).__name__}: {exc}")
            raise
        finally:
            run.turn.give()
            self._stops.pop(run.trace.trace_id, None)
            extensions.observe("segment_ended", run)
            for release in extensions.after_run:
                release(run.trace.trace_id, run.trace.status)
            self._local.stats = {
                "iterations": run.iterations,
                "model_seconds": run.model_seconds,
                "total_seconds": time.perf_counter() - run.started,
            }

    def run_result(
        self,
        messages: list[dict[str, Any]] | None,
        config: RunConfig | None = None,
        on_event: Callable[[Trace | Message], None] | None = None,
    ) -> RunResult:
        """Consume `run()` and return what came of it."""
        trace: Trace | None = None
        for item in self.run(messages, config):
            if isinstance(item, Trace):
                trace = item
            if on_event is not None:
                on_event(item)
        assert trace is not None
        return RunResult(
            trace_id=trace.trace_id,
            status=trace.status,
            result=trace.result_summary,
            error=trace.error_message,
            messages=trace.total_messages,
            head_sequence=trace.head_sequence,
            total_tokens=trace.total_tokens,
            total_cost=trace.total_cost,
            iterations=self.last_run_stats.get("iterations", 0),
            stats=dict(self.last_run_stats),
        )

    def close(self) -> None:
        """Let the model-call threads go (runners made for one sub-run); a shared pool stays."""
        if self._owns_pool:
            self._pool.shutdown(wait=False)

    def stop(self, trace_id: str) -> bool:
        """R5: ask the run of `trace_id` to stop at its next checkpoint.

        Works across processes (a flag on the trace row, polled while a model call
        is in flight) and at once for a run in this process. Returns whether a
        running trace was found.
        """
        event = self._stops.get(trace_id)
        if event is not None:
            event.set()
        return trace_request_stop(trace_id=trace_id)

    # --- phase 1: prepare --------------------------------------------------------

    def _add_message(self, run: RunState, message: Message) -> Message:
        message.created_at = timezone.now()
        if message.parent_sequence is None and message.sequence > 1:
            message.parent_sequence = run.trace.head_sequence or None
        run.store.add_message(message)
        data = message.to_llm_dict()
        info = info_for(message, data)
        run.llm_messages.append(data)
        run.infos.append(info)
        run.token_total += info.tokens
        run.fresh.append(message)
        return message

    def _prepared_messages(self, run: RunState) -> Iterator[Message]:
        fresh, run.fresh = run.fresh, []
        yield from fresh

    def _loop(self, run: RunState) -> Iterator[Message]:
        run.turn.take()  # its work from here on takes turns with the process's other runs
        if run.pending_calls:
            yield from self._execute_calls(run, run.pending_calls, run.pending_from)
            if run.trace.status != TraceStatus.RUNNING:
                return None
        end = yield from self._answer(run)  # strategies/select.py: react, routed or plan_execute (R11)
        self._end(run, end)
        return None

    def _react(self, run: RunState, limit: int) -> Generator[Message, None, StepEnd]:
        """The ReAct loop: model call, tool calls, until an answer or `limit` iterations.

        The whole run's loop, or one plan step's (strategies/planner.py); how it
        ended is the caller's to act on (`_end` for a run).
        """
        for iteration in range(limit):
            if self._stopping(run):
                return StepEnd("stopped")
            run.iterations += 1
            if iteration % run.context_every == 0:
                injected = self._inject_context(run)
                if injected is not None:
                    yield injected
            # `round` / `max_rounds`: seed 002's names for the same figures
            run.store.emit(
                "round_start", {"iteration": iteration, "round": iteration + 1, "max_rounds": limit}
            )
            if run.last_call_seconds is None or run.last_call_seconds > EVENTS_WAIT_SECONDS:
                # A model that takes its time: the round's start leaves now, not after the
                # request is built (which, with many runs sharing the CPU, takes a while).
                # An instant one's reply commits with it (model_call.py:_wait_for_model).
                run.store.commit()
            self._report_progress(run, iteration + 1, limit)
            run.fresh.clear()  # everything added so far was yielded where it was made
            self._refresh_tools(run)  # a tool list that changed is offered from this request on
            request = self._request(run)
            yield from self._prepared_messages(run)  # a compaction's summary and carried tail
            try:
                response = self._call_model(run, request)
            except LLMError as exc:
                return StepEnd("error", str(exc))
            self._retire_shown_once(run)
            if response is None:
                return StepEnd("stopped")
            assistant = self._persist_assistant(run, response)
            yield assistant
            if not response.tool_calls and not (response.content or "").strip():
                yield self._note(run, prompts.EMPTY_REPLY, kind=MessageKind.GUARD, description="empty reply")
                continue
            if not response.tool_calls:
                return StepEnd("answered", response.content or "")
            errors = []
            for message in self._execute_calls(run, response.tool_calls, assistant.sequence):
                if message.kind == MessageKind.TOOL_ERROR:
                    errors.append(message)
                yield message
            if run.trace.status != TraceStatus.RUNNING:
                return StepEnd("ended")  # stopped, waiting, or a guard ended the run
            if errors and run.reflexion:
                gave_up = yield from self._self_critique(run, assistant, errors)  # strategies/reflexion.py
                if gave_up is not None:
                    return StepEnd("gave_up", gave_up)
        return StepEnd("limit")

    def _end(self, run: RunState, end: StepEnd) -> None:
        """End the run as its loop (or its strategy) ended."""
        if end.kind == "ended":
            return
        if end.kind == "answered":
            self._finish(run, TraceStatus.COMPLETED, result=end.text)
        elif end.kind == "stopped":
            self._finish(run, TraceStatus.STOPPED)
        elif end.kind == "limit":
            # A pause, not a failure: a continue goes on (and may raise the limit).
            self._finish(
                run,
                TraceStatus.STOPPED,
                error=(
                    f"{STEP_LIMIT_PREFIX} {run.max_iterations} steps without a final answer; continue the run "
                    "to go on (max_iterations may raise the limit)"
                ),
                reason="step_limit",
            )
        else:
            self._finish(run, TraceStatus.FAILED, error=end.text)

    def _report_progress(self, run: RunState, round_number: int, max_rounds: int) -> None:
        """The run's figures at a round's start, to whoever asked (`RunConfig.on_progress`)."""
        if run.config.on_progress is None:
            return
        trace = run.trace
        run.config.on_progress(
            {
                "round": round_number,
                "max_rounds": max_rounds,
                "iterations": run.iterations,
                "messages": trace.total_messages,
                "tokens": trace.total_tokens,
                "cost": trace.total_cost,
                "goal_id": trace.current_goal_id,
            }
        )

    def _stopping(self, run: RunState) -> bool:
        if run.stop_event.is_set():
            return True
        if run.store.stop_seen:  # read by the last commit
            run.stop_event.set()
            return True
        now = time.monotonic()
        # A commit that read the stop flag counts as a poll: a busy run polls for free.
        last = max(run.last_poll, run.store.polled_at)
        if now - last < settings.AGENT_STOP_POLL_SECONDS:
            return False
        run.last_poll = now
        if run.store.heartbeat():
            run.stop_event.set()
            return True
        return False

    def _finish(
        self,
        run: RunState,
        status: str,
        *,
        result: str | None = None,
        error: str | None = None,
        reason: str | None = None,
    ) -> None:
        trace = run.trace
        trace.status = status
        trace.completed_at = timezone.now()
        if result is not None:
            trace.result_summary = result
        trace.error_message = error
        for count_outcome in extensions.on_end:  # M5: outcomes, counted with the final commit
            count_outcome(trace, status, run.store.defer)
        if status == TraceStatus.WAITING:
            trace.completed_at = None  # paused inside a step: its goals stay open, unmarked
        else:
            run.goal_tree.leave_open(status)  # goal_updated events before the end event
            if RUN_APPROVED in (trace.context or {}):
                # "approve the rest of this run" ends with the run
                trace.context = {k: v for k, v in trace.context.items() if k != RUN_APPROVED}
        event = END_EVENTS.get(status, "error")
        run.store.emit(
            event,
            {
                "status": status,
                "result": result,
                "error": error,
                "head_sequence": trace.head_sequence,
                "total_tokens": trace.total_tokens,
                "total_cost": trace.total_cost,
                "cost_state": trace.cost_state.value,
                **({"reason": reason} if reason else {}),
            },
        )
        run.store.commit(final=True, release=True)  # one statement: the end and the lease given up
        run.turn.give()  # the run's work is done
        for notify in extensions.after_end:  # notifications
            notify(trace, status)
        if self.hooks.has("on_agent_end"):
            self.hooks.on_agent_end(trace)

    def _end_abruptly(self, run: RunState, reason: str) -> None:
        """A run that ends by an exception leaves the trace failed, not 'running'."""
        if run.trace.status != TraceStatus.RUNNING:
            return
        try:
            self._finish(run, TraceStatus.FAILED, error=f"run crashed: {reason}"[:2000])
        except Exception:
            logger.exception("could not mark trace %s failed", run.trace.trace_id)
