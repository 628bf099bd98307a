"""Review queues on the portal (X6): list and create, a queue's progress, and the
page an expert works through it on (scores, comment, done / skip, next / previous,
keyboard shortcuts in static/portal/queue.js).

Queues are the experts' tool: staff only (others get a 403, anonymous the login).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

from django import forms
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from portal.forms import PortalForm
from portal.views.common import expert_required
from portal.views.corrections import corrections_context
from portal.views.review import scores_context
from review.models import ItemStatus, QueueItem, ReviewQueue
from review.queues import (
    queue_items_for,
    queue_neighbours,
    queue_next_pending,
    queue_progress,
    queues_with_progress,
)
from review.selectors import score_definitions
from review.services import queue_create, queue_item_finish
from traces.runner import RunError
from traces.selectors import trace_main_path

SHOWN_MESSAGES = 60  # the work page shows the main path's last messages; the trace page has them all


class QueueForm(PortalForm):
    name = forms.CharField(max_length=200)
    description = forms.CharField(required=False, widget=forms.Textarea)
    definitions = forms.MultipleChoiceField(required=False, choices=())
    filter = forms.CharField(
        required=False, max_length=2000, help_text="the trace list's query, e.g. status=failed"
    )
    trace_ids = forms.CharField(required=False, widget=forms.Textarea, help_text="one trace id a line")
    assignees = forms.MultipleChoiceField(required=False, choices=())

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        definitions = self.fields["definitions"]
        assert isinstance(definitions, forms.MultipleChoiceField)
        definitions.choices = [(d.name, d.name) for d in score_definitions()]
        assignees = self.fields["assignees"]
        assert isinstance(assignees, forms.MultipleChoiceField)
        assignees.choices = [(str(u.pk), u.get_username()) for u in experts()]


def experts() -> list[Any]:
    return list(get_user_model().objects.filter(is_staff=True, is_active=True).order_by("username"))


def _filters(query: str) -> dict[str, str]:
    return {k: v for k, v in parse_qsl(query.lstrip("?")) if v and k != "page"}


@expert_required
def queue_list(request: HttpRequest) -> HttpResponse:
    form = QueueForm(initial={"filter": request.GET.get("filter", "")})
    if request.method == "POST":
        form = QueueForm(request.POST)
        if not form.is_valid():
            messages.error(request, form.first_error())
        else:
            data = form.cleaned_data
            people = [u for u in experts() if str(u.pk) in data["assignees"]]
            try:
                queue = queue_create(
                    user=request.user,
                    name=data["name"],
                    description=data["description"],
                    definitions=data["definitions"],
                    filters=_filters(data["filter"]),
                    trace_ids=data["trace_ids"].split(),
                    assignees=people,
                )
            except RunError as exc:
                messages.error(request, str(exc))
            else:
                messages.success(request, f"Queue {queue.name!r} holds {queue.items.count()} traces.")
                return redirect(reverse("portal:queue", args=[queue.pk]))
    typed = {k: form.data.get(k, "") for k in ("name", "description", "filter", "trace_ids")}
    typed["filter"] = typed["filter"] or request.GET.get("filter", "")
    return render(
        request,
        "portal/review/queues.html",
        {"queues": queues_with_progress(), "form": form, "typed": typed},
    )


@expert_required
def queue_detail(request: HttpRequest, queue_id: int) -> HttpResponse:
    queue = get_object_or_404(ReviewQueue, pk=queue_id)
    items = queue.items.select_related("trace", "assignee", "done_by").order_by("position", "id")
    start = queue_next_pending(queue, request.user)
    return render(
        request,
        "portal/review/queue.html",
        {"queue": queue, "items": items, "progress": queue_progress(queue), "start": start},
    )


@expert_required
def queue_item(request: HttpRequest, queue_id: int, item_id: int) -> HttpResponse:
    item = get_object_or_404(
        QueueItem.objects.select_related("queue", "trace", "assignee"), pk=item_id, queue_id=queue_id
    )
    trace = item.trace
    before, after = queue_neighbours(item, request.user)
    path = trace_main_path(trace_id=trace.trace_id, head_sequence=trace.head_sequence)
    mine = queue_items_for(item.queue, request.user)
    context = {
        "queue": item.queue,
        "item": item,
        "trace": trace,
        "messages_shown": path[-SHOWN_MESSAGES:],
        "messages_hidden": max(0, len(path) - SHOWN_MESSAGES),
        "before": before,
        "after": after,
        "place": mine.filter(position__lte=item.position).count(),
        "of": mine.count(),
        "progress": queue_progress(item.queue),
        "next_url": request.path,
        **scores_context(request.user, trace),
        **corrections_context(request.user, trace),
    }
    wanted = {d.pk for d in item.queue.definitions.all()}
    if wanted:  # the queue asks for these scores only
        context["score_forms"] = [(d, s) for d, s in context["score_forms"] if d.pk in wanted]
    return render(request, "portal/review/item.html", context)


class FinishForm(PortalForm):
    status = forms.ChoiceField(choices=ItemStatus.choices)


@expert_required
@require_POST
def queue_item_finish_view(request: HttpRequest, queue_id: int, item_id: int) -> HttpResponse:
    item = get_object_or_404(QueueItem.objects.select_related("queue"), pk=item_id, queue_id=queue_id)
    form = FinishForm(request.POST)
    if not form.is_valid():
        messages.error(request, form.first_error())
        return redirect(reverse("portal:queue-item", args=[queue_id, item_id]))
    queue_item_finish(user=request.user, item=item, status=form.cleaned_data["status"])
    following = queue_next_pending(item.queue, request.user, after=item.position)
    if following is None:
        messages.success(request, "Queue done: nothing left pending for you.")
        return redirect(reverse("portal:queue", args=[queue_id]))
    return redirect(reverse("portal:queue-item", args=[queue_id, following.pk]))
