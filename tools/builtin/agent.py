"""The `agent` tool (S1, S5): delegate to a sub-agent, explore in parallel, or call a remote agent."""

from __future__ import annotations

import json
from typing import Any

from memory.presets import UnknownPreset, get_preset
from tools.registry import tool
from traces.collaboration import humans, progress, remote, subtraces
from traces.collaboration.subtraces import ChildOutcome, ChildSpec
from traces.models import Trace, TraceStatus
from traces.runner.tool_api import ToolContext, ToolError, ToolResult

MAX_EXPLORE = 8


@tool(inline=True)
def agent(
    task: str | list[str],
    ctx: ToolContext,
    messages: list[Any] | None = None,
    continue_from: str = "",
    agent_type: str = "",
    skills: list[str] | None = None,
    agent_url: str = "",
    context: dict[str, Any] | None = None,
) -> ToolResult:
    """Hand work to sub-agents, each a full trace you can inspect and resume.

    - task as a string (delegate): one sub-agent with the full toolset does it and
      reports back; continue_from resumes an earlier sub-agent with its history.
    - task as a list of strings (explore): one read-only sub-agent per task, all
      running at the same time; you get their findings merged.
    - agent_url: run the task on a remote agent (any A2A agent, listed under "Remote
      agents" with its skills; agent_type picks a skill). continue_from then takes the
      remote id "agent://host/task_id" it returned; a remote that asks for input
      (status input-required) gets your answer the same way.
    Sub-agents share your workspace but not your conversation: put everything they
    need into the task (or messages). They cannot start agents themselves.

    Args:
        task: What to do (delegate), or a list of independent questions to explore in parallel.
        messages: Optional context messages (OpenAI format) given to the sub-agent(s) before the task;
            with a list of tasks also one list of messages per task.
        continue_from: Id of an earlier sub-trace (or agent://host/trace_id) to resume instead of starting anew.
        agent_type: Preset of the sub-agent (e.g. explore, analyst); default: default for delegate, explore for lists.
        skills: Skills to put into the sub-agent's system prompt (overrides the preset's).
        agent_url: URL of a remote (A2A) agent to run the task on.
        context: Optional names and values the sub-agent(s) should know (ids, paths, constraints), kept on the sub-trace.
    """
    try:
        extra = subtraces.check_context(context)
    except ValueError as exc:
        raise ToolError(str(exc)) from None
    if isinstance(task, list) and messages and all(isinstance(m, list) for m in messages):
        if len(messages) != len(task):
            raise ToolError(f"one list of messages per task: got {len(messages)} lists for {len(task)} tasks")
        if continue_from or agent_url:
            raise ToolError("continue_from and agent_url work with one task (a string), not a list")
        return _explore(
            ctx, task, [_check_messages(m) for m in messages], agent_type or "explore", skills, extra
        )
    preloaded = _check_messages(messages)
    if agent_url or remote.is_remote_id(continue_from):
        sent = subtraces.with_context(task, extra) if isinstance(task, str) else task
        return _remote(ctx, sent, preloaded, continue_from, agent_type, agent_url)
    if isinstance(task, list):
        if continue_from:
            raise ToolError("continue_from works with one task (a string), not a list")
        return _explore(ctx, task, [preloaded] * len(task), agent_type or "explore", skills, extra)
    if not isinstance(task, str) or not task.strip():
        raise ToolError("task must be a non-empty string or a list of strings")
    return _delegate(ctx, task, preloaded, continue_from, agent_type or "", skills, extra)


def waiting_result(outcomes: list[ChildOutcome], mode: str) -> ToolResult | None:
    """When a child waits for an expert (its own approval, G5), the calling run waits too:
    the call stays open and runs again once the decision is made."""
    waiting = [o.trace_id for o in outcomes if o.status == TraceStatus.WAITING]
    if not waiting:
        return None
    return ToolResult(
        title=f"Waiting: sub-agent {', '.join(waiting)} waits for an expert's approval",
        output="the sub-agent asked for an approval; this call resumes once an expert decides",
        metadata={"suspend": True, "sub_trace_ids": waiting, "mode": mode},
    )


