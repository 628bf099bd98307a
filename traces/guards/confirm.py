"""The confirm gate (G5): risky tool calls wait for an expert.

Policy, most specific first: the run's `RunConfig.confirm_policy`, the preset's
`confirm_policy`, then `AGENT_CONFIRM_POLICY`. Sub-agents are gated like their
parent (their run gets the parent's policy, traces/collaboration/subtraces.py:child_confirm_policy)
unless the deployment sets `AGENT_SUBAGENT_AUTO_APPROVE`. Policies:

- `auto`: every call runs;
- `ask-risky`: calls of tools declared `risk="risky"` (write, edit, ...) wait; a tool
  with a per-call `confirm` hook (bash and its risk rules) waits only when the hook
  asks, with its question;
- `ask-all`: every call but the agent's own planning (`goal`) and its questions to a
  human (`ask_human`, already a human's decision) waits.

A call that must wait gets an `Approval` row bound to its tool_call_id and exact
arguments, written with its `confirm_required` event through the run's fenced
commit (a run that lost its lease asks nothing); the run then ends in status
`waiting` (no worker is held). A decision
(services.approval_decide) re-queues the trace; the run finds the call still
open and resumes here: approved calls run (with the expert's edited arguments if
any), denied ones get a tool result saying so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from traces.models import Approval, ApprovalStatus, Trace
from traces.runner.extensions import Preset, Tool
from traces.runner.run_settings import preset_policy
from traces.runner.tool_api import ToolError
from traces.runner.tool_call import ToolCall

POLICIES = ("auto", "ask-risky", "ask-all")
UNGATED_TOOLS = {"goal", "ask_human"}


@dataclass
class GateDecision:
    action: str  # "execute" | "deny" | "wait"
    call: dict[str, Any]
    approval: Approval | None = None
    created: bool = False
    by_run_approval: int | None = None  # let through by an earlier "rest of the run" approval


def confirm_policy(trace: Trace, run_policy: str | None, preset: Preset) -> str:
    policy = run_policy or preset_policy(preset)
    if policy is None:
        auto_child = trace.parent_trace_id and settings.AGENT_SUBAGENT_AUTO_APPROVE
        policy = "auto" if auto_child else settings.AGENT_CONFIRM_POLICY
    return policy


RUN_APPROVED = "approved_tools"  # trace.context: {tool name: approval id} for the rest of the run


@dataclass
class Ask:
    """A call must wait for an expert, with the tool's question (or none)."""

    question: str = ""


def needs_approval(tool: Tool | None, policy: str, arguments: Any = None) -> Ask | None:
    """Whether a call must wait under `policy`, and what the tool asks, if anything.

    A call whose arguments do not validate asks nothing: it runs into its
    validation error (T2) instead of putting a call that cannot run to an expert.
    """
    if tool is None or tool.name in UNGATED_TOOLS or policy == "auto":
        return None
    try:
        tool.validate_arguments(arguments if isinstance(arguments, dict) else {})
    except ToolError:
        return None
    question = tool.confirm(arguments if isinstance(arguments, dict) else {}) if tool.confirm else None
    if policy == "ask-all":
        return Ask(question or "")
    if tool.confirm is not None:
        return Ask(question) if question else None
    return Ask() if tool.risk == "risky" else None


def approved_for_run(trace: Trace, tool_name: str) -> int | None:
    """The approval that let every call of `tool_name` run for the rest of this run."""
    approved = (trace.context or {}).get(RUN_APPROVED) or {}
    return approved.get(tool_name)


def parse_arguments(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            return arguments
    return arguments or {}


def gate(
    trace: Trace, call: dict[str, Any], tool: Tool | None, policy: str, message_sequence: int
) -> GateDecision:
    """What to do with one tool call under the confirm gate.

    A new approval comes back unsaved (`created`): the caller stores it through
    its fence.
    """
    parsed = ToolCall.of(call)
    approval = Approval.objects.filter(trace=trace, tool_call_id=parsed.id).first()
    if approval is None:
        arguments = parse_arguments(parsed.arguments)
        ask = needs_approval(tool, policy, arguments)
        if ask is None:
            return GateDecision("execute", call)
        earlier = approved_for_run(trace, tool.name) if tool is not None else None
        if earlier is not None:
            return GateDecision("execute", call, by_run_approval=earlier)
        approval = Approval(
            trace=trace,
            tool_call_id=parsed.id,
            message_sequence=message_sequence,
            tool_name=parsed.name,
            arguments=arguments,
            risk=tool.risk if tool else "risky",
            question=ask.question,
        )
        return GateDecision("wait", call, approval, created=True)
    if approval.status == ApprovalStatus.PENDING:
        return GateDecision("wait", call, approval)
    if approval.status == ApprovalStatus.DENIED:
        return GateDecision("deny", call, approval)
    if approval.edited_arguments is not None:
        call = parsed.with_arguments(call, json.dumps(approval.edited_arguments))
    return GateDecision("execute", call, approval)


def approval_payload(approval: Approval) -> dict[str, Any]:
    """An approval as events and the API show it."""
    return {
        "approval_id": approval.pk,
        "trace_id": approval.trace_id,
        "tool_call_id": approval.tool_call_id,
        "message_sequence": approval.message_sequence,
        "tool": approval.tool_name,
        "arguments": approval.arguments,
        "edited_arguments": approval.edited_arguments,
        "risk": approval.risk,
        "question": approval.question,
        "status": approval.status,
        "scope": approval.scope,
        "decided_by": approval.decided_by.get_username() if approval.decided_by else None,
        "decided_at": approval.decided_at.isoformat() if approval.decided_at else None,
        "note": approval.decision_note,
    }
