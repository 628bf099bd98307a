"""Shapes of the API's requests: message lists, run settings, the start and run
bodies, and query parameters (the responses are in traces/api/serializers.py)."""

from __future__ import annotations

from typing import Any, ClassVar

from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from traces.api.fields import (
    BIGGEST_INTEGER,
    StrictBooleanField,
    StrictCharField,
    StrictFloatField,
    StrictIntegerField,
)
from traces.models import TraceStatus
from traces.runner.run_settings import LLM_PARAMS_ALLOWED, MAX_ITERATIONS_LIMIT, POLICY_ORDER, STRATEGIES
from traces.storable import without_nul

MESSAGE_KEY_CHARS = 200  # Message.tool_call_id and Message.name


def _message_schema(roles: list[str], *, required: list[str], content: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "role": {"type": "string", "enum": roles},
            "content": content,
            "tool_calls": {"type": "array", "items": {"type": "object"}, "nullable": True},
            "tool_call_id": {
                "type": "string",
                "minLength": 1,
                "maxLength": MESSAGE_KEY_CHARS,
                "nullable": "tool_call_id" not in required,
            },
            "name": {"type": "string", "maxLength": MESSAGE_KEY_CHARS, "nullable": True},
        },
        "required": required,
    }


CONTENT_PARTS = {"type": "array", "items": {"type": "object"}}
# What traces/runner/prepare.py:validate_messages accepts, by role.
MESSAGE_SCHEMA = {
    "description": "An OpenAI-format message: {role, content, tool_calls?, tool_call_id?, name?}",
    "oneOf": [
        _message_schema(
            ["system", "user"],
            required=["role", "content"],
            content={"anyOf": [{"type": "string", "minLength": 1}, {**CONTENT_PARTS, "minItems": 1}]},
        ),
        _message_schema(
            ["assistant"],
            required=["role"],
            content={"anyOf": [{"type": "string"}, CONTENT_PARTS], "nullable": True},
        ),
        _message_schema(
            ["tool"],
            required=["role", "tool_call_id"],
            content={"anyOf": [{"type": "string"}, CONTENT_PARTS], "nullable": True},
        ),
    ],
}


@extend_schema_field({"type": "array", "items": MESSAGE_SCHEMA})
class MessagesField(serializers.JSONField):
    """OpenAI-format messages. The run service checks roles and content; this
    refuses the wrong JSON types the schema rules out and the service passes on."""

    def to_internal_value(self, data: Any) -> Any:
        data = super().to_internal_value(data)
        if not isinstance(data, list):
            raise serializers.ValidationError("messages must be a list of {role, content} objects")
        for index, message in enumerate(data):
            if isinstance(message, dict):
                _check_message_types(message, f"messages[{index}]")
        return data


def _check_message_types(message: dict[str, Any], where: str) -> None:
    for key, least in (("tool_call_id", 1), ("name", 0)):
        value = message.get(key)
        if value is not None and not (isinstance(value, str) and least <= len(value) <= MESSAGE_KEY_CHARS):
            raise serializers.ValidationError(
                f"{where}.{key} must be a string of {least} to {MESSAGE_KEY_CHARS} characters"
            )
    content, calls = message.get("content"), message.get("tool_calls")
    if isinstance(content, list) and not all(isinstance(part, dict) for part in content):
        raise serializers.ValidationError(f"{where}.content must be a string or a list of content parts")
    if calls is not None and not (isinstance(calls, list) and all(isinstance(call, dict) for call in calls)):
        raise serializers.ValidationError(f"{where}.tool_calls must be a list of objects")


class ConstrainedSerializer(serializers.Serializer):
    # A request body whose `validate` (or service) allows only some combinations of
    # fields; `request_constraints` states them as JSON-schema keywords (oneOf, not)
    # added to its request schema. No docstring: the schema would inherit it.
    request_constraints: ClassVar[dict[str, Any]] = {}


class ConstrainedSerializerSchema(OpenApiSerializerExtension):
    """Adds a ConstrainedSerializer's `request_constraints` to its request schema."""

    target_class = ConstrainedSerializer
    match_subclasses = True

    def map_serializer(self, auto_schema: Any, direction: Any) -> Any:
        schema = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        if direction == "request":
            schema.update(self.target.request_constraints)
        return schema


class RunSettingsFields(serializers.Serializer):
    """Run settings a request may set (traces/runner/run_settings.py); they are stored
    on the trace and kept by its later runs. Omitted = the trace's, else the preset's."""

    temperature = StrictFloatField(required=False, allow_null=True, min_value=0, max_value=2)
    max_iterations = StrictIntegerField(
        required=False, allow_null=True, min_value=1, max_value=MAX_ITERATIONS_LIMIT, help_text="step limit"
    )
    skills = serializers.ListField(child=StrictCharField(), required=False, allow_null=True)
    llm_params = serializers.DictField(
        required=False, help_text="model parameters: " + ", ".join(sorted(LLM_PARAMS_ALLOWED))
    )
    confirm_policy = serializers.ChoiceField(
        choices=list(POLICY_ORDER),
        required=False,
        allow_null=True,
        help_text="which calls wait for an expert; only experts may loosen it",
    )
    enable_memory = StrictBooleanField(required=False, allow_null=True)
    experiences = serializers.ListField(
        child=StrictCharField(max_length=20),
        required=False,
        allow_null=True,
        max_length=200,
        help_text="the experiences the run may be given, by code (default: the whole approved library)",
    )
    project = StrictCharField(
        required=False,
        allow_null=True,
        max_length=500,
        help_text='project directory to work in, "name" or "name/dir" (GET /api/projects); '
        "read-only unless the project is writable",
    )
    sandbox_network = StrictBooleanField(
        required=False,
        allow_null=True,
        help_text="network for the run's sandboxed tools; only experts may turn it on beyond the deployment's",
    )
    microcompact_keep = StrictIntegerField(
        required=False,
        allow_null=True,
        min_value=0,
        help_text="newest tool results kept whole in requests once the context is half full; "
        "older ones become stubs (0 = off; default AGENT_MICROCOMPACT_KEEP)",
    )

    strategy = serializers.ChoiceField(
        choices=list(STRATEGIES),
        required=False,
        allow_null=True,
        help_text="react (the loop, default), routed (a utility-model router: direct answer, loop or plan) "
        "or plan_execute (plan, steps as goals, synthesis); default: the preset's extra.strategy",
    )
    reflexion = StrictBooleanField(
        required=False,
        allow_null=True,
        help_text="a self-critique and a retry after a failed tool call (3 lessons per step); "
        "default: on for plan_execute",
    )

    def run_settings(self) -> dict[str, Any]:
        names = RunSettingsFields._declared_fields
        return {name: value for name, value in self.validated_data.items() if name in names}


