"""A remote sub-trace (agent://host/task) read through from its parent's page (seed 004
「跨设备存储」, issue 26 item 5): the same read as GET /api/traces/{id}/remote."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from portal.views.common import visible_trace
from traces.collaboration import remote


@login_required
@require_GET
def remote_sub_trace(request: HttpRequest, trace_id: str) -> HttpResponse:
    trace = visible_trace(request, trace_id)
    remote_id = request.GET.get("id", "")
    error = ""
    found = None
    try:
        found = remote.read_remote_trace(trace, remote_id)
    except LookupError:
        raise Http404("no such remote sub-trace") from None
    except remote.RemoteAgentError as exc:
        error = str(exc)
    context = {"trace": trace, "remote_id": remote_id, "remote": found, "error": error}
    return render(request, "portal/remote_trace.html", context, status=503 if error else 200)
