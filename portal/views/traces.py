"""Trace pages (P1, P3): the list, and the actions an expert takes on a run (the page itself: trace_page.py).

Views stay thin: reads go through traces.selectors, every action through the same
service as the API (traces.services, traces.services.approvals), and a refusal comes back
as a plain sentence on the page.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from memory.models import AgentPreset
from portal import attachments
from portal.forms import AnswerForm, ContinueForm, NewRunForm, ReflectForm
from portal.templatetags.portal import duration, tokens
from portal.views.common import back_to_trace, refuse, refused
from review.filters import PortalScoredTraceFilter
from review.selectors import score_definitions
from traces.collaboration.humans import human_answer
from traces.filters import ATTENTION, TOP_LEVEL, PortalTraceFilter
from traces.media.intake import InvalidMedia
from traces.models import Trace, TraceStatus
from traces.runner import InvalidRun, RunError
from traces.selectors import traces_visible_to
from traces.services.runs import trace_continue, trace_reflect, trace_start, trace_stop
from traces.totals import cost_note, cost_text
from traces.waiting import traces_waiting_for

PAGE_SIZE = 25


@login_required
@require_GET
def trace_list(request: HttpRequest) -> HttpResponse:
    visible = traces_visible_to(request.user)
    scope = request.GET.get("scope", "top")
    filters = request.GET.copy()
    filters["parent"] = TOP_LEVEL if scope == "top" else ""
    listed = PortalScoredTraceFilter(
        filters, queryset=visible.select_related("owner").order_by("-updated_at")
    )
    page = Paginator(listed.qs, PAGE_SIZE).get_page(request.GET.get("page"))
    page.object_list = listed_traces = list(page.object_list)
    waits = traces_waiting_for(listed_traces)
    for trace in listed_traces:
        trace.waiting_for = waits.get(trace.trace_id, "")
    query = request.GET.copy()
    query.pop("page", None)
    needing = PortalTraceFilter({"status": ATTENTION, "parent": filters["parent"]}, queryset=visible)
    return render(
        request,
        "portal/trace_list.html",
        {
            "page": page,
            "status": request.GET.get("status", ""),
            "agent_type": request.GET.get("agent_type", ""),
            "q": request.GET.get("q", "").strip(),
            "scope": scope,
            "query": query.urlencode(),
            "statuses": TraceStatus.values,
            "agent_types": sorted({t for t in visible.values_list("agent_type", flat=True).distinct() if t}),
            "attention_count": needing.qs.count(),
            **_score_choices(request),
        },
    )


def _score_choices(request: HttpRequest) -> dict[str, Any]:
    """The list's score filter and sort (X6): by one definition's trace-level score."""
    return {
        "score": request.GET.get("score", ""),
        "score_min": request.GET.get("score_min", ""),
        "score_label": request.GET.get("score_label", ""),
        "ordering": request.GET.get("ordering", ""),
        "score_definitions": list(score_definitions()),
    }


def _row(trace: Trace, waiting_for: str) -> dict[str, Any]:
    return {
        "trace_id": trace.trace_id,
        "status": trace.status,
        "waiting_for": waiting_for,
        "tokens": tokens(trace.total_tokens),
        "cost": cost_text(trace.total_cost, trace.unpriced_calls),  # "unknown", "≥ $0.01", "$0.01"
        "cost_note": cost_note(trace.total_cost, trace.unpriced_calls),
        "duration": duration(trace.total_duration_ms),
        "messages": trace.total_messages,
        "needs_attention": trace.needs_attention,
        "updated_at": trace.updated_at.isoformat(),
    }


@login_required
@require_GET
def traces_live(request: HttpRequest) -> JsonResponse:
    """The changing columns of the listed traces, for the list page's live refresh."""
    ids = [i for i in request.GET.get("ids", "").split(",") if i][:100]
    traces = list(traces_visible_to(request.user).filter(pk__in=ids))
    waits = traces_waiting_for(traces)
    return JsonResponse({"traces": [_row(t, waits.get(t.trace_id, "")) for t in traces]})


