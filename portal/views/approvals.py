"""Approvals in the portal (G5): the inbox of calls waiting for an expert, and a decision."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from portal.forms import ApprovalDecisionForm
from portal.views.common import back_to_trace, refused
from traces.models import Approval, ApprovalStatus
from traces.runner import InvalidRun, RunError
from traces.selectors import traces_visible_to
from traces.services.approvals import approval_decide, may_decide


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
    form = ApprovalDecisionForm(request.POST)
    if not form.is_valid():
        return refused(request, trace_id, InvalidRun(form.first_error()))
    data = form.cleaned_data
    try:
        approval = approval_decide(
            user=request.user,
            trace_id=trace_id,
            approval_id=approval_id,
            decision=data["decision"],
            arguments=data["edited_arguments"],
            note=data["note"],
            scope=data["scope"],
        )
    except RunError as exc:
        return refused(request, trace_id, exc)
    verb = "Approved" if approval.status == ApprovalStatus.APPROVED else "Denied"
    if data["scope"] == "run":
        verb = f"Approved every {approval.tool_name} call for the rest of the run, starting with"
    edited = " with your edited arguments" if data["edited_arguments"] is not None else ""
    messages.success(request, f"{verb} {approval.tool_name}{edited}; the run resumes when nothing waits.")
    return back_to_trace(trace_id)
