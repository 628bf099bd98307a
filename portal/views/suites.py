"""Regression suites on the portal (issue 23, item 5): the suites, a suite's cases and
runs (add a case from a trace, start a run), and a run's comparison table.

Staff only, as review queues are. Everything goes through suites/services.py.
"""

from __future__ import annotations

import json

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from memory.models import AgentPreset
from portal.forms import PortalForm
from portal.views.common import expert_required
from suites.models import Suite, SuiteRun
from suites.selectors import suite_run_table
from suites.services import case_from_trace, suite_create, suite_run_refresh, suite_run_start
from traces.runner import RunError

CHECKS_EXAMPLE = '[{"kind": "answer_contains", "text": "done"}, {"kind": "tool_not_called", "tool": "bash"}]'


class SuiteForm(PortalForm):
    name = forms.CharField(max_length=200)
    description = forms.CharField(required=False, widget=forms.Textarea)


class CaseForm(PortalForm):
    trace_id = forms.CharField(max_length=255)
    sequence = forms.IntegerField(required=False, min_value=1)
    name = forms.CharField(required=False, max_length=200)
    checks = forms.CharField(widget=forms.Textarea)

    def clean_checks(self) -> object:
        try:
            return json.loads(self.cleaned_data["checks"])
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"not JSON: {exc.msg} (line {exc.lineno})") from None


class RunForm(PortalForm):
    model = forms.CharField(required=False, max_length=200)
    preset = forms.CharField(required=False, max_length=100)
    baseline = forms.IntegerField(required=False, min_value=1)


@expert_required
def suite_list(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        form = SuiteForm(request.POST)
        if not form.is_valid():
            messages.error(request, form.first_error())
        else:
            try:
                suite = suite_create(user=request.user, **form.cleaned_data)
            except RunError as exc:
                messages.error(request, str(exc))
            else:
                return redirect(reverse("portal:suite", args=[suite.pk]))
    suites = Suite.objects.prefetch_related("cases", "runs").order_by("name")
    return render(request, "portal/review/suites.html", {"suites": suites, "nav": "suites"})


@expert_required
def suite_detail(request: HttpRequest, suite_id: int) -> HttpResponse:
    suite = get_object_or_404(Suite, pk=suite_id)
    typed = {"trace_id": request.GET.get("trace", ""), "checks": CHECKS_EXAMPLE}
    if request.method == "POST":
        form = CaseForm(request.POST)
        typed = {k: request.POST.get(k, "") for k in ("trace_id", "sequence", "name", "checks")}
        if not form.is_valid():
            messages.error(request, form.first_error())
        else:
            try:
                case = case_from_trace(user=request.user, suite=suite, **form.cleaned_data)
            except RunError as exc:
                messages.error(request, str(exc))
            else:
                messages.success(request, f"Case {case.name!r} added.")
                return redirect(reverse("portal:suite", args=[suite.pk]))
    runs = [(run, suite_run_table(run)) for run in suite.runs.order_by("-created_at", "-id")[:20]]
    context = {
        "suite": suite,
        "cases": suite.cases.order_by("id"),
        "runs": runs,
        "presets": AgentPreset.objects.order_by("name").values_list("name", flat=True),
        "typed": typed,
        "nav": "suites",
    }
    return render(request, "portal/review/suite.html", context)


@expert_required
@require_POST
def suite_run_new(request: HttpRequest, suite_id: int) -> HttpResponse:
    suite = get_object_or_404(Suite, pk=suite_id)
    form = RunForm(request.POST)
    if not form.is_valid():
        messages.error(request, form.first_error())
        return redirect(reverse("portal:suite", args=[suite.pk]))
    data = form.cleaned_data
    baseline = suite.runs.filter(pk=data["baseline"]).first() if data["baseline"] else None
    try:
        run = suite_run_start(
            user=request.user, suite=suite, model=data["model"], preset=data["preset"], baseline=baseline
        )
    except RunError as exc:
        messages.error(request, str(exc))
        return redirect(reverse("portal:suite", args=[suite.pk]))
    return redirect(reverse("portal:suite-run", args=[run.pk]))


@expert_required
def suite_run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = suite_run_refresh(get_object_or_404(SuiteRun.objects.select_related("suite"), pk=run_id))
    context = {"run": run, "table": suite_run_table(run), "nav": "suites"}
    return render(request, "portal/review/suite_run.html", context)