@login_required
def trace_new(request: HttpRequest) -> HttpResponse:
    presets = list(AgentPreset.objects.order_by("name").values_list("name", flat=True)) or ["default"]
    form = NewRunForm(initial={"task": request.GET.get("task", ""), "preset": "default"})
    if request.method == "POST":
        form = NewRunForm(request.POST)
        files = request.FILES.getlist(attachments.FIELD)
        try:
            if not form.is_valid():
                raise InvalidRun(form.first_error())
            data = form.cleaned_data
            task = data["task"].strip()
            trace = trace_start(
                user=request.user,
                messages=attachments.user_message(task, files),
                model=data["model"].strip() or None,
                preset=data["preset"].strip() or None,
                name=data["name"].strip() or None,
                settings=form.run_settings(),
            )
        except InvalidMedia as exc:
            refuse(request, attachments.refusal_for_files(exc, files))
        except RunError as exc:
            refuse(request, exc)
        else:
            messages.success(request, "Run started; it streams below as a worker picks it up.")
            return back_to_trace(trace.trace_id)
    return render(request, "portal/trace_new.html", {"form": form, "presets": presets})


@login_required
@require_POST
def trace_run(request: HttpRequest, trace_id: str) -> HttpResponse:
    """Continue (no after), rewind (after + text) or regenerate (after, no text), optionally
    changing run settings (kept by later runs)."""
    form = ContinueForm(request.POST)
    if not form.is_valid():
        return refused(request, trace_id, InvalidRun(form.first_error()))
    text = form.cleaned_data["text"].strip()
    after_sequence = form.cleaned_data["after_sequence"]
    files = request.FILES.getlist(attachments.FIELD)
    try:
        new = attachments.user_message(text, files)
        trace_continue(
            user=request.user,
            trace_id=trace_id,
            messages=new,
            after_sequence=after_sequence,
            settings=form.run_settings(),
        )
    except InvalidMedia as exc:
        return refused(request, trace_id, attachments.refusal_for_files(exc, files))
    except RunError as exc:
        return refused(request, trace_id, exc)
    if after_sequence is None:
        messages.success(request, "Continuing the run with your message.")
    elif text:
        messages.success(request, f"Rewound to message {after_sequence}; a new branch starts with your text.")
    else:
        messages.success(request, f"Regenerating from message {after_sequence} on a new branch.")
    return back_to_trace(trace_id)


@login_required
@require_POST
def trace_stop_view(request: HttpRequest, trace_id: str) -> HttpResponse:
    try:
        trace = trace_stop(user=request.user, trace_id=trace_id)
    except RunError as exc:
        return refused(request, trace_id, exc)
    else:
        done = trace.status == TraceStatus.STOPPED
        messages.success(request, "Stopped." if done else "Stopping: the run ends at its next checkpoint.")
    return back_to_trace(trace_id)


@login_required
@require_POST
def trace_reflect_view(request: HttpRequest, trace_id: str) -> HttpResponse:
    form = ReflectForm(request.POST)
    if not form.is_valid():
        return refused(request, trace_id, InvalidRun(form.first_error()))
    try:
        trace_reflect(user=request.user, trace_id=trace_id, focus=form.cleaned_data["focus"])
    except RunError as exc:
        return refused(request, trace_id, exc)
    else:
        messages.success(
            request, "Reflecting on a side branch; draft experiences appear in the review queue."
        )
    return back_to_trace(trace_id)


@login_required
@require_POST
def trace_answer_view(request: HttpRequest, trace_id: str) -> HttpResponse:
    """Answer an ask_human request (S3); the page to come back to is the asking trace's."""
    form = AnswerForm(request.POST)
    if not form.is_valid():
        return refused(request, trace_id, InvalidRun(form.first_error()))
    back = form.cleaned_data["back"] or trace_id
    try:
        child = human_answer(user=request.user, trace_id=trace_id, answer=form.cleaned_data["answer"])
    except RunError as exc:
        return refused(request, back, exc)
    messages.success(request, "Answer sent; the asking run resumes with it.")
    return back_to_trace(child.parent_trace_id or child.trace_id)