def _check_messages(messages: Any) -> list[dict[str, Any]]:
    if messages is None:
        return []
    if not isinstance(messages, list) or not all(
        isinstance(m, dict) and m.get("role") in ("system", "user", "assistant") for m in messages
    ):
        raise ToolError("messages must be a list of {role: system|user|assistant, content} objects")
    return [{"role": m["role"], "content": m.get("content") or ""} for m in messages]


def _preset(name: str) -> str:
    try:
        get_preset(name)
    except UnknownPreset as exc:
        raise ToolError(str(exc)) from None
    return name


def _start(ctx: ToolContext, mode: str, ids: list[str], tasks: list[str], goal_id: str | None) -> None:
    """Before children run: collaborators [running], the call noted, events, all committed."""
    trace = ctx.trace
    subtraces.note_call(trace, ctx.tool_call_id, ids, mode)
    store = ctx.store
    for sub_id, task in zip(ids, tasks, strict=True):
        subtraces.collaborator_upsert(
            trace, _collaborator(sub_id, task, mode, "running", "working on: " + task[:120])
        )
        if store is not None:
            store.emit(
                "sub_trace_started",
                {"sub_trace_id": sub_id, "mode": mode, "task": task[:500], "goal_id": goal_id},
            )
            progress.subagent_started(store, sub_id, mode, task, goal_id)
    if store is not None:
        store.commit()  # the portal sees the children running while they run


def _finish(ctx: ToolContext, mode: str, goal: Any, outcomes: list[ChildOutcome], tasks: list[str]) -> None:
    trace = ctx.trace
    subtraces.mark_agent_call(ctx.goal_tree, goal, mode, outcomes, tasks)
    store = ctx.store
    for outcome, task in zip(outcomes, tasks, strict=True):
        summary = (outcome.summary or outcome.error or "")[:300]
        status = "paused" if outcome.paused else outcome.status
        subtraces.collaborator_upsert(trace, _collaborator(outcome.trace_id, task, mode, status, summary))
        if store is None:
            continue
        progress.subagent_ended(store, mode, outcome)
        if outcome.status == TraceStatus.WAITING:
            store.emit("subagent_waiting", {"mode": mode, **outcome.as_dict(), "reason": "approval"})
        elif outcome.paused:  # seed 002: the parent hears that its child paused at the step limit
            store.emit("subagent_paused", {"mode": mode, **outcome.as_dict(), "reason": "step_limit"})
        else:
            store.emit("sub_trace_completed", {"mode": mode, **outcome.as_dict(), "summary": summary})


def _collaborator(sub_id: str, task: str, mode: str, status: str, summary: str) -> dict[str, Any]:
    name = " ".join(task.split())[:40] or mode
    return {
        "name": name,
        "type": "agent",
        "trace_id": sub_id,
        "status": status,
        "summary": summary,
        "mode": mode,
    }


def _delegate(
    ctx: ToolContext,
    task: str,
    messages: list[dict[str, Any]],
    continue_from: str,
    agent_type: str,
    skills: list[str] | None,
    extra: dict[str, Any] | None = None,
) -> ToolResult:
    parent = ctx.trace
    noted = subtraces.noted_children(parent, ctx.tool_call_id)
    if noted:  # this call ran before and its sub-agent waited for an expert: run it on
        child = Trace.objects.get(pk=noted[0])
        spec = ChildSpec(
            child.trace_id, "", [], child.agent_type or "default", mode="delegate", existing=True
        )
    elif continue_from:
        previous = Trace.objects.filter(pk=continue_from).first()
        if previous is None or previous.parent_trace_id != parent.trace_id:
            raise ToolError(f"no sub-trace {continue_from!r} of this trace to continue")
        spec = ChildSpec(
            previous.trace_id,
            task,
            messages,
            previous.agent_type or "default",
            mode="delegate",
            existing=True,
            context=extra,
        )
    else:
        kind = _preset(agent_type or "default")
        spec = ChildSpec(
            subtraces.sub_trace_id(parent.trace_id, "delegate"),
            task,
            messages,
            kind,
            skills,
            name=f"delegate: {' '.join(task.split())[:60]}",
            context=extra,
        )
    goal = subtraces.calling_goal(ctx.goal_tree, ctx.goal_id, task)
    goal_id = goal.goal_id if goal is not None else None
    _start(ctx, "delegate", [spec.trace_id], [task], goal_id)
    with subtraces.stop_cascade(parent.trace_id, [spec.trace_id]):
        relay = progress.ProgressRelay(ctx.store)
        outcome = subtraces.run_child(ctx.runner, parent, goal_id, spec, ctx.tool_call_id, relay)
    _finish(ctx, "delegate", goal, [outcome], [task])
    return waiting_result([outcome], "delegate") or _result("delegate", [outcome], [task])


