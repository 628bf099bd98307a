"""The `ask_human` tool (S3): ask an expert and wait, without holding a worker."""

from __future__ import annotations

from tools.registry import tool
from traces.collaboration import humans, subtraces
from traces.models import TraceStatus
from traces.runner.tool_api import ToolContext, ToolError, ToolResult


@tool(inline=True)
def ask_human(question: str, ctx: ToolContext, to: str = "expert") -> ToolResult:
    """Ask a human a question and wait for the answer, which becomes this call's result.

    Use it when you need a decision, a missing fact or a confirmation only a
    person can give. Your run pauses until someone answers (this can take hours);
    ask one clear, self-contained question with the options you see.

    Args:
        question: The question, with enough context to answer it without reading your history.
        to: Who should answer (a name or role); default: any expert.
    """
    if not question.strip():
        raise ToolError("question must not be empty")
    parent = ctx.trace
    existing = humans.human_request_for_call(parent_id=parent.trace_id, tool_call_id=ctx.tool_call_id)
    if existing is None:
        child = humans.human_request_create(
            parent=parent,
            trace_id=subtraces.sub_trace_id(parent.trace_id, "human"),
            goal_id=ctx.goal_id,
            tool_call_id=ctx.tool_call_id,
            question=question,
            to=to or "expert",
        )
        subtraces.collaborator_upsert(
            parent,
            {
                "name": to or "expert",
                "type": "human",
                "trace_id": child.trace_id,
                "status": TraceStatus.WAITING,
                "summary": f"asked: {' '.join(question.split())[:150]}",
            },
        )
        store = ctx.store
        if store is not None:
            store.emit(
                "sub_trace_started", {"sub_trace_id": child.trace_id, "mode": "human", "question": question}
            )
        return _suspend(child.trace_id)
    if existing.status != TraceStatus.COMPLETED:
        return _suspend(existing.trace_id)
    who = (existing.context or {}).get("answered_by") or existing.context.get("to") or "a human"
    subtraces.collaborator_upsert(
        parent, {"trace_id": existing.trace_id, "status": TraceStatus.COMPLETED, "summary": f"{who} answered"}
    )
    return ToolResult(
        title=f"Answer from {who}",
        output=existing.result_summary or "",
        metadata={"sub_trace_ids": [existing.trace_id], "mode": "human"},
    )


def _suspend(trace_id: str) -> ToolResult:
    """Tell the runner to end the run `waiting`, the call left open (resumed on an answer)."""
    return ToolResult(
        title="Waiting for a human",
        output=f"question sent as {trace_id}",
        metadata={"suspend": True, "sub_trace_ids": [trace_id], "mode": "human"},
    )
