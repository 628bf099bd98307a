"""Phase 1 of a run: prepare the trace (new, continue, rewind, regenerate) and its history (R2-R6, R9, R10)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.db import transaction

import traces.runner.compaction as compaction
import traces.runner.project as project
import traces.runner.run_settings as run_settings
from traces import prompts
from traces.events.presence import streams_when_watched
from traces.goal_tree import GoalTree
from traces.guards.confirm import (
    POLICIES,
    confirm_policy,
)
from traces.llm import (
    LLMError,
    ModelNotConfigured,
    ModelSettings,
    agent_model,
    utility_model,
)
from traces.models import ACTIVE_STATUSES, Approval, Message, MessageKind, Trace, TraceStatus
from traces.runner.base import RunnerBase
from traces.runner.compaction import context_limit, context_threshold, info_for
from traces.runner.config import (
    InvalidRun,
    RunConfig,
    RunError,
)
from traces.runner.extensions import Preset, Tool, extensions
from traces.runner.history import heal_message, sanitize_history_with_infos
from traces.runner.microcompact import trigger_tokens
from traces.runner.prepare import (
    load_trace,
    new_trace,
    plan_existing,
    text_of,
)
from traces.runner.state import RunState
from traces.runner.store import RunStore, trace_claim
from traces.selectors import PathMessage, trace_main_path_for_run
from traces.storable import without_nul

logger = logging.getLogger(__name__)


class RunSetup(RunnerBase):
    """AgentRunner's preparation steps (a mixin; `self` is the AgentRunner)."""

    def _prepare(self, messages: list[dict[str, Any]], config: RunConfig) -> RunState:
        try:
            preset = extensions.require_preset(config.agent_type)
        except LookupError as exc:
            raise InvalidRun(str(exc)) from None
        if config.trace_id is None:
            project.placement_for(config, preset, None)  # M9: refused before anything is written
            return self._prepare_new(messages, config, preset, self._select_tools(config, preset))
        previous = load_trace(config.trace_id)
        # The trace's stored settings hold unless this request sets them (run_settings.py).
        check = config.tools is not None
        config = run_settings.with_stored(config, previous.run_settings)
        project.placement_for(config, preset, previous.run_settings)  # before the claim
        tools = self._select_tools(config, preset, check=check)
        return self._prepare_existing(messages, config, preset, tools, previous)

    def _select_tools(self, config: RunConfig, preset: Preset, *, check: bool = True) -> list[Tool]:
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

    def _refresh_tools(self, run: RunState) -> None:
        """Select the run's tools again when the tool set changed (an MCP server's list), for the next request."""
        version = self.tool_registry.version()
        if version == run.tools_version:
            return
        run.tools_version = version
        tools = self._select_tools(run.config, run.preset, check=False)
        schemas = [t.schema() for t in tools]
        if schemas == run.tool_schemas:
            return
        before, after = {t.name for t in run.tools}, {t.name for t in tools}
        run.offer(tools)
        run.store.emit(
            "tools_changed",
            {"added": sorted(after - before), "removed": sorted(before - after), "tools": sorted(after)},
        )

    def _model(self, name: str | None) -> ModelSettings:
        try:
            return agent_model(name)
        except ModelNotConfigured as exc:
            raise InvalidRun(str(exc)) from None

    def _new_run(
        self, trace: Trace, config: RunConfig, preset: Preset, tools: list[Tool], model: ModelSettings
    ) -> RunState:
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
        keep = config.microcompact_keep
        microcompact_keep = settings.AGENT_MICROCOMPACT_KEEP if keep is None else keep
        placement = project.trace_placement(
            trace.trace_id, project.placement_for(config, preset, trace.run_settings)
        )
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
            "microcompact_keep": microcompact_keep,
            "stream": config.stream,
            "sandbox_network": (
                config.sandbox_network
                if config.sandbox_network is not None
                else run_settings.default_network(preset)
            ),
            "project": placement.project,
        }
        strategy = config.strategy or run_settings.default_strategy(preset)
        effective["strategy"] = strategy  # R11
        effective["reflexion"] = (
            config.reflexion
            if config.reflexion is not None
            else run_settings.default_reflexion(preset, strategy)
        )
        changed = run_settings.changes(trace.run_settings, effective)
        trace.run_settings = effective
        if changed:
            store.emit("settings_changed", {"changed": changed})
        run = RunState(
            trace=trace,
            store=store,
            goal_tree=goal_tree,
            config=config,
            preset=preset,
            model=model,
            tools=tools,
            workspace=placement.workspace,
            placement=placement,
            params=params,
            stream=bool(settings.AGENT_STREAM) if config.stream is None else config.stream,
            stream_watched=config.stream is None and streams_when_watched(),
            max_iterations=max_iterations,
            context_every=context_every,
            threshold=context_threshold(model.model),
            microcompact_keep=microcompact_keep,
            microcompact_at=trigger_tokens(context_limit(model.model)),
            policy=policy,
            tools_version=self.tool_registry.version(),
            gated=policy != "auto"
            or (trace.last_sequence > 0 and Approval.objects.filter(trace=trace).exists()),
        )
        project.begin(run, placement)  # M9: AGENTS.md chain and user layer, read afresh
        return run

    def _prepare_new(
        self, messages: list[dict[str, Any]], config: RunConfig, preset: Preset, tools: list[Tool]
    ) -> RunState:
        model = self._model(config.model)
        base = config.system_prompt or prompts.SYSTEM_PROMPT
        system = base
        for with_skills in extensions.system_prompt:  # M6: skills
            system = with_skills(config, preset, system, {t.name for t in tools})
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
        with self._in_turns(run):
            run.store.emit(
                "run_started", {"mode": "new", "model": model.model, "agent_type": config.agent_type}
            )
            for extend in extensions.first_messages:  # M4: experiences
                messages = extend(
                    trace, messages, config, utility_call=self.utility_llm_call, emit=run.store.emit
                )
            self._append_inputs(run, messages)
            run.store.commit()
        return run

    @contextlib.contextmanager
    def _in_turns(self, run: RunState) -> Iterator[None]:
        """From its first event on the run works in turns (traces/runner/turns.py): with
        many runs starting at once, its `run_started` is committed in its turn, not
        behind all of them (issue 18). The turn is given back if the setup fails, and
        kept for the run's loop otherwise."""
        run.turn.take()
        try:
            yield
        except BaseException:
            run.turn.give()
            raise

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
        preset: Preset,
        tools: list[Tool],
        previous: Trace,
    ) -> RunState:
        trace_id = config.trace_id or ""
        previous_status = config.reserved_from or previous.status
        model = self._model(config.model or previous.model)
        trace = trace_claim(trace_id=trace_id, owner=self.worker_id, reserved_token=config.reserved_token)
        run = self._new_run(trace, config, preset, tools, model)
        try:
            path = trace_main_path_for_run(trace_id=trace.trace_id, head_sequence=trace.head_sequence)
            plan = plan_existing(trace, path, messages, config, previous_status)
        except RunError as exc:
            # Refused: give the trace back as it was (the claim cleared these).
            trace.status = previous_status
            trace.error_message = previous.error_message
            trace.completed_at = previous.completed_at
            if previous_status in ACTIVE_STATUSES:  # a resume with nothing to give back to
                trace.status, trace.error_message = TraceStatus.FAILED, str(exc)[:2000]
            run.store.commit(release=True)
            raise
        # The rewind (goal rows dropped), healing and new inputs land together or not at all.
        with self._in_turns(run), transaction.atomic():
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
                dropped = run.goal_tree.rebuild_at(cut.created_at, cut.sequence)
                run.store.emit("goal_tree_rebuilt", {"dropped_goal_ids": dropped})
                trace.head_sequence = cut.sequence
            run.store.emit(
                "run_started", {"mode": mode, "model": model.model, "after_sequence": config.after_sequence}
            )
            run.goal_tree.reopen()  # what the last run left open is this run's to take up
            self._load_path(run, plan.kept)
            run.pending_calls = plan.pending_calls
            if plan.pending_calls:
                run.pending_from = next(m.sequence for m in reversed(plan.kept) if m.role == "assistant")
            for call in plan.missing_calls:
                self._add_message(run, heal_message(call, run))
            self._append_inputs(run, messages)
            run.store.commit()
        return run

    def _append_inputs(self, run: RunState, messages: list[dict[str, Any]]) -> None:
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

    def _load_path(self, run: RunState, kept: list[PathMessage]) -> None:
        """The in-memory request history of a loaded main path (read once per run)."""
        last_assistant = max((i for i, m in enumerate(kept) if m.role == "assistant"), default=-1)
        pairs = []
        for index, message in enumerate(kept):
            data = message.to_llm_dict()
            if message.kind == MessageKind.ONCE and index < last_assistant:
                data["content"] = compaction.shown_once(message.description)  # C3: seen already
            pairs.append((data, info_for(message, data)))
        run.llm_messages, run.infos = sanitize_history_with_infos(pairs)
        run.token_total = sum(info.tokens for info in run.infos)

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
