"""Writes on approvals (G5): an expert's decision on a waiting tool call.

Experts decide: by default only staff may approve, deny or edit a call;
`AGENT_APPROVERS=owner` lets the trace's owner decide too (`may_decide`). The
decision binds to one Approval (one tool call of one trace); it is recorded
with who, when, the edited arguments and the note (the audit trail), and once no call of the trace is left
pending, the trace is queued to resume: approved calls run, denied ones get a
tool result saying so (traces/guards/confirm.py).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from traces.guards.confirm import RUN_APPROVED
from traces.models import Approval, ApprovalStatus, Trace, TraceStatus
from traces.runner import InvalidRun, NotAllowed, RunConflict, TraceNotFound
from traces.selectors import trace_visible_or_404
from traces.services.runs import trace_continue

DECISIONS = {"approve": ApprovalStatus.APPROVED, "deny": ApprovalStatus.DENIED}
SCOPES = ("call", "run")


def approvals_for(*, user: Any, trace_id: str) -> QuerySet[Approval]:
    """The approvals of a trace and of its sub-agents (ids `{trace_id}@...`), which
    its run waits on (G5)."""
    trace = trace_visible_or_404(user=user, trace_id=trace_id)
    mine_or_children = Q(trace=trace) | Q(trace__trace_id__startswith=f"{trace.trace_id}@")
    return Approval.objects.filter(mine_or_children).select_related("decided_by").order_by("requested_at")


def may_decide(*, user: Any, trace: Trace) -> bool:
    """Whether `user` may decide `trace`'s approvals: staff, or its owner when allowed."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return False
    if user.is_staff:
        return True
    return settings.AGENT_APPROVERS == "owner" and trace.owner_id == user.pk


def approval_decide(
    *,
    user: Any,
    trace_id: str,
    approval_id: int,
    decision: str,
    arguments: dict[str, Any] | None = None,
    note: str = "",
    scope: str = "call",
    resume: bool = True,
) -> Approval:
    """Approve (optionally with edited arguments) or deny one waiting call, then resume the trace.

    `scope="run"` (approve only) also lets every later call of the same tool in
    the trace's current run go without asking (seed 002 "run everything"); it is
    recorded on the approval and lasts until the run ends. `resume=False` leaves
    resuming to the caller (`run_agent` runs the trace on in the terminal).

    Raises TraceNotFound (404) for a trace or approval `user` cannot see,
    NotAllowed (403) for a user who may see it but not decide (`may_decide`),
    InvalidRun (400) for a bad decision or arguments, RunConflict (409) when the
    call was already decided.
    """
    if decision not in DECISIONS:
        raise InvalidRun(f"decision must be one of {', '.join(DECISIONS)} (got {decision!r})")
    if arguments is not None and (decision != "approve" or not isinstance(arguments, dict)):
        raise InvalidRun("arguments (an object) may only come with an approve decision")
    if not isinstance(note, str):
        raise InvalidRun("note must be a string")
    if scope not in SCOPES or (scope == "run" and decision != "approve"):
        raise InvalidRun(f"scope must be one of {', '.join(SCOPES)}; 'run' only with an approve decision")
    approval = approvals_for(user=user, trace_id=trace_id).filter(pk=approval_id).first()
    if approval is None:
        raise TraceNotFound(f"approval {approval_id} of trace {trace_id!r} does not exist")
    if not may_decide(user=user, trace=approval.trace):
        raise NotAllowed(
            "only an expert (a staff user) may decide this call"
            + (
                ""
                if settings.AGENT_APPROVERS == "owner"
                else "; AGENT_APPROVERS=owner also lets the trace's owner"
            )
        )
    with transaction.atomic():
        decided = Approval.objects.filter(pk=approval.pk, status=ApprovalStatus.PENDING).update(
            status=DECISIONS[decision],
            edited_arguments=arguments,
            decided_by=user,
            decided_at=timezone.now(),
            decision_note=note,
            scope=scope,
        )
        if not decided:
            approval.refresh_from_db()
            raise RunConflict(f"approval {approval.pk} was already decided ({approval.status})")
        if scope == "run":
            _approve_for_run(approval)
    approval.refresh_from_db()
    if resume:
        _resume_when_decided(user=user, trace=approval.trace)
    return approval


def _approve_for_run(approval: Approval) -> None:
    """Note the tool in the waiting trace's context, where the gate looks (the run
    that resumes it reads the row afresh; it drops the note when it ends)."""
    trace = Trace.objects.select_for_update().get(pk=approval.trace_id)
    if trace.status != TraceStatus.WAITING:
        raise RunConflict(f"trace {trace.trace_id} is {trace.status}; approve this call alone")
    approved = dict((trace.context or {}).get(RUN_APPROVED) or {})
    approved[approval.tool_name] = approval.pk
    trace.context = {**(trace.context or {}), RUN_APPROVED: approved}
    trace.save(update_fields=["context"])


def _resume_when_decided(*, user: Any, trace: Trace) -> None:
    """Once nothing of `trace` is pending, resume it; a sub-agent through the run
    that waits on it (its parent's open agent call runs the child on)."""

    trace.refresh_from_db()
    pending = Approval.objects.filter(trace=trace, status=ApprovalStatus.PENDING).exists()
    if trace.status != TraceStatus.WAITING or pending:
        return
    target = trace
    while target.parent_trace_id:
        parent = Trace.objects.filter(pk=target.parent_trace_id, status=TraceStatus.WAITING).first()
        if parent is None or not _waits_on(parent, target.trace_id):
            break
        target = parent
    trace_continue(user=user, trace_id=target.trace_id, messages=[])


def _waits_on(parent: Trace, child_id: str) -> bool:
    calls = (parent.context or {}).get("sub_trace_calls") or {}
    return any(child_id in (noted.get("sub_trace_ids") or []) for noted in calls.values())
