"""A run's model calls: watched for stop and timeouts, tokens streamed as events, the reply persisted (R5, G2, G3, R8, R9)."""

from __future__ import annotations

import concurrent.futures
import time
from typing import Any

from django.conf import settings

import traces.runner.project as project
from traces.events.presence import watched
from traces.guards.normalize import ModelTimeout, TokenWatch, normalize_response
from traces.llm import LLMResponse
from traces.models import Message
from traces.runner.base import RunnerBase
from traces.runner.config import LeaseLost
from traces.runner.connections import connection_release
from traces.runner.extensions import extensions
from traces.runner.history import describe_assistant, new_message
from traces.runner.state import RunState
from traces.runner.waitwatch import Waiting, wait_watch

# How long a model call may take and still have the events emitted before it (round_start,
# a context injection's) committed with its reply; a slower call commits them at once.
EVENTS_WAIT_SECONDS = 0.005
# A waiting run leaves the stop poll to the process's watcher, which reads the row within
# a tick or two; one whose row it has not read after this many ticks (a row only the run's
# own open transaction sees, as in a test) polls for itself, once a tick.
SELF_POLL_AFTER_TICKS = 4


def _streams(run: RunState) -> bool:
    """Whether this call streams: `run.stream`, and under `AGENT_STREAM=watched` only
    while a watcher follows the trace (or the run's own `on_token` listens)."""
    if not run.stream or not run.stream_watched or run.config.on_token is not None:
        return run.stream
    return watched(run.trace.pk)


