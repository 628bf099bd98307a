"""What every portal view shares: the trace a user may see, refusals in plain words,
the experts-only gate."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse

from traces.models import Trace
from traces.runner import RunError, TraceNotFound
from traces.selectors import trace_visible_or_404

PLAIN_STATUS = {
    400: "That could not be done",
    403: "Not yours to decide",
    404: "Not found",
    409: "Not now: the trace is busy or already decided",
}


def visible_trace(request: HttpRequest, trace_id: str, *, select_related: tuple[str, ...] = ()) -> Trace:
    """The trace the request's user may see (`traces/selectors.py:trace_visible_or_404`);
    a page the user may not see is Django's 404, as any unknown page."""
    try:
        return trace_visible_or_404(user=request.user, trace_id=trace_id, select_related=select_related)
    except TraceNotFound:
        raise Http404("no such trace") from None


def refusal(exc: RunError) -> str:
    """A service refusal (400/403/404/409) as a sentence for the expert."""
    prefix = PLAIN_STATUS.get(getattr(exc, "status", 400), "That could not be done")
    return f"{prefix}. {exc}"


def refuse(request: HttpRequest, exc: RunError) -> None:
    messages.error(request, refusal(exc))


def back_to_trace(trace_id: str) -> HttpResponse:
    return redirect(reverse("portal:trace-detail", args=[trace_id]))


def refused(request: HttpRequest, trace_id: str, exc: RunError) -> HttpResponse:
    """Say why, on the trace's page (or the list, when the trace cannot be seen)."""
    refuse(request, exc)
    if exc.status == 404:
        return redirect(reverse("portal:trace-list"))
    return back_to_trace(trace_id)


def expert_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    @login_required
    @wraps(view)
    def check(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_staff:
            raise PermissionDenied("this is for experts (staff)")
        return view(request, *args, **kwargs)

    return check
