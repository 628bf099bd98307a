"""Shapes of the API's responses (the requests' are in traces/api/requests.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from traces.goal_tree import GoalTree
from traces.models import CostState, Message, Trace, TraceEvent, TraceStatus
from traces.totals import trace_totals

if TYPE_CHECKING:
    from django.contrib.auth.models import User

SUMMARY_FIELDS = [
    "trace_id",
    "name",
    "mode",
    "task",
    "agent_type",
    "parent_trace_id",
    "parent_goal_id",
    "status",
    "owner",
    "uid",
    "model",
    "total_messages",
    "total_tokens",
    "total_prompt_tokens",
    "total_completion_tokens",
    "total_cost",
    "unpriced_calls",
    "cost_state",
    "total_duration_ms",
    "last_sequence",
    "head_sequence",
    "last_event_id",
    "current_goal_id",
    "result_summary",
    "error_message",
    "created_at",
    "updated_at",
    "completed_at",
]


class TraceSerializer(serializers.ModelSerializer):
    owner: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    parent_trace_id = serializers.CharField(read_only=True, allow_null=True)
    # total_cost sums the priced model calls: exact when "known", a lower bound
    # when "partial", meaningless when "unknown" (docs/API.md).
    cost_state = serializers.ChoiceField(choices=CostState.choices, read_only=True)

    class Meta:
        model = Trace
        fields = SUMMARY_FIELDS
        read_only_fields = SUMMARY_FIELDS


class SubTraceSerializer(serializers.ModelSerializer):
    class Meta:
        model = Trace
        fields = ["trace_id", "name", "agent_type", "parent_goal_id", "status", "created_at", "completed_at"]
        read_only_fields = fields


class GoalSerializer(serializers.Serializer):
    id = serializers.CharField()
    display_id = serializers.CharField(allow_null=True)
    description = serializers.CharField()
    reason = serializers.CharField()
    parent_id = serializers.CharField(allow_null=True)
    type = serializers.CharField()
    status = serializers.CharField()
    left_open = serializers.ChoiceField(
        choices=[TraceStatus.COMPLETED, TraceStatus.FAILED, TraceStatus.STOPPED], allow_null=True
    )
    summary = serializers.CharField(allow_null=True)
    sub_trace_ids = serializers.ListField(child=serializers.CharField(), allow_null=True)
    # per sub-trace: task, status, summary, mode (and remote) — seed 004 Goal.sub_trace_metadata
    sub_trace_metadata = serializers.DictField(child=serializers.DictField(), allow_null=True)
    agent_call_mode = serializers.CharField(allow_null=True)
    self_stats = serializers.DictField()
    cumulative_stats = serializers.DictField()
    created_at = serializers.DateTimeField()


class GoalTreeSerializer(serializers.Serializer):
    current_id = serializers.CharField(allow_null=True)
    goals = GoalSerializer(many=True)


class FiguresSerializer(serializers.Serializer):
    messages = serializers.IntegerField()
    tokens = serializers.IntegerField()
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    cost = serializers.FloatField()
    unpriced_calls = serializers.IntegerField()
    cost_state = serializers.ChoiceField(choices=CostState.choices)
    duration_ms = serializers.IntegerField()


class TotalsSerializer(serializers.Serializer):
    own = FiguresSerializer()
    with_sub_traces = FiguresSerializer()
    sub_traces = serializers.IntegerField()


class TraceDetailSerializer(TraceSerializer):
    goal_tree = serializers.SerializerMethodField()
    sub_traces = SubTraceSerializer(many=True, read_only=True)
    totals = serializers.SerializerMethodField()

    class Meta(TraceSerializer.Meta):
        fields = [
            *SUMMARY_FIELDS,
            "tools",
            "llm_params",
            "run_settings",
            "context",
            "goal_tree",
            "sub_traces",
            "totals",
        ]
        read_only_fields = fields

    @extend_schema_field(GoalTreeSerializer)
    def get_goal_tree(self, trace: Trace) -> dict[str, Any]:
        return GoalTree.load(trace).snapshot()

    @extend_schema_field(TotalsSerializer)
    def get_totals(self, trace: Trace) -> dict[str, Any]:
        return trace_totals(trace).as_dict()


class MessageSerializer(serializers.ModelSerializer):
    class Meta:
        model = Message
        fields = [
            "message_id",
            "sequence",
            "parent_sequence",
            "role",
            "goal_id",
            "kind",
            "description",
            "content",
            "tool_calls",
            "tool_call_id",
            "name",
            "prompt_tokens",
            "completion_tokens",
            "cost",
            "duration_ms",
            "finish_reason",
            "reasoning",
            "reasoning_tokens",
            "created_at",
        ]
        read_only_fields = fields


class EventSerializer(serializers.ModelSerializer):
    class Meta:
        model = TraceEvent
        fields = ["event_id", "type", "payload", "created_at"]
        read_only_fields = fields


class ControlResponseSerializer(serializers.Serializer):
    trace_id = serializers.CharField()
    status = serializers.CharField()


class DeletedCountsSerializer(serializers.Serializer):
    traces = serializers.IntegerField(help_text="the trace and its sub-traces")
    messages = serializers.IntegerField()
    events = serializers.IntegerField()
    goals = serializers.IntegerField()
    approvals = serializers.IntegerField()
    inbox = serializers.IntegerField()
    files = serializers.IntegerField(help_text="workspace and spill files")
    blobs = serializers.IntegerField(help_text="media no remaining message uses")


class TraceDeletedSerializer(ControlResponseSerializer):
    deleted = DeletedCountsSerializer()


class ErrorSerializer(serializers.Serializer):
    error = serializers.CharField()
    code = serializers.CharField()
