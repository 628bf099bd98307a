"""Corrections on the portal (X6, issue 23 item 4): the card on a review queue's work
page: correct an assistant message, verify the approved experience, mark the result.
Staff only; everything goes through review/corrections.py."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from portal.forms import PortalForm
from portal.views.common import expert_required
from review.corrections import (
    correction_comparison,
    correction_create,
    correction_get,
    correction_judge,
    correction_verify,
    corrections_for,
)
from review.models import Verdict
from traces.models import Trace
from traces.runner import RunError


class CorrectionForm(PortalForm):
    sequence = forms.IntegerField(min_value=1, label="message #")
    text = forms.CharField(max_length=5000, label="correction")


def corrections_context(user: Any, trace: Trace) -> dict[str, Any]:
    found = list(corrections_for(user).filter(trace=trace).order_by("-created_at"))
    return {"corrections": [(c, correction_comparison(c)) for c in found]}


def _back(request: HttpRequest, trace_id: str) -> HttpResponse:
    wanted = request.POST.get("next", "")
    if wanted and url_has_allowed_host_and_scheme(wanted, allowed_hosts={request.get_host()}):
        return redirect(wanted)
    return redirect(reverse("portal:trace-detail", args=[trace_id]))


@expert_required
@require_POST
def correction_new(request: HttpRequest, trace_id: str) -> HttpResponse:
    form = CorrectionForm(request.POST)
    if not form.is_valid():
        messages.error(request, form.first_error())
        return _back(request, trace_id)
    try:
        made = correction_create(
            user=request.user,
            trace_id=trace_id,
            sequence=form.cleaned_data["sequence"],
            text=form.cleaned_data["text"],
        )
    except RunError as exc:
        messages.error(request, str(exc))
    else:
        code = made.experience.code if made.experience else "?"
        messages.success(request, f"Draft experience {code} proposed: edit and approve it, then verify.")
    return _back(request, trace_id)


@expert_required
@require_POST
def correction_verify_view(request: HttpRequest, correction_id: int) -> HttpResponse:
    try:
        correction = correction_get(request.user, correction_id)
        correction_verify(user=request.user, correction=correction)
    except RunError as exc:
        messages.error(request, str(exc))
        return redirect(request.POST.get("next") or reverse("portal:queues"))
    messages.success(request, "Verification run started on a new branch.")
    return _back(request, correction.trace_id)


@expert_required
@require_POST
def correction_verdict_view(request: HttpRequest, correction_id: int) -> HttpResponse:
    verdict = request.POST.get("verdict", "")
    try:
        correction = correction_get(request.user, correction_id)
        correction_judge(user=request.user, correction=correction, verdict=verdict)
    except RunError as exc:
        messages.error(request, str(exc))
        return redirect(request.POST.get("next") or reverse("portal:queues"))
    messages.success(request, f"Marked {Verdict(verdict).label}.")
    return _back(request, correction.trace_id)