def _explore(
    ctx: ToolContext,
    tasks: list[str],
    messages: list[list[dict[str, Any]]],
    agent_type: str,
    skills: list[str] | None,
    extra: dict[str, Any] | None = None,
) -> ToolResult:
    if not all(isinstance(t, str) and t.strip() for t in tasks):
        raise ToolError("every task of the list must be a non-empty string")
    if not tasks:
        raise ToolError("explore needs at least one non-empty task")
    if len(tasks) > MAX_EXPLORE:
        raise ToolError(f"at most {MAX_EXPLORE} parallel explorations at once (got {len(tasks)})")
    kind = _preset(agent_type)
    parent = ctx.trace
    noted = subtraces.noted_children(parent, ctx.tool_call_id)
    specs = [
        ChildSpec(
            subtraces.sub_trace_id(parent.trace_id, "explore", index),
            task,
            task_messages,
            kind,
            skills,
            name=f"explore {index}: {' '.join(task.split())[:60]}",
            mode="explore",
            context=extra,
        )
        for index, (task, task_messages) in enumerate(zip(tasks, messages, strict=True), start=1)
    ]
    if len(noted) == len(specs):  # a resumed call: its children run on (or report how they ended)
        specs = [ChildSpec(sub_id, "", [], kind, mode="explore", existing=True) for sub_id in noted]
    goal = subtraces.calling_goal(ctx.goal_tree, ctx.goal_id, "Explore: " + "; ".join(tasks))
    goal_id = goal.goal_id if goal is not None else None
    _start(ctx, "explore", [s.trace_id for s in specs], tasks, goal_id)
    with subtraces.stop_cascade(parent.trace_id, [s.trace_id for s in specs]):
        relay = progress.ProgressRelay(ctx.store)
        outcomes = subtraces.run_children_concurrently(
            ctx.runner, parent, goal_id, specs, ctx.tool_call_id, relay
        )
    _finish(ctx, "explore", goal, outcomes, tasks)
    return waiting_result(outcomes, "explore") or _result("explore", outcomes, tasks)


def _remote(
    ctx: ToolContext,
    task: Any,
    messages: list[dict[str, Any]],
    continue_from: str,
    agent_type: str,
    agent_url: str,
) -> ToolResult:
    if not isinstance(task, str) or not task.strip():
        raise ToolError("a remote agent takes one task (a string)")
    continue_id = None
    try:
        if continue_from:
            if not remote.is_remote_id(continue_from):
                raise ToolError("with agent_url, continue_from must be the remote id agent://host/trace_id")
            host, continue_id = remote.split_remote_id(continue_from)
            target = remote.remote_agent(agent_url or host)
            if target.host != host:
                raise ToolError(f"{continue_from!r} lives on {host}, not on {agent_url}")
        else:
            target = remote.remote_agent(agent_url)
    except remote.RemoteAgentError as exc:
        raise ToolError(str(exc)) from None
    sent = task
    question = _remote_question(ctx)
    if question is not None:  # this call waited on a human for the remote's question
        if question.status != TraceStatus.COMPLETED:
            return _wait_for_human(question.trace_id)
        sent, messages = question.result_summary or "", []
        continue_id = remote.split_remote_id(question.context["remote_task"])[1]
    goal = subtraces.calling_goal(ctx.goal_tree, ctx.goal_id, task)
    goal_id = goal.goal_id if goal is not None else None
    placeholder = continue_from or f"{remote.SCHEME}{target.host}/(starting)"
    store = ctx.store
    if store is not None:
        store.emit(
            "sub_trace_started",
            {"sub_trace_id": placeholder, "mode": "delegate", "remote": target.base_url, "goal_id": goal_id},
        )
    try:
        outcome = remote.run_remote(
            target, task=sent, messages=messages, agent_type=agent_type or None, continue_trace_id=continue_id
        )
    except remote.RemoteAgentError as exc:
        if store is not None:
            store.emit(
                "sub_trace_completed", {"sub_trace_id": placeholder, "status": "failed", "error": str(exc)}
            )
        raise ToolError(str(exc)) from None
    if question is not None:  # the answer reached the remote task: not to be sent again
        question.context = {**question.context, "forwarded": True}
        question.save(update_fields=["context"])
    subtraces.note_call(ctx.trace, ctx.tool_call_id, [outcome.trace_id], "delegate")
    if outcome.status == "input-required":
        return _ask_human_for_remote(ctx, goal_id, outcome, target)
    _finish(ctx, "delegate", goal, [outcome], [task])
    return _result("delegate", [outcome], [task], extra={"remote_agent": remote.describe(target)})


