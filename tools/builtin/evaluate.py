"""The `evaluate` tool (S2): a read-only sub-agent judges whether a goal was achieved."""

from __future__ import annotations

import json
import re
from typing import Any

from tools.builtin.agent import waiting_result
from tools.registry import tool
from traces.collaboration import progress, subtraces
from traces.collaboration.subtraces import ChildSpec
from traces.goal_tree import GoalError
from traces.models import Trace
from traces.runner.tool_api import ToolContext, ToolError, ToolResult

VERDICTS = ("pass", "partial", "fail")

EVALUATE_PROMPT = """You are a strict reviewer. Judge whether this goal was achieved.

Goal: {goal}
{reason}
Inspect the workspace with your read-only tools where that helps. Do not change anything.
{material}
Answer with one JSON object and nothing else:
{{"verdict": "pass" | "partial" | "fail", "reasoning": "<why, briefly>", "suggestions": ["<concrete improvement>", ...]}}"""


@tool(inline=True)
def evaluate(
    ctx: ToolContext,
    target_goal_id: str = "",
    result: str = "",
    messages: list[dict[str, Any]] | None = None,
    continue_from: str = "",
    context: dict[str, Any] | None = None,
) -> ToolResult:
    """Have an independent read-only reviewer judge whether a goal of your plan was achieved.

    The goal's description is taken from your plan; give the reviewer what you
    produced (result, or messages). Returns a verdict (pass, partial or fail),
    the reasoning and suggestions for improvement.

    Args:
        target_goal_id: Id of the goal to judge, e.g. "2"; empty means the current goal.
        result: What was produced for the goal (text, file names, findings).
        messages: Optional extra context messages (OpenAI format) for the reviewer.
        continue_from: Id of an earlier evaluate sub-trace to ask again (it keeps its history).
        context: Optional names and values the reviewer should know (criteria, paths), kept on the sub-trace.
    """
    try:
        call_context = subtraces.check_context(context)
    except ValueError as exc:
        raise ToolError(str(exc)) from None
    tree = ctx.goal_tree
    if tree is None:
        raise ToolError("this run has no plan to evaluate against")
    try:
        target = tree.resolve(target_goal_id)
    except GoalError as exc:
        raise ToolError(str(exc)) from None
    parent = ctx.trace
    material = f"\nWhat was produced:\n{result.strip()}\n" if result.strip() else ""
    task = EVALUATE_PROMPT.format(
        goal=target.description,
        reason=f"Why it matters: {target.reason}\n" if target.reason else "",
        material=material,
    )
    extra = [
        {"role": m["role"], "content": m.get("content") or ""}
        for m in (messages or [])
        if isinstance(m, dict) and m.get("role") in ("system", "user", "assistant")
    ]
    noted = subtraces.noted_children(parent, ctx.tool_call_id)
    if noted:  # this call ran before and its reviewer waited for an expert: run it on
        spec = ChildSpec(noted[0], "", [], "explore", mode="evaluate", existing=True)
    elif continue_from:
        child = Trace.objects.filter(pk=continue_from, parent_trace_id=parent.trace_id).first()
        if child is None:
            raise ToolError(f"no sub-trace {continue_from!r} of this trace to continue")
        spec = ChildSpec(
            child.trace_id,
            task,
            extra,
            child.agent_type or "explore",
            mode="evaluate",
            existing=True,
            context=call_context,
        )
    else:
        spec = ChildSpec(
            subtraces.sub_trace_id(parent.trace_id, "evaluate"),
            task,
            extra,
            "explore",
            name=f"evaluate: {target.description[:60]}",
            mode="evaluate",
            context=call_context,
        )
    goal = subtraces.calling_goal(tree, ctx.goal_id, f"Evaluate: {target.description}")
    goal_id = goal.goal_id if goal is not None else None
    store = ctx.store
    subtraces.note_call(parent, ctx.tool_call_id, [spec.trace_id], "evaluate")
    subtraces.collaborator_upsert(
        parent,
        {
            "name": "evaluator",
            "type": "agent",
            "trace_id": spec.trace_id,
            "status": "running",
            "summary": target.description[:120],
            "mode": "evaluate",
        },
    )
    if store is not None:
        store.emit(
            "sub_trace_started", {"sub_trace_id": spec.trace_id, "mode": "evaluate", "goal_id": goal_id}
        )
        progress.subagent_started(store, spec.trace_id, "evaluate", target.description, goal_id)
        store.commit()
    relay = progress.ProgressRelay(store)
    with subtraces.stop_cascade(parent.trace_id, [spec.trace_id]):  # R5: a stop reaches the reviewer too
        outcome = subtraces.run_child(ctx.runner, parent, goal_id, spec, ctx.tool_call_id, relay)
    waiting = waiting_result([outcome], "evaluate")
    if waiting is not None:
        return waiting
    judgement = parse_judgement(outcome.summary or "")
    subtraces.mark_agent_call(tree, goal, "evaluate", [outcome], [f"evaluate goal {target.goal_id}"])
    subtraces.collaborator_upsert(
        parent,
        {
            "trace_id": outcome.trace_id,
            "status": outcome.status,
            "summary": f"verdict: {judgement['verdict']}",
        },
    )
    if store is not None:
        store.emit(
            "sub_trace_completed", {"mode": "evaluate", **outcome.as_dict(), "verdict": judgement["verdict"]}
        )
        progress.subagent_ended(store, "evaluate", outcome, verdict=judgement["verdict"])
    data = {
        "target_goal": tree.display_ids().get(target.goal_id),
        **judgement,
        "sub_trace_id": outcome.trace_id,
        "status": outcome.status,
        "stats": outcome.stats,
    }
    if outcome.error:
        data["error"] = outcome.error
    return ToolResult(
        title=f"Evaluation: {judgement['verdict']}",
        output=json.dumps(data, ensure_ascii=False, indent=2),
        metadata={"sub_trace_ids": [outcome.trace_id], "mode": "evaluate"},
        is_error=outcome.status != "completed",
    )


def parse_judgement(text: str) -> dict[str, Any]:
    """The reviewer's verdict, read leniently: JSON (also fenced or embedded), else keywords."""
    data = _json_object(text)
    if data is not None:
        verdict = str(data.get("verdict") or data.get("result") or "").strip().lower()
        suggestions = data.get("suggestions") or []
        if isinstance(suggestions, str):
            suggestions = [suggestions]
        return {
            "verdict": verdict if verdict in VERDICTS else _keyword_verdict(verdict or text),
            "reasoning": str(data.get("reasoning") or data.get("reason") or ""),
            "suggestions": [str(s) for s in suggestions if s],
        }
    suggestions = [
        line.strip()[1:].strip() for line in text.splitlines() if line.strip().startswith(("-", "*"))
    ]
    return {"verdict": _keyword_verdict(text), "reasoning": text.strip()[:2000], "suggestions": suggestions}


def _json_object(text: str) -> dict[str, Any] | None:
    candidates = [text]
    fenced = re.search(r"```(?:json)?\s*(\{.*?\})\s*```", text, re.S)
    if fenced:
        candidates.append(fenced.group(1))
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def _keyword_verdict(text: str) -> str:
    lowered = text.lower()
    found = [(lowered.find(v), v) for v in VERDICTS if v in lowered]
    return min(found)[1] if found else "unknown"
