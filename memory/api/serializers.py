"""Shapes of the memory API: experiences, skills, reflection requests."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from memory.models import Experience, ExperienceSource, ExperienceStatus, normalize_tags

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


class TagsField(serializers.JSONField):
    def to_internal_value(self, data: Any) -> dict[str, list[str]]:
        if not isinstance(data, dict) or set(data) - {"state", "intent"}:
            raise serializers.ValidationError('tags must be {"state": [...], "intent": [...]}')
        if not all(isinstance(v, list) and all(isinstance(t, str) for t in v) for v in data.values()):
            raise serializers.ValidationError("tags.state and tags.intent must be lists of words")
        return normalize_tags(data)


class ExperienceSerializer(serializers.ModelSerializer):
    tags = TagsField(required=False)
    trace_id = serializers.CharField(read_only=True, allow_null=True)
    category = serializers.RegexField(r"^[a-z][a-z0-9_]{0,49}$", required=False)
    confidence = serializers.FloatField(min_value=0.0, max_value=1.0, required=False)
    source = serializers.ChoiceField(ExperienceSource.choices, required=False)
    status = serializers.ChoiceField(ExperienceStatus.choices, required=False)
    rule = serializers.CharField(trim_whitespace=False)

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


class ExperienceListQuerySerializer(serializers.Serializer):
    status = serializers.ChoiceField(ExperienceStatus.choices, required=False)
    category = serializers.CharField(required=False)
    source = serializers.ChoiceField(ExperienceSource.choices, required=False)
    tag = serializers.CharField(required=False, help_text="experiences with this state or intent tag")
    q = serializers.CharField(required=False, help_text="words in the condition or rule")


class ExperienceImportSerializer(serializers.Serializer):
    text = serializers.CharField(trim_whitespace=False, help_text="an experiences.md file")


class ExperienceImportResultSerializer(serializers.Serializer):
    created = serializers.ListField(child=serializers.CharField())
    updated = serializers.ListField(child=serializers.CharField())


class SkillSerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField()
    source = serializers.CharField()


class SkillDetailSerializer(SkillSerializer):
    body = serializers.CharField()


class ReflectSerializer(serializers.Serializer):
    focus = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)
