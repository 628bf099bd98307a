from __future__ import annotations

from django.contrib import admin

from suites.models import Case, CaseRun, Suite, SuiteRun


class CaseInline(admin.TabularInline):
    model = Case
    extra = 0
    fields = ("name", "preset", "checks", "source_trace_id", "source_sequence")


@admin.register(Suite)
class SuiteAdmin(admin.ModelAdmin):
    list_display = ("name", "description", "created_at")
    inlines = [CaseInline]


class CaseRunInline(admin.TabularInline):
    model = CaseRun
    extra = 0
    can_delete = False
    fields = (
        "case",
        "outcome",
        "trace_id",
        "judge_trace_id",
        "trace_status",
        "tokens",
        "cost",
        "duration_ms",
    )
    readonly_fields = fields


@admin.register(SuiteRun)
class SuiteRunAdmin(admin.ModelAdmin):
    list_display = ("id", "suite", "model", "preset", "baseline", "created_at", "finished_at")
    list_filter = ("suite",)
    inlines = [CaseRunInline]