def _remote_question(ctx: ToolContext) -> Trace | None:
    """The question to a human this call asked for a remote agent, not yet forwarded."""
    latest = (
        Trace.objects.filter(
            parent_trace_id=ctx.trace.trace_id,
            agent_type=humans.HUMAN,
            context__tool_call_id=ctx.tool_call_id,
            context__remote_task__isnull=False,
        )
        .order_by("-created_at")
        .first()
    )
    return None if latest is None or (latest.context or {}).get("forwarded") else latest


def _ask_human_for_remote(
    ctx: ToolContext, goal_id: str | None, outcome: ChildOutcome, target: remote.RemoteAgent
) -> ToolResult:
    """A remote task that needs input waits like ask_human: a human trace holds the
    remote's question, this run ends `waiting` (no worker held), and the answer is
    sent to the remote task when the call runs again."""
    parent = ctx.trace
    asked = outcome.error or outcome.summary or "the remote agent needs input"
    child = humans.human_request_create(
        parent=parent,
        trace_id=subtraces.sub_trace_id(parent.trace_id, "human"),
        goal_id=goal_id,
        tool_call_id=ctx.tool_call_id,
        question=f"{target.name or target.base_url} ({outcome.trace_id}) asks: {asked}",
        to="expert",
    )
    child.context = {**child.context, "remote_task": outcome.trace_id}
    child.save(update_fields=["context"])
    subtraces.collaborator_upsert(
        parent,
        {
            "name": target.name or target.base_url,
            "type": "human",
            "trace_id": child.trace_id,
            "status": TraceStatus.WAITING,
            "summary": f"remote asks: {' '.join(asked.split())[:150]}",
        },
    )
    return _wait_for_human(child.trace_id)


def _wait_for_human(trace_id: str) -> ToolResult:
    return ToolResult(
        title="Waiting for a human to answer a remote agent",
        output=f"the remote agent's question was sent as {trace_id}",
        metadata={"suspend": True, "sub_trace_ids": [trace_id], "mode": "human"},
    )


def _result(
    mode: str, outcomes: list[ChildOutcome], tasks: list[str], extra: dict[str, Any] | None = None
) -> ToolResult:
    failed = [o for o in outcomes if o.status != "completed"]
    if mode == "delegate":
        outcome = outcomes[0]
        data = {
            "mode": mode,
            **outcome.as_dict(),
            "continue_from": f"agent(task='<next step>', continue_from={outcome.trace_id!r})",
            **(extra or {}),
        }
        if outcome.paused:
            data["note"] = "the sub-agent paused at its step limit; continue it with continue_from to go on"
        title = f"Sub-agent {'paused (step limit)' if outcome.paused else outcome.status}: {outcome.trace_id}"
        return ToolResult(
            title=title,
            output=json.dumps(data, ensure_ascii=False, indent=2),
            metadata={"sub_trace_ids": [outcome.trace_id], "mode": mode},
            is_error=bool(failed) and outcome.status == "failed" and not outcome.summary,
        )
    lines = [f"Explored {len(outcomes)} branches in parallel ({len(outcomes) - len(failed)} completed)."]
    for index, (outcome, task) in enumerate(zip(outcomes, tasks, strict=True), start=1):
        lines.append(
            f"\n### {index}. {task.strip()[:200]}\n"
            f"[{'paused at its step limit' if outcome.paused else outcome.status}] sub_trace_id: {outcome.trace_id}"
        )
        lines.append(outcome.summary or f"(no result{': ' + outcome.error if outcome.error else ''})")
    return ToolResult(
        title=f"Explore: {len(outcomes)} branches",
        output="\n".join(lines),
        metadata={"sub_trace_ids": [o.trace_id for o in outcomes], "mode": mode},
    )
