"""The trace page (P2): panels that stay true while a run streams, and long paths in pages.

The page is a set of panels (templates/portal/panels/): header, requests (approvals
and questions), plan, tree, sub-traces, side (decisions, inbox, experiences,
what was recalled from memory), continue and messages. The page renders them all but the tree (loaded on demand);
afterwards static/portal/trace.js re-fetches the panels an event changes from
`trace_panels`, in one request, so every figure on the page is what the server
says and every piece of model text is sanitised on the server, as on first load.
Each panel's context comes from one function of `PANEL_CONTEXT`, whose queries do
not grow with the trace (tests/portal/test_trace_page.py counts them).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET

from memory.models import Experience
from memory.selectors import experiences_injected
from portal.conversation import conversation
from portal.forms import ContinueForm
from portal.paging import CALL_LOOKBACK, PathPage, path_page, path_sequences
from portal.tree import message_tree
from portal.views.common import visible_trace
from portal.views.review import scores_context
from traces.collaboration.humans import HUMAN
from traces.goal_tree import GoalTree
from traces.models import (
    ACTIVE_STATUSES,
    Approval,
    ApprovalStatus,
    InboxMessage,
    Message,
    Trace,
    TraceEvent,
    TraceStatus,
)
from traces.runner.config import STEP_LIMIT_PREFIX
from traces.selectors import trace_events
from traces.services.approvals import approvals_for, may_decide
from traces.totals import trace_totals

LIVE_STATUSES = (TraceStatus.QUEUED, TraceStatus.RUNNING, TraceStatus.WAITING)
SHOWN_EVENTS = 300  # the timeline shows the newest events only
SUB_TRACE_DEPTH = 5
SUB_TRACES_SHOWN = 100
CHILD_MESSAGES = 3  # the newest messages of each live sub-trace, shown on the parent's page
RECALLS_SHOWN = 50  # memory_recalled events read for the side panel (one per run)
PANELS = ("header", "requests", "plan", "tree", "subtraces", "side", "project", "continue", "messages")


@dataclass
class Viewing:
    """Which path the page shows (`head`, the main path unless ?head=) and which page of it."""

    head: int
    main: bool
    before: int | None = None
    after: int | None = None
    at: int | None = None
    page: PathPage | None = None  # read once, by whichever panel needs it first
    approvals: list[Approval] | None = None  # likewise


def _number(request: HttpRequest, name: str) -> int | None:
    value = request.GET.get(name, "")
    return int(value) if value.isdigit() else None


def _viewing(request: HttpRequest, trace: Trace) -> Viewing:
    head = _number(request, "head")
    if head is not None and head != trace.head_sequence:
        if not Message.objects.filter(trace=trace, sequence=head).exists():
            raise Http404("no such message")
    else:
        head = trace.head_sequence
    return Viewing(
        head=head,
        main=head == trace.head_sequence,
        before=_number(request, "before"),
        after=_number(request, "after"),
        at=_number(request, "at"),
    )


# --- panel contexts ------------------------------------------------------------------


def _header(request: HttpRequest, trace: Trace, viewing: Viewing) -> dict[str, Any]:
    return {"totals": trace_totals(trace)}


def _requests(request: HttpRequest, trace: Trace, viewing: Viewing) -> dict[str, Any]:
    pending = [a for a in _approvals(request, trace, viewing) if a.status == ApprovalStatus.PENDING]
    questions = _open_questions(trace)
    return {
        "pending": pending,
        "can_decide": may_decide(user=request.user, trace=trace),
        "questions": questions,
        "requests_key": ",".join([f"a{a.pk}" for a in pending] + [f"q{q.pk}" for q in questions]),
    }


def _plan(request: HttpRequest, trace: Trace, viewing: Viewing) -> dict[str, Any]:
    tree = GoalTree.load(trace)
    return {
        "goals": [(d, d.count("."), tree.goal_dict(goal)) for d, goal in tree.walk()],
        "current_goal": trace.current_goal_id,
    }


def _tree(request: HttpRequest, trace: Trace, viewing: Viewing) -> dict[str, Any]:
    # the viewed path's sequences; its page's messages only if another panel read them
    path = viewing.page.sequences if viewing.page else path_sequences(trace.trace_id, viewing.head)
    return {"tree": message_tree(trace.trace_id, path, viewing.head, trace.head_sequence)}


def _subtraces(request: HttpRequest, trace: Trace, viewing: Viewing) -> dict[str, Any]:
    rows = _sub_tree(trace)
    live = [child.trace_id for _, child in rows if child.status in LIVE_STATUSES]
    newest: dict[str, list[Message]] = {}
    if live:
        wanted = Q()
        for _, child in rows:
            if child.trace_id in live:
                wanted |= Q(trace_id=child.trace_id, sequence__gt=child.last_sequence - CHILD_MESSAGES)
        for message in Message.objects.filter(wanted).order_by("sequence"):
            newest.setdefault(message.trace_id, []).append(message)
    return {
        "sub_traces": [(depth, child, newest.get(child.trace_id, [])) for depth, child in rows],
        "collaborators": (trace.context or {}).get("collaborators") or [],
    }


def _side(request: HttpRequest, trace: Trace, viewing: Viewing) -> dict[str, Any]:
    return {
        "decided": [a for a in _approvals(request, trace, viewing) if a.status != ApprovalStatus.PENDING],
        "inbox": list(InboxMessage.objects.filter(to_trace=trace).order_by("-created_at")[:50]),
        "experiences": list(
            Experience.objects.filter(trace=trace).order_by("-created_at").only("code", "rule", "status")[:50]
        ),
        "injected": experiences_injected(trace),
        **_recalled(trace),
    }


def _recalled(trace: Trace) -> dict[str, Any]:
    """M8: the memory entries recall gave this trace's runs (its `memory_recalled` events),
    each once, and how many the filters left out."""
    events = TraceEvent.objects.filter(trace=trace, type="memory_recalled").order_by("-event_id")
    payloads = list(events.values_list("payload", flat=True)[:RECALLS_SHOWN])
    entries: dict[Any, dict[str, Any]] = {}
    dropped = {"dedup": 0, "tool_usage": 0}
    for payload in payloads:
        for entry in payload.get("entries") or []:
            entries.setdefault(entry.get("id"), entry)
        for name in dropped:
            dropped[name] += int((payload.get("dropped") or {}).get(name) or 0)
    return {"recalled": list(entries.values()), "recall_dropped": dropped, "recall_runs": len(payloads)}


def _continue(request: HttpRequest, trace: Trace, viewing: Viewing) -> dict[str, Any]:
    step_limited = trace.status == TraceStatus.STOPPED and (trace.error_message or "").startswith(
        STEP_LIMIT_PREFIX
    )
    # A waiting run goes on when its approval or question is answered, not by a new message.
    can_continue = viewing.main and trace.status not in LIVE_STATUSES and trace.agent_type != HUMAN
    return {
        "continue_form": ContinueForm(),
        "step_limited": step_limited,
        "can_continue": can_continue,
        "continue_key": f"{can_continue}:{step_limited}",
    }


def _approvals(request: HttpRequest, trace: Trace, viewing: Viewing) -> list[Approval]:
    """The approvals of the trace and its sub-agents, pending and decided (one read per request)."""
    if viewing.approvals is None:
        viewing.approvals = list(approvals_for(user=request.user, trace_id=trace.trace_id))
    return viewing.approvals


def _project(request: HttpRequest, trace: Trace, viewing: Viewing) -> dict[str, Any]:
    """M9: the files and text that made the run's project context (traces/runner/project.py)."""
    stored = (trace.context or {}).get("project_context") or {}
    return {
        "project": (trace.run_settings or {}).get("project"),
        "project_files": stored.get("files") or [],
        "project_text": stored.get("text") or "",
        "project_truncated": stored.get("truncated") or 0,
    }