class ModelCalls(RunnerBase):
    """AgentRunner's model-call steps (a mixin; `self` is the AgentRunner)."""

    def _call_model(
        self, run: RunState, messages: list[dict[str, Any]], *, offer_tools: bool = True
    ) -> LLMResponse | None:
        """One model call in a pool thread, watched from the run's thread.

        `offer_tools=False`: a call that must answer in text (a strategy's direct
        answer, plan, synthesis or self-critique, R11), offered no tool.

        Abandoned when a stop arrives (R5) or a G3 timeout passes (hard limit,
        silent stream); a `waiting` pulse marks each first-feedback period without
        a token (an empty `token` event with `pulse: true`); streamed text is
        persisted as `token` events as it arrives.
        """
        started = time.perf_counter()
        watch = TokenWatch(run.config.on_token)
        project.refresh(run)  # M9: a changed AGENTS.md replaces the context (one stat per file)
        messages = project.apply(messages, run.project_context)
        for shape in extensions.before_model:  # M8: the memory index and what was recalled
            messages = shape(run.trace, messages, run.store.emit) or messages
        if self.hooks.has("before_model"):
            messages = self.hooks.before_model(run.trace, messages)
        tools = (run.tool_schemas or None) if offer_tools else None
        stream = _streams(run)
        run.request_log.sent(
            messages, tools=tools, model=run.model.model, parameters={**run.params, "stream": stream}
        )
        extensions.observe("model_started", run, messages, tools)
        future = self._pool.submit(
            self.llm_call,
            messages,
            model=run.model,
            tools=tools,
            params=run.params,
            stream=stream,
            on_token=watch,
        )
        try:
            with run.turn.waiting(), wait_watch().watching(run.store) as waiting:
                response = self._wait_for_model(run, future, watch, started, waiting, stream)
        except BaseException as exc:
            extensions.observe("model_ended", run, None, None, f"{type(exc).__name__}: {exc}")
            raise
        finally:
            run.last_call_seconds = time.perf_counter() - started
            run.model_seconds += run.last_call_seconds
        if response is None:
            extensions.observe("model_ended", run, None, None, "stopped")
            return None
        self._flush_tokens(run, watch)  # committed with the assistant message
        if self.hooks.has("after_model"):
            self.hooks.after_model(run.trace, response)
        return normalize_response(response, run.offered if offer_tools else set())

    def _wait_for_model(
        self,
        run: RunState,
        future: concurrent.futures.Future[LLMResponse],
        watch: TokenWatch,
        started: float,
        waiting: Waiting,
        stream: bool,
    ) -> LLMResponse | None:
        """Wait for the reply; None when a stop arrived first.

        The process's watcher (traces/runner/waitwatch.py) reads the stop flag and
        keeps the lease for every waiting run at once; this thread only reads what
        it found, and commits streamed tokens.
        """
        try:  # an instant answer commits with the events before it, in one commit
            return future.result(timeout=EVENTS_WAIT_SECONDS)
        except concurrent.futures.TimeoutError:
            if run.store.has_pending_events:
                run.store.commit()  # round_start and the like leave now, not with the reply
        next_pulse = settings.AGENT_TIMEOUT_FIRST_FEEDBACK
        while True:
            connection_release()  # the wait needs no connection: 256 runs never hold 256
            try:
                return future.result(timeout=settings.AGENT_STOP_POLL_SECONDS)
            except concurrent.futures.TimeoutError:
                pass
            elapsed = time.perf_counter() - started
            if waiting.lease_lost:
                future.cancel()
                raise LeaseLost(f"trace {run.trace.pk!r} was claimed by another run; stopping this one")
            if waiting.stop_requested or run.store.stop_seen:
                run.stop_event.set()
            if run.stop_event.is_set() or (not waiting.seen and self._unseen_stopping(run, waiting)):
                future.cancel()
                return None
            if elapsed > settings.AGENT_TIMEOUT_HARD:
                future.cancel()
                raise ModelTimeout(
                    f"model call exceeded the hard timeout ({settings.AGENT_TIMEOUT_HARD:g} s)"
                )
            silent = time.perf_counter() - watch.last_at if watch.last_at else 0.0
            if stream and silent > settings.AGENT_TIMEOUT_HEARTBEAT:
                future.cancel()
                raise ModelTimeout(f"model stream was silent for {silent:.0f} s (heartbeat timeout)")
            if watch.first_at is None and elapsed > next_pulse:
                # seed 002: the first-feedback pulse is an empty token event
                run.store.emit("token", {"text": "", "pulse": True, "seconds": round(elapsed, 1)})
                next_pulse += settings.AGENT_TIMEOUT_FIRST_FEEDBACK
            if self._flush_tokens(run, watch) or run.store.has_pending_events:
                run.store.commit()

    def _unseen_stopping(self, run: RunState, waiting: Waiting) -> bool:
        """The stop poll of a run the watcher has not read yet: none for its first ticks
        (the watcher's first read is due; a poll here was one UPDATE and one SELECT a call),
        then the run's own, at most once a tick."""
        waited = time.monotonic() - waiting.since
        return waited > SELF_POLL_AFTER_TICKS * settings.AGENT_STOP_POLL_SECONDS and self._stopping(run)

    def _model_replied(self, run: RunState, response: LLMResponse, message: Message) -> None:
        """The reply became `message`: its request is recorded, observers told."""
        run.request_log.record(run.store, message.sequence)
        extensions.observe("model_ended", run, response, message, None)

    def _flush_tokens(self, run: RunState, watch: TokenWatch) -> bool:
        text = watch.drain()
        if text:
            run.store.emit("token", {"text": text})
        return bool(text)

    # --- context management (C1-C5) ------------------------------------------------

    def _persist_assistant(self, run: RunState, response: LLMResponse) -> Message:
        calls = response.tool_calls
        if not run.goal_tree and not any(c["function"]["name"] == "goal" for c in calls):
            run.goal_tree.ensure_root(run.trace.task or "Complete the task")  # R9
        message = new_message(
            run,
            role="assistant",
            content=response.content,
            tool_calls=calls or None,
            goal_id=run.trace.current_goal_id,
            prompt_tokens=response.prompt_tokens,
            completion_tokens=response.completion_tokens,
            cost=response.cost,
            duration_ms=response.duration_ms,
            finish_reason=response.finish_reason,
            reasoning=response.reasoning or "",
            reasoning_tokens=response.reasoning_tokens,
            kind="",
            description=describe_assistant(response),
        )
        self._add_message(run, message)
        self._model_replied(run, response, message)
        # M4: [ex_…] = usage, counted with this message's commit
        for hook in extensions.on_reply:
            hook(run.trace, response.content, run.store.defer)
        # No commit here: a side-effecting tool's call commits with its `tool_call` event
        # just before the tool runs (calls.py:_run_call), quick read-only rounds once with
        # their results.
        return message
