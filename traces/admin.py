"""Admin views of traces: what experts scan when something looks off."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from traces.models import Goal, Message, Trace, TraceEvent
from traces.services import trace_request_stop


class GoalInline(admin.TabularInline):
    model = Goal
    extra = 0
    can_delete = False
    fields = ("goal_id", "parent_id", "description", "status", "type", "summary", "cumulative_stats")
    readonly_fields = fields
    ordering = ("position",)
    show_change_link = True


@admin.register(Trace)
class TraceAdmin(admin.ModelAdmin):
    list_display = (
        "trace_id",
        "name",
        "status",
        "agent_type",
        "owner",
        "model",
        "total_messages",
        "total_tokens",
        "total_cost",
        "created_at",
        "updated_at",
    )
    list_filter = ("status", "agent_type", "model", "mode")
    search_fields = ("trace_id", "name", "task", "uid")
    date_hierarchy = "created_at"
    list_select_related = ("owner",)
    raw_id_fields = ("owner", "parent_trace")
    readonly_fields = (
        "trace_id",
        "total_messages",
        "total_tokens",
        "total_prompt_tokens",
        "total_completion_tokens",
        "total_cost",
        "total_duration_ms",
        "last_sequence",
        "head_sequence",
        "last_event_id",
        "run_owner",
        "run_token",
        "heartbeat_at",
        "created_at",
        "completed_at",
    )
    inlines = [GoalInline]
    actions = ["stop_traces"]

    @admin.action(description="Stop the selected running traces")
    def stop_traces(self, request: HttpRequest, queryset: QuerySet[Trace]) -> None:
        stopped = sum(trace_request_stop(trace_id=t.trace_id) for t in queryset)
        self.message_user(request, f"Asked {stopped} running trace(s) to stop.", messages.SUCCESS)


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = (
        "message_id",
        "role",
        "kind",
        "sequence",
        "parent_sequence",
        "goal_id",
        "description",
        "prompt_tokens",
        "completion_tokens",
        "cost",
        "created_at",
    )
    list_filter = ("role", "kind")
    search_fields = ("message_id", "trace__trace_id", "description")
    raw_id_fields = ("trace",)
    ordering = ("trace", "sequence")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # messages come from runs; an expert rewinds instead of inserting


@admin.register(Goal)
class GoalAdmin(admin.ModelAdmin):
    list_display = ("trace", "goal_id", "description", "status", "type", "created_at")
    list_filter = ("status", "type")
    search_fields = ("trace__trace_id", "description")
    raw_id_fields = ("trace",)


@admin.register(TraceEvent)
class TraceEventAdmin(admin.ModelAdmin):
    list_display = ("trace", "event_id", "type", "created_at")
    list_filter = ("type",)
    search_fields = ("trace__trace_id",)
    raw_id_fields = ("trace",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # the event log is append-only
