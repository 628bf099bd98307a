"""Deleting a trace from the portal (issue 25): a confirmation naming what goes, then the service."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from portal.views.common import refused, visible_trace
from traces.runner import RunError
from traces.services.delete import IN_FLIGHT, deletion_plan, trace_delete


@login_required
@require_http_methods(["GET", "POST"])
def trace_delete_view(request: HttpRequest, trace_id: str) -> HttpResponse:
    """GET: what deleting the trace removes, and a button; POST: delete it (force for staff)."""
    try:
        if request.method == "POST":
            force = request.user.is_staff and request.POST.get("force") == "1"
            deleted = trace_delete(user=request.user, trace_id=trace_id, force=force)
            messages.success(
                request,
                f"Deleted trace {trace_id} with {deleted.traces - 1} sub-trace(s), "
                f"{deleted.messages} messages and {deleted.files} files.",
            )
            return redirect("portal:trace-list")
        plan = deletion_plan(user=request.user, trace_id=trace_id)
    except RunError as exc:
        return refused(request, trace_id, exc)
    trace = visible_trace(request, trace_id)
    return render(
        request,
        "portal/trace_delete.html",
        {"trace": trace, "plan": plan, "in_flight": trace.status in IN_FLIGHT},
    )
