"""Approvals in the portal (G5): the inbox of calls waiting for an expert, and a decision."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from portal.views.common import back_to_trace, refused
from traces.approvals import approval_decide, may_decide
from traces.models import Approval, ApprovalStatus
from traces.runner import InvalidRun, RunError
from traces.selectors import traces_visible_to


@login_required
@require_GET
def approvals_inbox(request: HttpRequest) -> HttpResponse:
    """Every call waiting for an expert in the traces the user sees, oldest first;
    each links to the page where it is decided (the top trace's, sub-agents' included)."""
    pending = (
        Approval.objects.filter(status=ApprovalStatus.PENDING, trace__in=traces_visible_to(request.user))
        .select_related("trace")
        .order_by("requested_at")
    )
    rows = [
        {
            "approval": a,
            "root": a.trace_id.split("@", 1)[0],
            "can_decide": may_decide(user=request.user, trace=a.trace),
        }
        for a in pending
    ]
    return render(request, "portal/approvals.html", {"rows": rows, "nav": "approvals"})


@login_required
@require_POST
def approval_decide_view(request: HttpRequest, trace_id: str, approval_id: int) -> HttpResponse:
    decision = request.POST.get("decision", "")
    scope = "call"
    if decision == "approve-run":  # "approve the rest of this run for this tool"
        decision, scope = "approve", "run"
    raw = request.POST.get("arguments", "").strip()
    arguments = None
    try:
        if decision == "approve" and raw and request.POST.get("edited") == "1":
            try:
                arguments = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise InvalidRun(
                    f"the edited arguments are not valid JSON ({exc.msg} at line {exc.lineno})"
                ) from None
        approval = approval_decide(
            user=request.user,
            trace_id=trace_id,
            approval_id=approval_id,
            decision=decision,
            arguments=arguments,
            note=request.POST.get("note", "").strip(),
            scope=scope,
        )
    except RunError as exc:
        return refused(request, trace_id, exc)
    else:
        verb = "Approved" if approval.status == ApprovalStatus.APPROVED else "Denied"
        if scope == "run":
            verb = f"Approved every {approval.tool_name} call for the rest of the run, starting with"
        edited = " with your edited arguments" if arguments is not None else ""
        messages.success(request, f"{verb} {approval.tool_name}{edited}; the run resumes when nothing waits.")
    return back_to_trace(trace_id)
