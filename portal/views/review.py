"""Scores on the portal (X6): the trace page's scores card and its form.

Scoring goes through the same service as the API (review.services.score_set), so
the same people may score (whoever sees the trace) and the same values are refused.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from portal.forms import PortalForm
from portal.views.common import back_to_trace, refused
from review.models import ScoreDefinition, ScoreKind
from review.selectors import score_definitions, trace_scores
from review.services import COMMENT_LIMIT, score_set
from traces.models import Trace
from traces.runner import InvalidRun, RunError


class ScoreForm(PortalForm):
    definition = forms.CharField(max_length=64)
    value = forms.CharField(max_length=100, required=False)
    comment = forms.CharField(max_length=COMMENT_LIMIT, required=False)
    message_sequence = forms.IntegerField(min_value=1, required=False)
    next = forms.CharField(max_length=500, required=False)


def given_value(definition: ScoreDefinition | None, text: str) -> Any:
    """The form's text as the value the definition takes (the service checks it)."""
    text = text.strip()
    if definition is None or definition.kind == ScoreKind.CATEGORICAL:
        return text
    if definition.kind == ScoreKind.BOOLEAN:
        return {"true": True, "false": False}.get(text.lower(), text)
    try:
        return float(text)
    except ValueError:
        return text


def scores_context(user: Any, trace: Trace) -> dict[str, Any]:
    """The scores card: every score of the trace, and the definitions to score with
    (each with the viewer's own trace-level score, to edit)."""
    scores = list(trace_scores(trace=trace))
    mine = {s.definition_id: s for s in scores if s.author_id == user.pk and s.message_id is None}
    definitions = [(d, mine.get(d.pk)) for d in score_definitions()]
    return {"scores": scores, "score_forms": definitions}


@login_required
@require_POST
def trace_score_view(request: HttpRequest, trace_id: str) -> HttpResponse:
    form = ScoreForm(request.POST)
    if not form.is_valid():
        return refused(request, trace_id, InvalidRun(form.first_error()))
    data = form.cleaned_data
    definition = ScoreDefinition.objects.filter(name=data["definition"]).first()
    try:
        score, _ = score_set(
            user=request.user,
            trace_id=trace_id,
            definition=data["definition"],
            value=given_value(definition, data["value"]),
            comment=data["comment"].strip(),
            message_sequence=data["message_sequence"],
        )
    except RunError as exc:
        return refused(request, trace_id, exc)
    where = f" of message {score.message.sequence}" if score.message else ""
    messages.success(request, f"Scored {score.definition.name}{where}: {score.label}.")
    back = data["next"]
    if back and url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        return redirect(back)
    return back_to_trace(trace_id)
