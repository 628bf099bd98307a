"""Branch comparison and edit-and-fork on the portal (X6). The same selectors and service
as the API (review/compare.py, review/edits.py), so the same people may compare and edit
(whoever sees the trace) and the same edits are refused."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from portal.paging import path_sequences
from portal.tree import message_tree
from portal.views.common import refusal, refused, visible_trace
from review.compare import Comparison, branches_compare, traces_compare
from review.edits import message_edit_fork
from traces.runner import InvalidRun, RunError
from traces.selectors import traces_visible_to


def _sequence(request: HttpRequest, name: str) -> int | None:
    raw = request.GET.get(name, "").strip()
    if not raw:
        return None
    if not raw.isdigit():
        raise InvalidRun(f"{name}: a message number")
    return int(raw)


def _page(request: HttpRequest, context: dict[str, Any], error: RunError | None) -> HttpResponse:
    if error is not None:
        context["error"] = refusal(error)
    return render(request, "portal/compare.html", context, status=400 if error else 200)


@login_required
@require_GET
def branch_compare(request: HttpRequest, trace_id: str) -> HttpResponse:
    """Two branches of a trace side by side (`?a=N&b=M`, b defaults to the head)."""
    trace = visible_trace(request, trace_id)
    path = path_sequences(trace.trace_id, trace.head_sequence)
    tips = [
        tip.last for tip in message_tree(trace.trace_id, path, trace.head_sequence, trace.head_sequence).tips
    ]
    context: dict[str, Any] = {"trace": trace, "tips": sorted(set(tips) | {trace.head_sequence})}
    comparison: Comparison | None = None
    try:
        a, b = _sequence(request, "a"), _sequence(request, "b")
        if a is None:
            a = next((tip for tip in sorted(tips, reverse=True) if tip != trace.head_sequence), None)
        if a is not None:
            comparison = branches_compare(trace=trace, a=a, b=b)
    except RunError as exc:
        return _page(request, context, exc)
    context.update({"comparison": comparison, "a": a, "b": b or trace.head_sequence})
    return _page(request, context, None)


@login_required
@require_GET
def trace_compare(request: HttpRequest) -> HttpResponse:
    """Two traces of the same task side by side (`?a=<trace id>&b=<trace id>`)."""
    a_id, b_id = request.GET.get("a", "").strip(), request.GET.get("b", "").strip()
    context: dict[str, Any] = {"a_id": a_id, "b_id": b_id, "across": True}
    if not (a_id and b_id):
        return _page(request, context, None)
    visible = traces_visible_to(request.user)
    a, b = visible.filter(pk=a_id).first(), visible.filter(pk=b_id).first()
    if a is None or b is None:
        raise Http404("no such trace")
    try:
        context["comparison"] = traces_compare(a=a, b=b)
    except RunError as exc:
        return _page(request, context, exc)
    return _page(request, context, None)


@login_required
@require_POST
def message_edit_view(request: HttpRequest, trace_id: str, sequence: int) -> HttpResponse:
    """The trace page's "Edit and fork" form: the message's text and its calls' arguments."""
    content = request.POST.get("content")
    ids, arguments = request.POST.getlist("call_id"), request.POST.getlist("arguments")
    calls = [{"id": i, "arguments": a} for i, a in zip(ids, arguments, strict=False)] or None
    try:
        fork = message_edit_fork(
            user=request.user,
            trace_id=trace_id,
            sequence=sequence,
            content=content.replace("\r\n", "\n") if content is not None else None,
            tool_calls=calls,
            rerun=request.POST.get("rerun") == "on",
        )
    except RunError as exc:
        return refused(request, trace_id, exc)
    edit = fork.edit
    ran = " and re-running from there" if edit.rerun else ""
    messages.success(
        request, f"Edited #{edit.original_sequence} into #{edit.edited_sequence}, a new branch{ran}."
    )
    return redirect(reverse("portal:trace-detail", args=[trace_id]) + f"#m{edit.edited_sequence}")
