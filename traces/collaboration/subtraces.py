"""Sub-traces (S1, S2): children that the `agent` and `evaluate` tools run.

A child is a full trace (`parent_trace_id`, `parent_goal_id`), run by an
AgentRunner like any other, sharing the parent's workspace
(`tools/workspace.py:workspace_for` maps `{root}@...` to the root's). The tool
that starts children (running in the parent's thread, `inline`) also:

- turns the calling goal into an `agent_call` goal with the children's ids, the
  mode and their figures in its cumulative stats (`mark_agent_call`);
- keeps `parent.context["collaborators"]` current (`collaborator_upsert`);
- notes which children a tool call started in `parent.context["sub_trace_calls"]`,
  so an interrupted call heals with their ids (`traces/collaboration/healing.py:healed_result`, R6);
- emits `sub_trace_started` / `sub_trace_completed` on the parent, and seed 002's
  `subagent_*` progress events (`traces/collaboration/progress.py`).

Explore children run truly concurrently, one thread and one database connection
each. Children never get agent, evaluate or ask_human (no recursion, and no
human wait inside a sub-run).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connections
from django.utils import timezone

from memory.presets import get_preset
from traces.collaboration.progress import ProgressRelay
from traces.goal_tree import GoalTree
from traces.models import Goal, Trace, TraceStatus
from traces.runner import AgentRunner, RunConfig, RunError
from traces.runner.config import STEP_LIMIT_PREFIX
from traces.runner.store import trace_request_stop

logger = logging.getLogger(__name__)

NO_RECURSION = ("agent", "evaluate", "ask_human")
TERMINAL = (TraceStatus.COMPLETED, TraceStatus.FAILED, TraceStatus.STOPPED)


@dataclass
class ChildSpec:
    """One child run: a new sub-trace (`trace_id` unused yet) or a continued one."""

    trace_id: str
    task: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    agent_type: str = "default"
    skills: list[str] | None = None
    name: str = ""
    mode: str = "delegate"
    existing: bool = False
    context: dict[str, Any] | None = None  # the caller's `context` (seed 004 agent/evaluate)


@dataclass
class ChildOutcome:
    trace_id: str
    status: str
    summary: str | None = None
    error: str | None = None
    stats: dict[str, Any] = field(default_factory=dict)
    remote: str | None = None  # the remote instance's URL for agent:// children

    @property
    def paused(self) -> bool:
        """The child stopped at its step limit (seed 002 `subagent_paused`): continue it to go on."""
        return self.status == "stopped" and (self.error or "").startswith(STEP_LIMIT_PREFIX)

    def as_dict(self) -> dict[str, Any]:
        data = {
            "sub_trace_id": self.trace_id,
            "status": self.status,
            "summary": self.summary,
            "stats": self.stats,
        }
        if self.error:
            data["error"] = self.error
        if self.paused:
            data["paused"] = "step_limit"
        return data


# --- ids -------------------------------------------------------------------------


def sub_trace_id(parent_id: str, mode: str, index: int | None = None) -> str:
    """`{parent}@delegate-<ts>-001`, `{parent}@explore-NNN-<ts>-001` (seed "Sub-Trace 目录命名")."""
    stamp = timezone.now().strftime("%Y%m%d%H%M%S")
    stem = f"{parent_id}@{mode}-{index:03d}-{stamp}" if index is not None else f"{parent_id}@{mode}-{stamp}"
    for counter in range(1, 1000):
        candidate = f"{stem}-{counter:03d}"
        if not Trace.objects.filter(pk=candidate).exists():
            return candidate
    raise RuntimeError(f"no free sub-trace id under {stem}")


# --- the parent's side: goal, collaborators, call notes ------------------------


def collaborator_upsert(trace: Trace, entry: dict[str, Any]) -> None:
    """Add or update one collaborator (matched by trace_id) in `trace.context`."""
    collaborators = list((trace.context or {}).get("collaborators") or [])
    for index, existing in enumerate(collaborators):
        if existing.get("trace_id") == entry.get("trace_id"):
            collaborators[index] = {**existing, **entry}
            break
    else:
        collaborators.append(entry)
    trace.context = {**(trace.context or {}), "collaborators": collaborators}


def note_call(trace: Trace, tool_call_id: str | None, sub_trace_ids: list[str], mode: str) -> None:
    """Remember which children a tool call started, for healing (R6)."""
    if not tool_call_id:
        return
    calls = dict((trace.context or {}).get("sub_trace_calls") or {})
    calls[tool_call_id] = {"mode": mode, "sub_trace_ids": sub_trace_ids}
    trace.context = {**(trace.context or {}), "sub_trace_calls": calls}


def calling_goal(tree: GoalTree | None, goal_id: str | None, description: str) -> Goal | None:
    """The goal the call belongs to: the current one, else a new focused one."""
    if tree is None:
        return None
    goal = tree.goals.get(goal_id or "") or tree.current
    if goal is None:
        goal = tree.ensure_root(description)
    return goal


def mark_agent_call(
    tree: GoalTree | None, goal: Goal | None, mode: str, outcomes: list[ChildOutcome], tasks: list[str]
) -> None:
    """The calling goal becomes `agent_call`: ids, mode, per-child metadata, cumulative stats."""
    if tree is None or goal is None:
        return
    goal.type = "agent_call"
    goal.agent_call_mode = mode
    ids = list(goal.sub_trace_ids or [])
    metadata = dict(goal.sub_trace_metadata or {})
    for outcome, task in zip(outcomes, tasks, strict=True):
        if outcome.trace_id not in ids:
            ids.append(outcome.trace_id)
        metadata[outcome.trace_id] = {
            "task": task[:500],
            "status": outcome.status,
            "summary": (outcome.summary or outcome.error or "")[:500],
            "mode": mode,
            **({"remote": outcome.remote} if outcome.remote else {}),
        }
        if outcome.stats:
            tree.add_cumulative(goal.goal_id, outcome.stats)
    goal.sub_trace_ids = ids
    goal.sub_trace_metadata = metadata
    tree.mark_dirty(goal)
    tree.emit(
        "goal_updated",
        {"goal_id": goal.goal_id, "type": "agent_call", "agent_call_mode": mode, "sub_trace_ids": ids},
    )


def child_stats(before: dict[str, Any] | None, after: Trace | None) -> dict[str, Any]:
    """What a child's run added: the figures cumulative goal stats fold in."""
    if after is None:
        return {}
    before = before or {}
    return {
        "message_count": after.total_messages - before.get("total_messages", 0),
        "prompt_tokens": after.total_prompt_tokens - before.get("total_prompt_tokens", 0),
        "completion_tokens": after.total_completion_tokens - before.get("total_completion_tokens", 0),
        "total_tokens": after.total_tokens - before.get("total_tokens", 0),
        "total_cost": round((after.total_cost or 0.0) - before.get("total_cost", 0.0), 10),
        "unpriced_calls": after.unpriced_calls - before.get("unpriced_calls", 0),
        "duration_ms": after.total_duration_ms - before.get("total_duration_ms", 0),
    }


