"""A goal's messages (seed 004 TraceStore `get_messages_by_goal`): what the agent said and did under one goal."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from portal.conversation import conversation
from portal.views.common import visible_trace
from traces.goal_tree import GoalTree
from traces.selectors import trace_goal_messages

GOAL_MESSAGES_SHOWN = 500  # the oldest ones; the API pages through the rest


@login_required
@require_GET
def goal_messages(request: HttpRequest, trace_id: str, goal_id: str) -> HttpResponse:
    """The messages recorded under `goal_id` on the main path, or on every branch with ?all=1."""
    trace = visible_trace(request, trace_id)
    tree = GoalTree.load(trace)
    goal = tree.goals.get(goal_id)
    if goal is None:
        raise Http404("no such goal")
    every_branch = request.GET.get("all") == "1"
    head = None if every_branch else trace.head_sequence
    rows = list(
        trace_goal_messages(trace_id=trace.trace_id, goal_id=goal_id, head_sequence=head)[
            : GOAL_MESSAGES_SHOWN + 1
        ]
    )
    context = {
        "trace": trace,
        "goal": tree.goal_dict(goal),
        "entries": conversation(rows[:GOAL_MESSAGES_SHOWN]),
        "more": len(rows) > GOAL_MESSAGES_SHOWN,
        "every_branch": every_branch,
        "can_rewind": False,  # rewinding is done from the trace page, on its path
    }
    return render(request, "portal/goal_messages.html", context)