def _page(trace: Trace, viewing: Viewing) -> PathPage:
    if viewing.page is None:
        viewing.page = path_page(
            trace.trace_id, viewing.head, before=viewing.before, after=viewing.after, at=viewing.at
        )
    return viewing.page


def _messages(request: HttpRequest, trace: Trace, viewing: Viewing) -> dict[str, Any]:
    page = _page(trace, viewing)
    return {
        "entries": conversation(page.messages),
        "path_page": page,
        "viewing": viewing.head,
        "on_main_path": viewing.main,
        # rewind / regenerate are offered on the main path, when no run is going
        "can_rewind": viewing.main and trace.status not in ACTIVE_STATUSES,
    }


PANEL_CONTEXT: dict[str, Callable[[HttpRequest, Trace, Viewing], dict[str, Any]]] = {
    "header": _header,
    "requests": _requests,
    "plan": _plan,
    "tree": _tree,
    "subtraces": _subtraces,
    "side": _side,
    "project": _project,
    "continue": _continue,
    "messages": _messages,
}


def _sub_tree(trace: Trace) -> list[tuple[int, Trace]]:
    """Descendants in tree order with their depth: one query per level, not per child."""
    children: dict[str, list[Trace]] = {}
    frontier = [trace.trace_id]
    seen = 0
    for _ in range(SUB_TRACE_DEPTH):
        level = list(
            Trace.objects.filter(parent_trace_id__in=frontier).order_by("created_at")[:SUB_TRACES_SHOWN]
        )
        if not level:
            break
        for child in level:
            children.setdefault(child.parent_trace_id or "", []).append(child)
        seen += len(level)
        if seen >= SUB_TRACES_SHOWN:
            break
        frontier = [child.trace_id for child in level]
    rows: list[tuple[int, Trace]] = []
    stack = [(0, child) for child in reversed(children.get(trace.trace_id, []))]
    while stack:
        depth, child = stack.pop()
        rows.append((depth, child))
        stack.extend((depth + 1, kid) for kid in reversed(children.get(child.trace_id, [])))
    return rows