STAT_FIELDS = (
    "total_messages",
    "total_prompt_tokens",
    "total_completion_tokens",
    "total_tokens",
    "total_cost",
    "unpriced_calls",
    "total_duration_ms",
)


def figures(trace: Trace | None) -> dict[str, Any]:
    return {f: getattr(trace, f) for f in STAT_FIELDS} if trace is not None else {}


# --- running children ----------------------------------------------------------------


READ_ONLY_MODES = ("explore", "evaluate")


def child_tool_names(runner: Any, agent_type: str, mode: str = "delegate") -> list[str]:
    """The preset's tools minus the ones a child never gets (no recursion); explore and
    evaluate children get only read-only ones, whatever preset `agent_type` names."""
    preset = get_preset(agent_type)
    offered = runner.tool_registry.select(allowed=preset.allowed_tools, denied=preset.denied_tools)
    read_only = mode in READ_ONLY_MODES
    return [
        t.name
        for t in offered
        if t.name not in NO_RECURSION and (not read_only or (t.read_only and t.risk == "safe"))
    ]


def child_confirm_policy(parent: Trace) -> str | None:
    """G5: a child is gated like its parent (the parent's effective policy), unless
    the deployment lets sub-agents auto-approve."""
    if settings.AGENT_SUBAGENT_AUTO_APPROVE:
        return "auto"
    return (parent.run_settings or {}).get("confirm_policy")


def noted_children(trace: Trace, tool_call_id: str | None) -> list[str]:
    """The children an earlier execution of this call started (a call resumed after a
    child waited for an expert runs them on instead of starting new ones)."""
    noted = ((trace.context or {}).get("sub_trace_calls") or {}).get(tool_call_id or "") or {}
    return list(noted.get("sub_trace_ids") or [])


CONTEXT_LIMIT = 8_000  # characters of a call's `context` as JSON


def check_context(context: Any) -> dict[str, Any] | None:
    """The `context` argument of agent/evaluate: a JSON object of modest size, or None."""
    if context is None or context == {}:
        return None
    if not isinstance(context, dict):
        raise ValueError("context must be an object of names and values")
    if len(json.dumps(context, ensure_ascii=False, default=str)) > CONTEXT_LIMIT:
        raise ValueError(f"context is too large (at most {CONTEXT_LIMIT} characters as JSON)")
    return context


def with_context(task: str, context: dict[str, Any] | None) -> str:
    """The task as the child reads it: the caller's context follows it as a JSON block."""
    if not context:
        return task
    block = json.dumps(context, ensure_ascii=False, indent=2, default=str)
    return f"{task}\n\n## Context from the caller\n\n```json\n{block}\n```"


def outcome_of(child: Trace) -> ChildOutcome:
    return ChildOutcome(child.trace_id, child.status, summary=child.result_summary, error=child.error_message)


