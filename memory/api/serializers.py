"""Shapes of the memory API: experiences, skills, reflection requests."""

from __future__ import annotations

from typing import Any

from django.db import models
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from memory.models import Experience, ExperienceSource, ExperienceStatus, normalize_tags
from traces.api.fields import StrictCharField, StrictFloatField, StrictIntegerField, StrictRegexField
from traces.api.requests import QuerySerializer

EXPERIENCE_FIELDS = [
    "code",
    "scope",
    "category",
    "tags",
    "condition",
    "rule",
    "evidence",
    "trace_id",
    "source",
    "confidence",
    "helpful",
    "harmful",
    "usage_count",
    "outcome_runs",
    "outcome_successes",
    "success_rate",
    "status",
    "created_at",
    "updated_at",
    "reviewed_at",
]


TAG_LIST = {"type": "array", "items": {"type": "string"}}


@extend_schema_field(
    {
        "type": "object",
        "properties": {"state": TAG_LIST, "intent": TAG_LIST},
        "additionalProperties": False,
        "description": "words that say when the experience applies (normalised to snake_case)",
    }
)
class TagsField(serializers.JSONField):
    def to_internal_value(self, data: Any) -> dict[str, list[str]]:
        if not isinstance(data, dict) or set(data) - {"state", "intent"}:
            raise serializers.ValidationError('tags must be {"state": [...], "intent": [...]}')
        if not all(isinstance(v, list) and all(isinstance(t, str) for t in v) for v in data.values()):
            raise serializers.ValidationError("tags.state and tags.intent must be lists of words")
        return normalize_tags(data)


@extend_schema_field({"type": "string", "minLength": 1, "pattern": r"\S"})
class RuleField(StrictCharField):
    """The body of an experience, kept as written (no trimming) but not only whitespace."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(trim_whitespace=False, **kwargs)


class ExperienceSerializer(serializers.ModelSerializer):
    # JSON values as typed: no "5" for an integer, no 5 for a string.
    serializer_field_mapping = {
        **serializers.ModelSerializer.serializer_field_mapping,
        models.CharField: StrictCharField,
        models.TextField: StrictCharField,
        models.IntegerField: StrictIntegerField,
    }

    tags = TagsField(required=False)
    trace_id = serializers.CharField(read_only=True, allow_null=True)
    category = StrictRegexField(r"^[a-z][a-z0-9_]{0,49}$", required=False)
    confidence = StrictFloatField(min_value=0.0, max_value=1.0, required=False)
    # DRF takes declared fields off the class; the stubs see Field.source (here and below)
    source = serializers.ChoiceField(ExperienceSource.choices, required=False)  # type: ignore[assignment]
    status = serializers.ChoiceField(ExperienceStatus.choices, required=False)
    rule = RuleField()

    class Meta:
        model = Experience
        fields = EXPERIENCE_FIELDS
        read_only_fields = [
            "code",
            "evidence",
            "usage_count",
            "outcome_runs",
            "outcome_successes",
            "success_rate",
            "created_at",
            "updated_at",
            "reviewed_at",
        ]

    def validate_rule(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("rule must not be empty")
        return value.strip("\n")


class ExperienceListQuerySerializer(QuerySerializer):
    status = serializers.ChoiceField(ExperienceStatus.choices, required=False)
    category = StrictCharField(required=False)
    source = serializers.ChoiceField(ExperienceSource.choices, required=False)  # type: ignore[assignment]
    tag = StrictCharField(required=False, help_text="experiences with this state or intent tag")
    q = StrictCharField(required=False, help_text="words in the condition or rule")


class ExperienceImportSerializer(serializers.Serializer):
    text = StrictCharField(
        trim_whitespace=False, allow_blank=True, help_text="an experiences.md file (empty: imports nothing)"
    )


class ExperienceImportResultSerializer(serializers.Serializer):
    created = serializers.ListField(child=serializers.CharField())
    updated = serializers.ListField(child=serializers.CharField())


class SkillSerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField()
    source = serializers.CharField()  # type: ignore[assignment]  # a field, not Field.source (above)


class SkillDetailSerializer(SkillSerializer):
    body = serializers.CharField()


class ReflectSerializer(serializers.Serializer):
    focus = StrictCharField(required=False, allow_blank=True, default="", max_length=2000)