class TraceStartSerializer(RunSettingsFields, ConstrainedSerializer):
    """POST /api/traces: `messages` (OpenAI format) or the `task` shorthand for one user message."""

    request_constraints: ClassVar[dict[str, Any]] = {
        "oneOf": [{"required": ["messages"]}, {"required": ["task"]}]
    }
    messages = MessagesField(required=False, help_text="OpenAI-format messages, at least one from the user")
    task = StrictCharField(required=False, allow_blank=False, help_text="Shorthand for one user message")
    model = StrictCharField(required=False, allow_null=True, allow_blank=True, max_length=200)
    preset = StrictCharField(required=False, allow_null=True, help_text="Agent preset (agent_type)")
    name = StrictCharField(required=False, allow_null=True, allow_blank=True, max_length=200)
    uid = StrictCharField(required=False, allow_null=True, max_length=200)
    # DRF takes declared fields off the class; the stubs see Serializer.context
    context = serializers.DictField(required=False)  # type: ignore[assignment]
    tools = serializers.ListField(child=StrictCharField(), required=False, allow_null=True)
    system_prompt = StrictCharField(required=False, allow_null=True, allow_blank=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("messages" in attrs) == ("task" in attrs):
            raise serializers.ValidationError("send either messages or task (one of them)")
        if "task" in attrs:
            attrs["messages"] = [{"role": "user", "content": attrs.pop("task")}]
        return attrs

    def start_arguments(self) -> dict[str, Any]:
        """The validated request as `traces.services.runs.trace_start`'s keywords (but `user`),
        for every front door that starts a run (the REST API, /mcp)."""
        data = self.validated_data
        return {
            "messages": data["messages"],
            "model": data.get("model") or None,
            "preset": data.get("preset"),
            "name": data.get("name"),
            "uid": data.get("uid"),
            "context": data.get("context"),
            "settings": {
                **self.run_settings(),
                "tools": data.get("tools"),
                "system_prompt": data.get("system_prompt"),
            },
        }


class TraceRunSerializer(RunSettingsFields):
    """POST /api/traces/{id}/run: continue (no after_sequence), rewind or regenerate (empty messages)."""

    tools = serializers.ListField(child=StrictCharField(), required=False, allow_null=True)

    # DRF's JSONField takes any JSON default; the stubs allow only a mapping
    messages = MessagesField(required=False, default=list)  # type: ignore[arg-type]
    after_sequence = StrictIntegerField(
        required=False, allow_null=True, min_value=1, max_value=BIGGEST_INTEGER
    )

    def continue_arguments(self) -> dict[str, Any]:
        """The validated request as `trace_continue`'s keywords (but `user` and `trace_id`)."""
        data = self.validated_data
        return {
            "messages": data["messages"],
            "after_sequence": data.get("after_sequence"),
            "settings": {**self.run_settings(), "tools": data.get("tools")},
        }


class QuerySerializer(serializers.Serializer):
    """Query parameters read as given: an empty `?uid=` is refused like any blank
    value (DRF would treat it as absent), so the API does what the schema says."""

    def to_internal_value(self, data: Any) -> Any:
        return super().to_internal_value(without_nul(data.dict() if hasattr(data, "dict") else data))


class TraceListQuerySerializer(QuerySerializer):
    status = serializers.ChoiceField(choices=TraceStatus.choices, required=False)
    agent_type = StrictCharField(required=False)
    uid = StrictCharField(required=False)
    # DRF takes declared fields off the class; the stubs see Field.parent
    parent = StrictCharField(  # type: ignore[assignment]
        required=False, help_text="Parent trace id; 'none' for top-level traces"
    )
    q = StrictCharField(required=False, help_text="Text search in name and task")


class MessagesQuerySerializer(QuerySerializer):
    mode = serializers.ChoiceField(choices=["main_path", "all"], required=False, default="main_path")
    goal = serializers.CharField(
        required=False,
        default=None,
        max_length=64,
        help_text="only the messages recorded under this goal id (a goal of the trace's plan)",
    )
    after = serializers.IntegerField(
        required=False,
        default=0,
        min_value=0,
        max_value=BIGGEST_INTEGER,
        help_text="only messages with a sequence above this one",
    )
    limit = serializers.IntegerField(
        required=False,
        default=None,
        min_value=1,
        max_value=BIGGEST_INTEGER,
        help_text="at most this many messages (default: all)",
    )


class EventsQuerySerializer(QuerySerializer):
    since = serializers.IntegerField(required=False, default=0, min_value=0, max_value=BIGGEST_INTEGER)
    limit = serializers.IntegerField(
        required=False,
        default=None,
        min_value=1,
        max_value=BIGGEST_INTEGER,
        help_text="at most this many events (default: all)",
    )