def run_child(
    runner: Any,
    parent: Trace,
    goal_id: str | None,
    spec: ChildSpec,
    tool_call_id: str | None,
    relay: ProgressRelay | None = None,
) -> ChildOutcome:
    """Run one child to its end with `runner` (in the calling thread).

    An existing child with nothing new to say (a resumed call) runs on only while
    it waits for a decision; one that ended meanwhile reports how it ended.
    """

    if spec.existing and not spec.task and not spec.messages:
        child = Trace.objects.get(pk=spec.trace_id)
        if child.status != TraceStatus.WAITING:
            return outcome_of(child)
    before = figures(Trace.objects.filter(pk=spec.trace_id).first()) if spec.existing else {}
    task = with_context(spec.task, spec.context) if spec.task else ""
    task_message = [{"role": "user", "content": task}] if task else []
    on_progress = relay.reporter(spec.trace_id, spec.mode) if relay is not None else None
    try:
        if spec.existing:
            config = RunConfig(
                trace_id=spec.trace_id,
                agent_type=spec.agent_type,
                tools=child_tool_names(runner, spec.agent_type, spec.mode),
                on_progress=on_progress,
            )
            result = runner.run_result([*spec.messages, *task_message], config)
        else:
            config = RunConfig(
                model=parent.model,
                agent_type=spec.agent_type,
                skills=spec.skills,
                tools=child_tool_names(runner, spec.agent_type, spec.mode),
                name=spec.name[:200],
                uid=parent.uid,
                owner_id=parent.owner_id,
                parent_trace_id=parent.trace_id,
                parent_goal_id=goal_id,
                new_trace_id=spec.trace_id,
                confirm_policy=child_confirm_policy(parent),
                context={
                    "agent_call_mode": spec.mode,
                    "parent_tool_call_id": tool_call_id,
                    **({"call_context": spec.context} if spec.context else {}),
                },
                on_progress=on_progress,
            )
            result = runner.run_result([*spec.messages, *task_message], config)
    except RunError as exc:
        return ChildOutcome(spec.trace_id, TraceStatus.FAILED, error=str(exc))
    except Exception as exc:  # a child's crash is the parent tool's error, not the parent's end
        return ChildOutcome(spec.trace_id, TraceStatus.FAILED, error=f"{type(exc).__name__}: {exc}")
    if (spec.messages or spec.context) and not spec.existing:
        # the trace's task is its first user message (preloaded context or the caller's
        # `context` block changed what it reads)
        Trace.objects.filter(pk=result.trace_id).update(task=spec.task)
    after = Trace.objects.filter(pk=result.trace_id).first()
    return ChildOutcome(
        result.trace_id,
        result.status,
        summary=result.result,
        error=result.error,
        stats=child_stats(before, after),
    )


def run_children_concurrently(
    runner: Any,
    parent: Trace,
    goal_id: str | None,
    specs: list[ChildSpec],
    tool_call_id: str | None,
    relay: ProgressRelay | None = None,
) -> list[ChildOutcome]:
    """Explore: every child in its own thread, with its own runner and database connection;
    meanwhile this (the parent's) thread passes their progress on (`relay.drain`)."""

    def one(spec: ChildSpec) -> ChildOutcome:
        child_runner = AgentRunner(
            llm_call=runner.llm_call,
            utility_llm_call=runner.utility_llm_call,
            tool_registry=runner.tool_registry,
            context_hooks=runner.context_hooks,
            hooks=runner.hooks,
        )
        try:
            return run_child(child_runner, parent, goal_id, spec, tool_call_id, relay)
        finally:
            child_runner.close()
            connections.close_all()  # this thread's connections only

    with concurrent.futures.ThreadPoolExecutor(max_workers=len(specs), thread_name_prefix="explore") as pool:
        futures = [pool.submit(one, spec) for spec in specs]
        pending = set(futures)
        while pending:
            _, pending = concurrent.futures.wait(pending, timeout=settings.AGENT_STOP_POLL_SECONDS)
            if relay is not None:
                relay.drain()
        return [future.result() for future in futures]


@contextlib.contextmanager
def stop_cascade(parent_id: str, child_ids: list[str]) -> Iterator[None]:
    """While children run, a stop requested on the parent is passed on to them (R5).

    The parent's own run is blocked in the tool meanwhile, so a helper thread
    (its own connection) polls the parent's flag and flags the children, which
    stop at their next checkpoint; the parent stops when the tool returns.
    """

    done = threading.Event()

    def watch() -> None:
        try:
            while not done.wait(settings.AGENT_STOP_POLL_SECONDS):
                try:
                    if Trace.objects.filter(pk=parent_id, stop_requested=True).exists():
                        for child_id in child_ids:
                            trace_request_stop(trace_id=child_id)
                        return
                except DatabaseError as exc:  # a busy database: look again next time
                    logger.debug("stop cascade of %s: %s", parent_id, exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=watch, name="stop-cascade", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=5)