def _open_questions(trace: Trace) -> list[Trace]:
    """ask_human requests waiting for an answer: this trace itself, or its children."""
    if trace.agent_type == HUMAN:
        return [trace] if trace.status == TraceStatus.WAITING else []
    return list(trace.sub_traces.filter(agent_type=HUMAN, status=TraceStatus.WAITING).order_by("created_at"))


def _ancestors(trace: Trace) -> list[Trace]:
    """The chain of parents, root first: one query for the ids a sub-trace id names
    (`{parent}@…`), then one per parent the ids did not name."""
    named = []
    trace_id = trace.trace_id
    while "@" in trace_id:
        trace_id = trace_id.rsplit("@", 1)[0]
        named.append(trace_id)
    known = {t.trace_id: t for t in Trace.objects.filter(pk__in=named)} if named else {}
    chain: list[Trace] = []
    parent_id = trace.parent_trace_id
    while parent_id and len(chain) < 10:
        parent = known.get(parent_id) or Trace.objects.filter(pk=parent_id).first()
        if parent is None:
            break
        chain.insert(0, parent)
        parent_id = parent.parent_trace_id
    return chain


# --- views -----------------------------------------------------------------------------


def _context(request: HttpRequest, trace: Trace, viewing: Viewing, names: tuple[str, ...]) -> dict[str, Any]:
    context: dict[str, Any] = {"trace": trace, "live": trace.status in LIVE_STATUSES}
    for name in names:
        context.update(PANEL_CONTEXT[name](request, trace, viewing))
    return context


@login_required
@require_GET
def trace_detail(request: HttpRequest, trace_id: str) -> HttpResponse:
    trace = visible_trace(request, trace_id, select_related=("owner",))
    viewing = _viewing(request, trace)
    context = _context(request, trace, viewing, tuple(p for p in PANELS if p != "tree"))
    events = trace_events(trace_id=trace.trace_id).exclude(type="token")
    context.update(
        {
            "ancestors": _ancestors(trace),
            "events": list(events.reverse()[:SHOWN_EVENTS])[::-1],  # the newest, oldest first
            "event_count": events.count(),
            "shown_events": SHOWN_EVENTS,
            "watch_port": settings.AGENT_WATCH_PORT or "",  # the watch sockets' server, if its own
            # where the socket picks up each sub-trace's events (children=1)
            "child_cursors": json.dumps(
                {child.trace_id: child.last_event_id for _, child, _ in context["sub_traces"]}
            ),
        }
    )
    context.update(scores_context(request.user, trace))
    return render(request, "portal/trace_detail.html", context)


@login_required
@require_GET
def trace_panels(request: HttpRequest, trace_id: str) -> JsonResponse:
    """`?names=header,plan,…` rendered as on the page, for the live page (and the tree on demand)."""
    trace = visible_trace(request, trace_id, select_related=("owner",))
    viewing = _viewing(request, trace)
    names = tuple(n for n in request.GET.get("names", "").split(",") if n in PANEL_CONTEXT)
    if not names:
        return JsonResponse({"error": f"name one or more panels: {', '.join(PANELS)}"}, status=400)
    context = _context(request, trace, viewing, names)
    panels = {
        name: render_to_string(f"portal/panels/{name}.html", context, request=request) for name in names
    }
    return JsonResponse({"status": trace.status, "live": trace.status in LIVE_STATUSES, "panels": panels})


@login_required
@require_GET
def message_fragment(request: HttpRequest, trace_id: str, sequence: int) -> HttpResponse:
    """One message rendered as on the page, for live updates (sanitised server-side).

    A tool result comes back as its call's message with every result so far folded
    under it, which the page puts in place of the call it shows."""
    trace = visible_trace(request, trace_id, select_related=("owner",))
    message = Message.objects.filter(trace=trace, sequence=sequence).first()
    if message is None:
        raise Http404("no such message")
    rows = [message]
    if message.role == "tool" and message.tool_call_id:
        rows = _with_its_call(message)
    entry = conversation(rows)[0]
    return render(
        request,
        "portal/_message.html",
        {
            "entry": entry,
            "trace": trace,
            # fetched for the main path's live updates: rewind as on the page
            "can_rewind": trace.status not in ACTIVE_STATUSES,
        },
    )


def _with_its_call(result: Message) -> list[Message]:
    """The assistant message that made `result`'s call, then the results of its calls so far."""
    recent = Message.objects.filter(
        trace_id=result.trace_id, sequence__lt=result.sequence, role="assistant", tool_calls__isnull=False
    ).order_by("-sequence")[:CALL_LOOKBACK]
    for caller in recent:
        ids = [str(call.get("id")) for call in caller.tool_calls or []]
        if result.tool_call_id in ids:
            results = Message.objects.filter(
                trace_id=result.trace_id,
                sequence__gt=caller.sequence,
                sequence__lte=result.sequence,
                role="tool",
                tool_call_id__in=ids,
            ).order_by("sequence")
            return [caller, *results]
    return [result]
