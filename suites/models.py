"""Regression suites (X6, issue 23): cases made from traces, replayed as ordinary traces.

A `Case` keeps what a replay needs, not a link it depends on: the task's input
messages and the checks; the trace it came from is named by id only, so deleting
that trace keeps the case. A `SuiteRun` replays every case of a suite with one
model / preset; each `CaseRun` names the trace it started and, once that trace
ended, what each check found.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from review.models import ReviewQueue


class Suite(models.Model):
    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True, default="")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, blank=True, null=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("name",)

    def __str__(self) -> str:
        return self.name


class Case(models.Model):
    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="cases")
    name = models.CharField(max_length=200)
    # The input messages a replay starts with (the source branch's messages before its
    # first assistant reply), in the API's message format.
    messages = models.JSONField(default=list)
    # The preset the source trace ran with; a suite run may choose another.
    preset = models.CharField(max_length=100, default="default")
    checks = models.JSONField(default=list)
    source_trace_id = models.CharField(max_length=255, blank=True, default="")
    source_sequence = models.IntegerField(blank=True, null=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, blank=True, null=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("suite", "id")
        constraints = [models.UniqueConstraint(fields=["suite", "name"], name="suites_case_name_once")]

    def __str__(self) -> str:
        return f"{self.suite_id}/{self.name}"


class SuiteRun(models.Model):
    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="runs")
    model = models.CharField(max_length=200, blank=True, default="")
    preset = models.CharField(max_length=100, blank=True, default="")  # empty: each case's own
    # Run settings every replay starts with (traces/runner/run_settings.py), e.g.
    # {"enable_memory": false} to measure the suite without the experience library.
    run_settings = models.JSONField(default=dict, blank=True)
    baseline = models.ForeignKey("self", on_delete=models.SET_NULL, blank=True, null=True, related_name="+")
    queue = models.ForeignKey(ReviewQueue, on_delete=models.SET_NULL, blank=True, null=True, related_name="+")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, blank=True, null=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(blank=True, null=True)

    class Meta:
        ordering = ("-created_at", "-id")

    def __str__(self) -> str:
        return f"{self.suite} #{self.pk}"


class Outcome(models.TextChoices):
    RUNNING = "running"  # the case's trace (or its rubric judge) has not ended
    PASSED = "passed"
    FAILED = "failed"  # a check failed, or the trace ended other than completed


class CaseRun(models.Model):
    suite_run = models.ForeignKey(SuiteRun, on_delete=models.CASCADE, related_name="case_runs")
    case = models.ForeignKey(Case, on_delete=models.CASCADE, related_name="+")
    trace_id = models.CharField(max_length=255, db_index=True)
    judge_trace_id = models.CharField(max_length=255, blank=True, default="", db_index=True)
    outcome = models.CharField(max_length=10, choices=Outcome.choices, default=Outcome.RUNNING)
    trace_status = models.CharField(max_length=20, blank=True, default="")
    # One entry per check of the case: {"kind", ..., "passed": bool, "detail": str}.
    results = models.JSONField(default=list)
    tokens = models.IntegerField(default=0)
    cost = models.FloatField(default=0.0)
    duration_ms = models.BigIntegerField(default=0)
    finished_at = models.DateTimeField(blank=True, null=True)

    class Meta:
        ordering = ("suite_run", "case_id")
        constraints = [models.UniqueConstraint(fields=["suite_run", "case"], name="suites_case_once_per_run")]

    def __str__(self) -> str:
        return f"{self.suite_run_id}/{self.case_id} {self.outcome}"
