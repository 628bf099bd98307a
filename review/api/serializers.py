"""What the review endpoints answer (X6)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from review.compare import Comparison, Side
from review.models import MessageEdit, Score, ScoreDefinition
from traces.api.serializers import MessageSerializer
from traces.models import Message


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


class MessageEditOutSerializer(serializers.ModelSerializer):
    editor = serializers.CharField(source="editor.get_username", allow_null=True, default=None)

    class Meta:
        model = MessageEdit
        fields = (
            "id",
            "trace_id",
            "editor",
            "edited_at",
            "original_sequence",
            "edited_sequence",
            "head_sequence",
            "role",
            "before",
            "after",
            "rerun",
        )


def comparison_data(comparison: Comparison) -> dict[str, Any]:
    """A comparison as JSON: each side, the common ancestor, the aligned rows."""
    return {
        "a": _side(comparison.a),
        "b": _side(comparison.b),
        "common_ancestor": {
            "messages": comparison.common,
            "a_sequence": comparison.ancestor.sequence if comparison.ancestor else None,
            "b_sequence": comparison.ancestor_b.sequence if comparison.ancestor_b else None,
        },
        "rows": [
            {
                "status": row.status,
                "a": _message(row.a),
                "b": _message(row.b),
                "changes": row.changes,
                "text_diff": [{"op": op, "text": text} for op, text in row.text_diff],
                "tool_call_diffs": row.call_diffs,
            }
            for row in comparison.rows
        ],
    }


def _side(side: Side) -> dict[str, Any]:
    return {
        "trace_id": side.trace.trace_id,
        "head_sequence": side.head,
        "main_path": side.is_main,
        "outcome": side.outcome(),
        "figures": side.figures(),
        "after_ancestor": side.figures(side.tail),
    }


def _message(message: Message | None) -> dict[str, Any] | None:
    return MessageSerializer(message).data if message is not None else None
