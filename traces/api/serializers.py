"""Shapes of the API's requests and responses."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from traces.goal_tree import GoalTree
from traces.models import Message, Trace, TraceEvent, TraceStatus

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
    owner = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    parent_trace_id = serializers.CharField(read_only=True, allow_null=True)

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
    summary = serializers.CharField(allow_null=True)
    sub_trace_ids = serializers.ListField(child=serializers.CharField(), allow_null=True)
    agent_call_mode = serializers.CharField(allow_null=True)
    self_stats = serializers.DictField()
    cumulative_stats = serializers.DictField()
    created_at = serializers.DateTimeField()


class GoalTreeSerializer(serializers.Serializer):
    current_id = serializers.CharField(allow_null=True)
    goals = GoalSerializer(many=True)


class TraceDetailSerializer(TraceSerializer):
    goal_tree = serializers.SerializerMethodField()
    sub_traces = SubTraceSerializer(many=True, read_only=True)

    class Meta(TraceSerializer.Meta):
        fields = [*SUMMARY_FIELDS, "tools", "llm_params", "context", "goal_tree", "sub_traces"]
        read_only_fields = fields

    @extend_schema_field(GoalTreeSerializer)
    def get_goal_tree(self, trace: Trace) -> dict[str, Any]:
        return GoalTree.load(trace).snapshot()


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
            "created_at",
        ]
        read_only_fields = fields


class EventSerializer(serializers.ModelSerializer):
    class Meta:
        model = TraceEvent
        fields = ["event_id", "type", "payload", "created_at"]
        read_only_fields = fields


class TraceStartSerializer(serializers.Serializer):
    """POST /api/traces: `messages` (OpenAI format) or the `task` shorthand for one user message."""

    messages = serializers.JSONField(
        required=False, help_text="OpenAI-format messages: [{role, content}, ...]"
    )
    task = serializers.CharField(
        required=False, allow_blank=False, help_text="Shorthand for one user message"
    )
    model = serializers.CharField(required=False, allow_null=True, allow_blank=True)
    preset = serializers.CharField(required=False, allow_null=True, help_text="Agent preset (agent_type)")
    name = serializers.CharField(required=False, allow_null=True, allow_blank=True, max_length=200)
    uid = serializers.CharField(required=False, allow_null=True, max_length=200)
    context = serializers.DictField(required=False)
    tools = serializers.ListField(child=serializers.CharField(), required=False, allow_null=True)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("messages" in attrs) == ("task" in attrs):
            raise serializers.ValidationError("send either messages or task (one of them)")
        if "task" in attrs:
            attrs["messages"] = [{"role": "user", "content": attrs.pop("task")}]
        return attrs


class TraceRunSerializer(serializers.Serializer):
    """POST /api/traces/{id}/run: continue (no after_sequence), rewind or regenerate (empty messages)."""

    messages = serializers.JSONField(required=False, default=list)
    after_sequence = serializers.IntegerField(required=False, allow_null=True, min_value=1)


class ControlResponseSerializer(serializers.Serializer):
    trace_id = serializers.CharField()
    status = serializers.CharField()


class ErrorSerializer(serializers.Serializer):
    error = serializers.CharField()
    code = serializers.CharField()


class TraceListQuerySerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=TraceStatus.choices, required=False)
    agent_type = serializers.CharField(required=False)
    uid = serializers.CharField(required=False)
    parent = serializers.CharField(required=False, help_text="Parent trace id; 'none' for top-level traces")
    q = serializers.CharField(required=False, help_text="Text search in name and task")


class MessagesQuerySerializer(serializers.Serializer):
    mode = serializers.ChoiceField(choices=["main_path", "all"], required=False, default="main_path")
    after = serializers.IntegerField(
        required=False, default=0, min_value=0, help_text="only messages with a sequence above this one"
    )
    limit = serializers.IntegerField(
        required=False, default=None, min_value=1, help_text="at most this many messages (default: all)"
    )


class EventsQuerySerializer(serializers.Serializer):
    since = serializers.IntegerField(required=False, default=0, min_value=0)
    limit = serializers.IntegerField(
        required=False, default=None, min_value=1, help_text="at most this many events (default: all)"
    )
