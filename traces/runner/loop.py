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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from memory.injection import system_prompt_for, with_experiences
from memory.presets import AgentPreset, UnknownPreset, get_preset
from memory.services import experience_record_citations, experience_record_outcome
from tools.models import ToolContext, ToolResult
from tools.registry import Tool, ToolRegistry, load_builtin_tools
from traces import compaction, prompts
from traces.compaction import PathInfo, context_threshold, info_for
from traces.goal_tree import GoalTree
from traces.hooks import LifecycleHooks, hooks_from_settings
from traces.llm import (
    LLMClient,
    LLMError,
    LLMResponse,
    ModelNotConfigured,
    ModelSettings,
    agent_model,
    utility_model,
)
from traces.loop_detection import LoopDetector, LoopVerdict
from traces.models import Approval, Message, Trace, TraceStatus
from traces.notifications import notify_run_ended
from traces.runner import run_settings
from traces.runner.approvals import (
    POLICIES,
    RUN_APPROVED,
    GateDecision,
    approval_payload,
    confirm_policy,
    gate,
)
from traces.runner.config import (
    STEP_LIMIT_PREFIX,
    InvalidRun,
    LeaseLost,
    RunConfig,
    RunError,
    RunResult,
)
from traces.runner.guards import ModelTimeout, TokenWatch, normalize_response
from traces.runner.prepare import (
    load_trace,
    new_trace,
    plan_existing,
    text_of,
    validate_messages,
)
from traces.runner.store import RunStore, trace_claim, worker_identity
from traces.selectors import PathMessage, trace_main_path_for_run
from traces.storable import without_nul

logger = logging.getLogger(__name__)

ContextHook = Callable[[Trace, GoalTree | None], str | None]
# Inline tools that are quick and change nothing outside the run (the plan).
QUICK_INLINE_TOOLS = {"goal"}


@dataclass
class _Run:
    """The state of one run, owned by the thread running it."""

    trace: Trace
    store: RunStore
    goal_tree: GoalTree
    config: RunConfig
    preset: AgentPreset
    model: ModelSettings
    tools: list[Tool]
    workspace: Path
    llm_messages: list[dict[str, Any]] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    stream: bool = False
    max_iterations: int = 30
    context_every: int = 10
    stop_event: threading.Event = field(default_factory=threading.Event)
    last_poll: float = 0.0
    pending_calls: list[dict[str, Any]] = field(default_factory=list)
    pending_from: int = 0  # sequence of the assistant message whose calls are pending
    fresh: list[Message] = field(default_factory=list)  # persisted, not yet yielded
    iterations: int = 0
    model_seconds: float = 0.0
    started: float = field(default_factory=time.perf_counter)
    loop_detector: LoopDetector = field(
        default_factory=lambda: LoopDetector(
            warning=settings.AGENT_LOOP_WARNING, critical=settings.AGENT_LOOP_CRITICAL
        )
    )
    loop_verdict: LoopVerdict | None = None  # worst pattern seen in the current step
    infos: list[PathInfo] = field(default_factory=list)  # one per llm_messages entry (C1-C3)
    token_total: int = 0  # estimated tokens of llm_messages
    threshold: int = 0  # compaction starts above this many tokens
    once_pending: list[tuple[int, str]] = field(default_factory=list)  # (index, long-term memory) to retire
    dropped_signature: tuple[int, ...] = ()  # what level 1 left out last time (one event per change)
    truncated_signature: tuple[int, ...] = ()  # what the truncation fallback left out last time
    policy: str = "auto"  # confirm gate (G5)
    gated: bool = False  # whether calls must pass the gate (a policy asks, or approvals exist)

    offered: set[str] = field(init=False)  # names of self.tools
    tool_schemas: list[dict[str, Any]] = field(init=False)  # what every model request offers

    def __post_init__(self) -> None:
        # The tools are fixed for the run: derive these once, not at every step.
        self.offered = {t.name for t in self.tools}
        self.tool_schemas = [t.schema() for t in self.tools]


