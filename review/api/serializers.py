"""What the review endpoints answer (X6)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from review.models import Score, ScoreDefinition


class ScoreDefinitionSerializer(serializers.ModelSerializer):
    class Meta:
        model = ScoreDefinition
        fields = ("name", "description", "kind", "minimum", "maximum", "categories", "active")


class ScoreSerializer(serializers.ModelSerializer):
    definition = serializers.CharField(source="definition.name")
    kind = serializers.CharField(source="definition.kind")
    value = serializers.SerializerMethodField(method_name="given_value")
    author = serializers.CharField(source="author.get_username")
    message_sequence = serializers.IntegerField(source="message.sequence", allow_null=True, default=None)

    class Meta:
        model = Score
        fields = (
            "id",
            "trace_id",
            "message_sequence",
            "definition",
            "kind",
            "value",
            "label",
            "comment",
            "author",
            "created_at",
            "updated_at",
        )

    def given_value(self, score: Score) -> Any:
        """As it was given: a number, a label, or true/false."""
        if score.definition.kind == "boolean":
            return bool(score.value)
        if score.definition.kind == "categorical":
            return score.label
        return score.value