class AgentRunner:
    """Runs agents. Infrastructure is fixed at construction; each run gets a RunConfig."""

    def __init__(
        self,
        *,
        llm_call: Callable[..., LLMResponse] | None = None,
        utility_llm_call: Callable[..., LLMResponse] | None = None,
        tool_registry: ToolRegistry | None = None,
        context_hooks: list[ContextHook] | None = None,
        hooks: LifecycleHooks | None = None,
        worker_id: str | None = None,
    ) -> None:
        self.llm_call = llm_call or LLMClient()
        self.utility_llm_call = utility_llm_call or LLMClient(retries=0, timeout=15)
        self.tool_registry = tool_registry or load_builtin_tools()
        self.context_hooks = list(context_hooks if context_hooks is not None else default_context_hooks())
        self.hooks = hooks if hooks is not None else hooks_from_settings()
        self.worker_id = worker_id or worker_identity()
        self._stops: dict[str, threading.Event] = {}
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="llm")
        self.last_run_stats: dict[str, Any] = {}

    # --- public API --------------------------------------------------------------

    def run(
        self, messages: list[dict[str, Any]] | None, config: RunConfig | None = None
    ) -> Iterator[Trace | Message]:
        """Run (new, continue, rewind or regenerate) and yield the trace and each message."""
        config = config or RunConfig()
        run = self._prepare(validate_messages(messages), config)
        self._stops[run.trace.trace_id] = run.stop_event
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
            self._stops.pop(run.trace.trace_id, None)
            self.last_run_stats = {
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
        """Let the model-call threads go (runners made for one sub-run)."""
        self._pool.shutdown(wait=False)

    def stop(self, trace_id: str) -> bool:
        """R5: ask the run of `trace_id` to stop at its next checkpoint.

        Works across processes (a flag on the trace row, polled while a model call
        is in flight) and at once for a run in this process. Returns whether a
        running trace was found.
        """
        from traces.services import trace_request_stop

        event = self._stops.get(trace_id)
        if event is not None:
            event.set()
        return trace_request_stop(trace_id=trace_id)

    # --- phase 1: prepare --------------------------------------------------------

    def _prepare(self, messages: list[dict[str, Any]], config: RunConfig) -> _Run:
        try:
            preset = get_preset(config.agent_type)
        except UnknownPreset as exc:
            raise InvalidRun(str(exc)) from None
        if config.trace_id is None:
            return self._prepare_new(messages, config, preset, self._select_tools(config, preset))
        previous = load_trace(config.trace_id)
        # The trace's stored settings hold unless this request sets them (run_settings.py).
        check = config.tools is not None
        config = run_settings.with_stored(config, previous.run_settings)
        tools = self._select_tools(config, preset, check=check)
        return self._prepare_existing(messages, config, preset, tools, previous)

    def _select_tools(self, config: RunConfig, preset: AgentPreset, *, check: bool = True) -> list[Tool]:
        """The run's tools: the requested ones within the preset, else the preset's.

        A request naming an unknown or unavailable tool is refused (`check`); a
        stored list just loses tools that became unavailable since.
        """
        if config.tools is not None:
            if check:
                try:
                    self.tool_registry.check_requested(config.tools)
                except ValueError as exc:
                    raise InvalidRun(str(exc)) from None
            allowed: list[str] | None = config.tools
            if preset.allowed_tools is not None:
                allowed = [t for t in config.tools if t in preset.allowed_tools]
        else:
            allowed = preset.allowed_tools
        return self.tool_registry.select(allowed=allowed, denied=preset.denied_tools)

    def _model(self, name: str | None) -> ModelSettings:
        try:
            return agent_model(name)
        except ModelNotConfigured as exc:
            raise InvalidRun(str(exc)) from None

    def _new_run(
        self, trace: Trace, config: RunConfig, preset: AgentPreset, tools: list[Tool], model: ModelSettings
    ) -> _Run:
        from tools.workspace import workspace_for

        store = RunStore(trace)
        goal_tree = (
            GoalTree.load(trace, emit=store.emit) if trace.last_sequence else GoalTree(trace, [], store.emit)
        )
        store.goal_tree = goal_tree
        params = dict(trace.llm_params or {})
        temperature = config.temperature if config.temperature is not None else preset.temperature
        if temperature is not None:
            params["temperature"] = temperature
        params.update(config.llm_params)
        policy = confirm_policy(trace, config.confirm_policy, preset)
        if policy not in POLICIES:
            raise InvalidRun(f"unknown confirm policy {policy!r}; use {', '.join(POLICIES)}")
        max_iterations = config.max_iterations or preset.max_iterations or settings.AGENT_MAX_ITERATIONS
        context_every = config.context_every or settings.AGENT_CONTEXT_EVERY
        effective = {
            "tools": [t.name for t in tools],
            "temperature": temperature,
            "max_iterations": max_iterations,
            "skills": config.skills,
            "system_prompt": config.system_prompt,
            "llm_params": dict(config.llm_params),
            "confirm_policy": policy,
            "enable_memory": config.enable_memory,
            "context_every": context_every,
            "stream": config.stream,
            "sandbox_network": (
                config.sandbox_network
                if config.sandbox_network is not None
                else bool((preset.extra or {}).get("sandbox_network", settings.AGENT_SANDBOX_NETWORK))
            ),
        }
        changed = run_settings.changes(trace.run_settings, effective)
        trace.run_settings = effective
        if changed:
            store.emit("settings_changed", {"changed": changed})
        return _Run(
            trace=trace,
            store=store,
            goal_tree=goal_tree,
            config=config,
            preset=preset,
            model=model,
            tools=tools,
            workspace=workspace_for(trace.trace_id),
            params=params,
            stream=settings.AGENT_STREAM if config.stream is None else config.stream,
            max_iterations=max_iterations,
            context_every=context_every,
            threshold=context_threshold(model.model),
            policy=policy,
            gated=policy != "auto"
            or (trace.last_sequence > 0 and Approval.objects.filter(trace=trace).exists()),
        )

    def _prepare_new(
        self, messages: list[dict[str, Any]], config: RunConfig, preset: AgentPreset, tools: list[Tool]
    ) -> _Run:
        model = self._model(config.model)
        base = config.system_prompt or prompts.SYSTEM_PROMPT
        system = system_prompt_for(config, preset, base, {t.name for t in tools})  # M6
        trace = new_trace(messages, config, model=model.model, owner=self.worker_id)
        trace.tools = [t.schema() for t in tools]
        if config.reserved_token is not None:
            self._adopt_reserved(trace, config.reserved_token)
        run = self._new_run(trace, config, preset, tools, model)
        if not trace.name:
            trace.name = self._name_for(trace.task or "")
        if config.reserved_token is None:
            trace.save(force_insert=True)
        if messages[0]["role"] != "system":
            messages = [{"role": "system", "content": system}, *messages]
        run.store.emit("run_started", {"mode": "new", "model": model.model, "agent_type": config.agent_type})
        messages = with_experiences(  # M4
            trace, messages, config, utility_call=self.utility_llm_call, emit=run.store.emit
        )
        self._append_inputs(run, messages)
        run.store.commit()
        return run

    def _adopt_reserved(self, trace: Trace, token: int) -> None:
        """Claim the row the API pre-created for this new trace; the run's first
        fenced commit then writes the fields the run decides (task, tools, name...)."""
        claimed = trace_claim(trace_id=trace.trace_id, owner=self.worker_id, reserved_token=token)
        trace.run_token = claimed.run_token
        trace.last_event_id = claimed.last_event_id
        trace.created_at = claimed.created_at
        trace.name = trace.name or claimed.name

    def _prepare_existing(
        self,
        messages: list[dict[str, Any]],
        config: RunConfig,
        preset: AgentPreset,
        tools: list[Tool],
        previous: Trace,
    ) -> _Run:
        trace_id = config.trace_id or ""
        previous_status = config.reserved_from or previous.status
        model = self._model(config.model or previous.model)
        trace = trace_claim(trace_id=trace_id, owner=self.worker_id, reserved_token=config.reserved_token)
        run = self._new_run(trace, config, preset, tools, model)
        try:
            path = trace_main_path_for_run(trace_id=trace.trace_id, head_sequence=trace.head_sequence)
            plan = plan_existing(trace, path, messages, config, previous_status)
        except RunError:
            # Refused: give the trace back as it was (the claim cleared these).
            trace.status = previous_status
            trace.error_message = previous.error_message
            trace.completed_at = previous.completed_at
            run.store.commit()
            run.store.release()
            raise
        # The rewind (goal rows dropped), healing and new inputs land together or not at all.
        with transaction.atomic():
            trace.model = model.model
            mode = "continue"
            if plan.is_rewind:
                mode = "rewind" if messages else "regenerate"
                cut = plan.kept[-1]
                run.store.emit(
                    "rewind",
                    {
                        "after_sequence": plan.requested_after,
                        "cut_sequence": cut.sequence,
                        "previous_head": trace.head_sequence,
                        "goal_tree_snapshot": run.goal_tree.snapshot(),
                    },
                )
                dropped = run.goal_tree.rebuild_at(cut.created_at)
                run.store.emit("goal_tree_rebuilt", {"dropped_goal_ids": dropped})
                trace.head_sequence = cut.sequence
            run.store.emit(
                "run_started", {"mode": mode, "model": model.model, "after_sequence": config.after_sequence}
            )
            self._load_path(run, plan.kept)
            run.pending_calls = plan.pending_calls
            if plan.pending_calls:
                run.pending_from = next(m.sequence for m in reversed(plan.kept) if m.role == "assistant")
            for call in plan.missing_calls:
                self._add_message(run, heal_message(call, run))
            self._append_inputs(run, messages)
            run.store.commit()
        return run

    def _append_inputs(self, run: _Run, messages: list[dict[str, Any]]) -> None:
        for data in messages:
            message = Message.from_llm_dict(
                data,
                trace_id=run.trace.trace_id,
                sequence=run.store.next_sequence(),
                goal_id=run.trace.current_goal_id,
                parent_sequence=run.trace.head_sequence or None,
            )
            message.description = text_of(data.get("content"))[:200]
            message.kind = "input"
            self._add_message(run, message)

    def _add_message(self, run: _Run, message: Message) -> Message:
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

    def _load_path(self, run: _Run, kept: list[PathMessage]) -> None:
        """The in-memory request history of a loaded main path (read once per run)."""
        last_assistant = max((i for i, m in enumerate(kept) if m.role == "assistant"), default=-1)
        pairs = []
        for index, message in enumerate(kept):
            data = message.to_llm_dict()
            if message.kind == "once" and index < last_assistant:
                data["content"] = compaction.shown_once(message.description)  # C3: seen already
            pairs.append((data, info_for(message, data)))
        run.llm_messages, run.infos = sanitize_history_with_infos(pairs)
        run.token_total = sum(info.tokens for info in run.infos)

    def _prepared_messages(self, run: _Run) -> Iterator[Message]:
        fresh, run.fresh = run.fresh, []
        yield from fresh

    def _name_for(self, task: str) -> str:
        """R10: a short display name from the utility model; the task's start if that fails."""
        fallback = " ".join(task.split())[:60] or "Untitled run"
        try:
            response = self.utility_llm_call(
                [{"role": "user", "content": prompts.NAME_PROMPT.format(task=task[:2000])}],
                model=utility_model(),
                params={"max_tokens": 30},
            )
        except (LLMError, ModelNotConfigured) as exc:
            logger.info("naming a trace failed: %s", exc)
            return fallback
        name = " ".join(without_nul(response.content or "").split()).strip("\"'. ")
        return name[:200] or fallback

    # --- phase 3: the loop -------------------------------------------------------

    def _loop(self, run: _Run) -> Iterator[Message]:
        if run.pending_calls:
            yield from self._execute_calls(run, run.pending_calls, run.pending_from)
            if run.trace.status != TraceStatus.RUNNING:
                return None
        for iteration in range(run.max_iterations):
            if self._stopping(run):
                return self._finish(run, TraceStatus.STOPPED)
            run.iterations = iteration + 1
            if iteration % run.context_every == 0:
                injected = self._inject_context(run)
                if injected is not None:
                    yield injected
            run.store.emit("round_start", {"iteration": iteration})
            run.fresh.clear()  # everything added so far was yielded where it was made
            request = self._request(run)
            yield from self._prepared_messages(run)  # a compaction's summary and carried tail
            try:
                response = self._call_model(run, request)
            except LLMError as exc:
                return self._finish(run, TraceStatus.FAILED, error=str(exc))
            self._retire_shown_once(run)
            if response is None:
                return self._finish(run, TraceStatus.STOPPED)
            assistant = self._persist_assistant(run, response)
            yield assistant
            if not response.tool_calls and not (response.content or "").strip():
                yield self._note(run, prompts.EMPTY_REPLY, kind="guard", description="empty reply")
                continue
            if not response.tool_calls:
                return self._finish(run, TraceStatus.COMPLETED, result=response.content or "")
            yield from self._execute_calls(run, response.tool_calls, assistant.sequence)
            if run.trace.status != TraceStatus.RUNNING:
                return None  # stopped, or a guard ended the run
        # A pause, not a failure: a continue goes on (and may raise the limit).
        return self._finish(
            run,
            TraceStatus.STOPPED,
            error=(
                f"{STEP_LIMIT_PREFIX} {run.max_iterations} steps without a final answer; continue the run "
                "to go on (max_iterations may raise the limit)"
            ),
            reason="step_limit",
        )

    def _inject_context(self, run: _Run) -> Message | None:
        """R7: the plan, active collaborators and hook output as one system message."""
        text = build_context_injection(run.trace, run.goal_tree, self.context_hooks)
        if not text:
            return None
        message = new_message(
            run,
            role="system",
            content=text,
            kind="context",
            description="context injection: plan and collaborators",
            goal_id=run.trace.current_goal_id,
        )
        # Committed with the step (or by the model-call watch if the call is slow).
        self._add_message(run, message)
        return message

    def _call_model(self, run: _Run, messages: list[dict[str, Any]]) -> LLMResponse | None:
        """One model call in a pool thread, watched from the run's thread.

        Abandoned when a stop arrives (R5) or a G3 timeout passes (hard limit,
        silent stream); a `waiting` pulse marks each first-feedback period without
        a token (an empty `token` event with `pulse: true`); streamed text is
        persisted as `token` events as it arrives.
        """
        started = time.perf_counter()
        watch = TokenWatch(run.config.on_token)
        if self.hooks.has("before_model"):
            messages = self.hooks.before_model(run.trace, messages)
        future = self._pool.submit(
            self.llm_call,
            messages,
            model=run.model,
            tools=run.tool_schemas or None,
            params=run.params,
            stream=run.stream,
            on_token=watch,
        )
        next_pulse = settings.AGENT_TIMEOUT_FIRST_FEEDBACK
        try:
            while True:
                try:
                    response = future.result(timeout=settings.AGENT_STOP_POLL_SECONDS)
                    break
                except concurrent.futures.TimeoutError:
                    pass
                elapsed = time.perf_counter() - started
                if self._stopping(run, poll_now=True):
                    future.cancel()
                    return None
                if elapsed > settings.AGENT_TIMEOUT_HARD:
                    future.cancel()
                    raise ModelTimeout(
                        f"model call exceeded the hard timeout ({settings.AGENT_TIMEOUT_HARD:g} s)"
                    )
                silent = time.perf_counter() - watch.last_at if watch.last_at else 0.0
                if run.stream and silent > settings.AGENT_TIMEOUT_HEARTBEAT:
                    future.cancel()
                    raise ModelTimeout(f"model stream was silent for {silent:.0f} s (heartbeat timeout)")
                if watch.first_at is None and elapsed > next_pulse:
                    # seed 002: the first-feedback pulse is an empty token event
                    run.store.emit("token", {"text": "", "pulse": True, "seconds": round(elapsed, 1)})
                    next_pulse += settings.AGENT_TIMEOUT_FIRST_FEEDBACK
                if self._flush_tokens(run, watch) or run.store.has_pending_events:
                    run.store.commit()
        finally:
            run.model_seconds += time.perf_counter() - started
        self._flush_tokens(run, watch)  # committed with the assistant message
        if self.hooks.has("after_model"):
            self.hooks.after_model(run.trace, response)
        return normalize_response(response, run.offered)

    def _flush_tokens(self, run: _Run, watch: TokenWatch) -> bool:
        text = watch.drain()
        if text:
            run.store.emit("token", {"text": text})
        return bool(text)

    # --- context management (C1-C5) ------------------------------------------------

    def _request(self, run: _Run) -> list[dict[str, Any]]:
        """The messages for the next model call: the history, compacted when it is too big."""
        if run.token_total <= run.threshold:
            return run.llm_messages
        messages, dropped = compaction.level_one(run.llm_messages, run.infos, run.goal_tree)
        tokens = sum(compaction.estimate_tokens(m) for m in messages)
        if dropped and tuple(dropped) != run.dropped_signature:
            run.dropped_signature = tuple(dropped)
            self._compaction_event(
                run,
                {
                    "level": 1,
                    "dropped_sequences": dropped,
                    "tokens_before": run.token_total,
                    "tokens_after": tokens,
                },
            )
        if tokens <= run.threshold:
            return messages
        if self._compact(run):
            messages, _ = compaction.level_one(run.llm_messages, run.infos, run.goal_tree)
            tokens = sum(compaction.estimate_tokens(m) for m in messages)
            if tokens <= run.threshold:
                return messages
        return self._truncate(run, tokens)

    def _truncate(self, run: _Run, tokens: int) -> list[dict[str, Any]]:
        """No summary helped: cut the request (never send one over the threshold)."""
        plan = run.goal_tree.to_prompt(include_summary=True)
        messages, dropped = compaction.truncate(run.llm_messages, run.infos, plan, run.threshold)
        if tuple(dropped) != run.truncated_signature:
            run.truncated_signature = tuple(dropped)
            self._compaction_event(
                run,
                {
                    "level": "truncate",
                    "dropped_sequences": dropped,
                    "tokens_before": tokens,
                    "tokens_after": sum(compaction.estimate_tokens(m) for m in messages),
                },
            )
        return messages

    def _compact(self, run: _Run) -> bool:
        """Level 2: reflect, summarise, and hang the summary off the first user message."""
        context = run.trace.context
        failures = int(context.get("compaction_failures", 0))
        if failures >= compaction.FAILURE_LIMIT or compaction.already_compacted(run.infos):
            return False
        first_user = next((i for i, m in enumerate(run.llm_messages) if m["role"] == "user"), None)
        carry = compaction.carried_start(run.llm_messages, run.infos)
        if first_user is None or carry <= first_user + 1:
            return False  # nothing between the task and the unanswered tail to compress
        run.store.commit()  # the reflection reads the committed main path
        compaction.reflect_before_compaction(run.store, self.llm_call)
        request = compaction.summary_request(
            run.llm_messages,
            run.infos,
            run.goal_tree.to_prompt(include_summary=True),
            int(compaction.context_limit(run.model.model) * 0.9),
        )
        outcome = compaction.write_summary(self.llm_call, run.model, request)
        if outcome.text is None:
            context["compaction_failures"] = failures + 1
            self._compaction_event(
                run,
                {
                    "level": 2,
                    "failed": outcome.error,
                    "failures": failures + 1,
                    "limit": compaction.FAILURE_LIMIT,
                },
            )
            return False
        context["compaction_failures"] = 0
        self._replace_with_summary(run, first_user, carry, outcome.text)
        return True

    def _replace_with_summary(self, run: _Run, first_user: int, carry: int, text: str) -> None:
        compressed = [i.sequence for i in run.infos[first_user + 1 : carry] if i.sequence is not None]
        tail = list(zip(run.llm_messages[carry:], run.infos[carry:], strict=True))
        tokens_before = run.token_total
        previous_head = run.trace.head_sequence
        run.llm_messages = run.llm_messages[: first_user + 1]
        run.infos = run.infos[: first_user + 1]
        run.token_total = sum(info.tokens for info in run.infos)
        first_sequence = run.infos[first_user].sequence
        summary = new_message(
            run,
            role="user",
            content=f"{compaction.SUMMARY_MARKER} Summary of the conversation so far "
            f"({len(compressed)} messages compressed):\n\n{text}",
            parent_sequence=first_sequence,
            kind="summary",
            description=f"summary of {len(compressed)} messages",
            goal_id=run.trace.current_goal_id,
        )
        self._add_message(run, summary)
        for data, info in tail:
            if info.sequence is None:
                continue
            self._add_message(
                run,
                new_message(
                    run,
                    role=data["role"],
                    content=data.get("content"),
                    tool_calls=data.get("tool_calls"),
                    tool_call_id=data.get("tool_call_id"),
                    name=data.get("name"),
                    kind="carried",
                    goal_id=info.goal_id,
                    description=f"carried over from message {info.sequence}",
                ),
            )
        self._compaction_event(
            run,
            {
                "level": 2,
                "summary_sequence": summary.sequence,
                "previous_head": previous_head,  # rewinding into the range finds the originals here
                "compressed_sequences": [compressed[0], compressed[-1]] if compressed else [],
                "compressed_count": len(compressed),
                "carried_sequences": [i.sequence for _, i in tail if i.sequence is not None],
                "tokens_before": tokens_before,
                "tokens_after": run.token_total,
            },
        )

    def _compaction_event(self, run: _Run, info: dict[str, Any]) -> None:
        run.store.emit("compaction", info)
        run.store.commit()
        if self.hooks.has("on_compaction"):
            self.hooks.on_compaction(run.trace, info)

    def _retire_shown_once(self, run: _Run) -> None:
        """C3: a result meant to be seen once is replaced by its long-term memory after the call."""
        for index, memory in run.once_pending:
            info = run.infos[index]
            data = {**run.llm_messages[index], "content": compaction.shown_once(memory)}
            run.llm_messages[index] = data
            tokens = compaction.estimate_tokens(data)
            run.token_total += tokens - info.tokens
            info.tokens = tokens
        run.once_pending = []

    def _persist_assistant(self, run: _Run, response: LLMResponse) -> Message:
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
            kind="",
            description=describe_assistant(response),
        )
        self._add_message(run, message)
        # M4: [ex_…] = usage, counted with this message's commit
        experience_record_citations(trace=run.trace, text=response.content, write=run.store.defer)
        if not all(self._quick(run, call) for call in calls):
            # Commit the call before a slow or side-effecting tool runs: watchers see
            # it, and a crash mid-tool leaves an open call to heal (R6). Quick
            # read-only rounds commit once, with their results.
            run.store.commit()
        return message

    def _quick(self, run: _Run, call: dict[str, Any]) -> bool:
        name = str((call.get("function") or {}).get("name") or "")
        tool = self.tool_registry.get(name) if name in run.offered else None
        return tool is None or (tool.read_only and (not tool.inline or tool.name in QUICK_INLINE_TOOLS))

    def _execute_calls(
        self, run: _Run, calls: list[dict[str, Any]], message_sequence: int
    ) -> Iterator[Message]:
        run.loop_verdict = None
        for call in calls:
            if self._stopping(run):
                # Unanswered calls are healed when the trace is next loaded (R6).
                self._finish(run, TraceStatus.STOPPED)
                return
            denial = None
            if run.gated:
                decision = self._gate(run, call, message_sequence)
                if decision.action == "wait":
                    self._finish(run, TraceStatus.WAITING)  # no worker is held while an expert decides
                    return
                call = decision.call
                if decision.action == "deny":
                    note = decision.approval.decision_note if decision.approval else ""
                    denial = ToolResult(
                        title="Denied",
                        output=f"An expert denied this call.{' Reason: ' + note if note else ''}",
                        is_error=True,
                    )
            message = self._execute_call(run, call, forced=denial)
            if message is None:
                self._finish(run, TraceStatus.WAITING)  # a tool waits for a human (ask_human, S3)
                return
            yield message
        if run.loop_verdict is not None:
            yield from self._on_loop(run, run.loop_verdict)

    def _on_loop(self, run: _Run, verdict: LoopVerdict) -> Iterator[Message]:
        """G6: remind the model at warning level; end the run and flag it at critical."""
        run.store.emit(
            "loop_detected",
            {"level": verdict.level, "kind": verdict.kind, "count": verdict.count, "detail": verdict.detail},
        )
        if verdict.level == "critical":
            run.trace.needs_attention = True
            run.trace.attention_reason = f"loop detected ({verdict.kind}): {verdict.detail}"
            self._finish(run, TraceStatus.FAILED, error=run.trace.attention_reason)
            return
        yield self._note(
            run,
            prompts.LOOP_REMINDER.format(detail=verdict.detail),
            kind="loop_warning",
            description=f"loop warning: {verdict.kind}",
        )

    def _note(self, run: _Run, text: str, *, kind: str, description: str) -> Message:
        """A system message from the runtime itself on the main path (guards)."""
        note = new_message(
            run,
            role="system",
            content=text,
            kind=kind,
            description=description,
            goal_id=run.trace.current_goal_id,
        )
        self._add_message(run, note)
        run.store.commit()
        return note

    def _gate(self, run: _Run, call: dict[str, Any], message_sequence: int) -> GateDecision:
        name = str((call.get("function") or {}).get("name") or "")
        tool = self.tool_registry.get(name) if name in run.offered else None
        decision = gate(run.trace, call, tool, run.policy, message_sequence)
        approval = decision.approval
        if decision.by_run_approval is not None:
            run.store.emit(
                "confirm_response",
                {
                    "tool_call_id": call.get("id"),
                    "tool": name,
                    "status": "approved",
                    "scope": "run",
                    "approval_id": decision.by_run_approval,
                },
            )
        if approval is None:
            return decision
        if decision.created:
            # The approval and its event land through the run's fence, or not at all.
            with transaction.atomic():
                approval.save(force_insert=True)
                run.store.emit("confirm_required", approval_payload(approval))
                run.store.commit()
        elif decision.action != "wait":
            run.store.emit("confirm_response", approval_payload(approval))
        return decision

    def _execute_call(
        self, run: _Run, call: dict[str, Any], forced: ToolResult | None = None
    ) -> Message | None:
        """Run one call and persist its result; None when the tool suspends the run (the call stays open)."""
        function = call.get("function") or {}
        name = str(function.get("name") or "")
        arguments = function.get("arguments")
        run.store.emit("tool_call", {"tool_call_id": call.get("id"), "name": name, "arguments": arguments})
        ctx = ToolContext(
            trace=run.trace,
            workspace=run.workspace,
            goal_tree=run.goal_tree,
            goal_id=run.trace.current_goal_id,
            uid=run.trace.uid,
            runner=self,
            tool_call_id=call.get("id"),
            extra={"store": run.store, "config": run.config},
            sandbox_network=run.trace.run_settings.get("sandbox_network"),
        )
        started = time.perf_counter()
        blocked = None
        if forced is None and self.hooks.has("before_tool_call"):
            blocked = self.hooks.before_tool_call(run.trace, call)
        if forced is not None:
            result = forced
        elif blocked:
            result = ToolResult(title="Blocked", output=f"This call was blocked: {blocked}", is_error=True)
        else:
            with run.store.keep_alive():  # a long tool must not look like a dead worker (W5)
                result = self.tool_registry.execute(
                    name, arguments, ctx, offered=run.offered, timeout=settings.AGENT_TOOL_TIMEOUT
                )
            if result.metadata.get("suspend"):
                return None
        if self.hooks.has("after_tool_call"):
            result = self.hooks.after_tool_call(run.trace, call, result)
        duration_ms = int((time.perf_counter() - started) * 1000)
        verdict = run.loop_detector.observe(name, arguments, result.to_content())
        if verdict is not None and (run.loop_verdict is None or verdict.level == "critical"):
            run.loop_verdict = verdict
        once = bool(result.include_output_only_once and result.long_term_memory)
        message = new_message(
            run,
            role="tool",
            content=result.to_content(),
            tool_call_id=call.get("id"),
            name=name or None,
            goal_id=run.trace.current_goal_id or ctx.goal_id,
            duration_ms=duration_ms,
            kind="tool_error" if result.is_error else ("once" if once else ""),
            # a shown-once result keeps its long-term memory here for later requests (C3)
            description=(result.long_term_memory if once else (result.title or name))[:2000],
        )
        if len(message.content) > settings.AGENT_TOOL_SPILL_CHARS:
            message.content = compaction.spill(run.workspace, message.message_id, message.content)
        run.store.emit(
            "tool_result",
            {
                "tool_call_id": call.get("id"),
                "name": name,
                "title": result.title,
                "is_error": result.is_error,
                "duration_ms": duration_ms,
            },
        )
        self._add_message(run, message)
        if once:
            run.once_pending.append((len(run.llm_messages) - 1, message.description))
        run.store.commit()
        return message

    # --- ending ------------------------------------------------------------------

    def _stopping(self, run: _Run, *, poll_now: bool = False) -> bool:
        if run.stop_event.is_set():
            return True
        if run.store.stop_seen:  # read by the last commit
            run.stop_event.set()
            return True
        now = time.monotonic()
        # A commit that read the stop flag counts as a poll: a busy run polls for free.
        last = max(run.last_poll, run.store.polled_at)
        if not poll_now and now - last < settings.AGENT_STOP_POLL_SECONDS:
            return False
        run.last_poll = now
        if run.store.heartbeat():
            run.stop_event.set()
            return True
        return False

    def _finish(
        self,
        run: _Run,
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
        # M5: outcomes feed success_rate, counted with the final commit
        experience_record_outcome(trace=trace, status=status, write=run.store.defer)
        if status == TraceStatus.WAITING:
            trace.completed_at = None
        elif RUN_APPROVED in (trace.context or {}):
            # "approve the rest of this run" ends with the run
            trace.context = {k: v for k, v in trace.context.items() if k != RUN_APPROVED}
        event = {
            TraceStatus.COMPLETED: "final",
            TraceStatus.STOPPED: "stopped",
            TraceStatus.WAITING: "waiting",
        }.get(status, "error")
        run.store.emit(
            event,
            {
                "status": status,
                "result": result,
                "error": error,
                "head_sequence": trace.head_sequence,
                "total_tokens": trace.total_tokens,
                "total_cost": trace.total_cost,
                **({"reason": reason} if reason else {}),
            },
        )
        run.store.commit(final=True)
        notify_run_ended(trace, status)
        run.store.release()
        if self.hooks.has("on_agent_end"):
            self.hooks.on_agent_end(trace)

    def _end_abruptly(self, run: _Run, reason: str) -> None:
        """A run that ends by an exception leaves the trace failed, not 'running'."""
        if run.trace.status != TraceStatus.RUNNING:
            return
        try:
            self._finish(run, TraceStatus.FAILED, error=f"run crashed: {reason}"[:2000])
        except Exception:
            logger.exception("could not mark trace %s failed", run.trace.trace_id)


def default_context_hooks() -> list[ContextHook]:
    """Hooks every runner gets unless given its own: the A2A inbox reminder (S4)."""
    from traces.inbox import inbox_context_hook

    return [inbox_context_hook]


def build_context_injection(trace: Trace, goal_tree: GoalTree | None, hooks: list[ContextHook]) -> str:
    parts = []
    if goal_tree:
        parts.append(f"## Current Plan\n\n{goal_tree.to_prompt()}")
    collaborators = (trace.context or {}).get("collaborators") or []
    if collaborators:
        lines = ["## Active Collaborators"]
        for c in collaborators:
            summary = f": {c['summary']}" if c.get("summary") else ""
            lines.append(
                f"- {c.get('name', '?')} [{c.get('type', 'agent')}, {c.get('status', '?')}]{summary}"
            )
        parts.append("\n".join(lines))
    for hook in hooks:
        try:
            content = hook(trace, goal_tree)
        except Exception:
            logger.exception("context hook %r failed", hook)
            continue
        if content:
            parts.append(content)
    return "\n\n".join(parts)


def describe_assistant(response: LLMResponse) -> str:
    if response.tool_calls:
        return "calls " + ", ".join(c["function"]["name"] or "?" for c in response.tool_calls)
    return " ".join((response.content or "").split())[:200]


def heal_message(call: dict[str, Any], run: _Run) -> Message:
    """R6: a persisted synthetic result for a tool call that never got one."""
    from traces.subtraces import healed_result

    name = (call.get("function") or {}).get("name") or ""
    return new_message(
        run,
        role="tool",
        tool_call_id=call.get("id"),
        name=name or None,
        content=healed_result(run.trace, call) or prompts.INTERRUPTED_TOOL_RESULT,
        kind="healed",
        description=f"healed: {name} was interrupted",
        goal_id=run.trace.current_goal_id,
    )


def new_message(run: _Run, **fields: Any) -> Message:
    """An unsaved message taking the trace's next sequence."""
    sequence = run.store.next_sequence()
    return Message(
        message_id=Message.make_id(run.trace.trace_id, sequence),
        trace_id=run.trace.trace_id,
        sequence=sequence,
        **fields,
    )


def sanitize_history_with_infos(
    pairs: list[tuple[dict[str, Any], PathInfo]],
) -> tuple[list[dict[str, Any]], list[PathInfo]]:
    """`sanitize_history` keeping each message's PathInfo beside it."""
    messages = [data for data, _ in pairs]
    by_id = {id(data): info for data, info in pairs}
    clean = sanitize_history(messages)
    infos = [
        by_id.get(id(data)) or PathInfo(None, None, "placeholder", compaction.estimate_tokens(data))
        for data in clean
    ]
    return clean, infos


def sanitize_history(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """G2 at load: drop tool rows with no matching call; placeholder results for
    calls left unanswered in the middle of the path (the tail is healed for real)."""
    out: list[dict[str, Any]] = []
    open_ids: dict[str, str] = {}
    for message in messages:
        if message["role"] == "tool":
            if message.get("tool_call_id") not in open_ids:
                continue
            open_ids.pop(message["tool_call_id"])
        else:
            if open_ids and message["role"] != "tool":
                for call_id, name in open_ids.items():
                    out.append(
                        {
                            "role": "tool",
                            "tool_call_id": call_id,
                            "name": name,
                            "content": prompts.INTERRUPTED_TOOL_RESULT,
                        }
                    )
                open_ids = {}
            for call in message.get("tool_calls") or ():
                open_ids[call.get("id")] = (call.get("function") or {}).get("name", "")
        out.append(message)
    return out
