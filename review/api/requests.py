"""What the review endpoints accept (X6)."""

from __future__ import annotations

from rest_framework import serializers

from review.filters import SCORE_ORDERINGS
from review.services import COMMENT_LIMIT
from traces.api.fields import BIGGEST_INTEGER, StrictBooleanField, StrictCharField, StrictIntegerField
from traces.api.requests import QuerySerializer, TraceListQuerySerializer


class ScoredTraceListQuerySerializer(TraceListQuerySerializer):
    score = StrictCharField(required=False, help_text="a score definition's name; the other score_* need it")
    score_min = serializers.FloatField(required=False, help_text="trace-level score of `score` at least this")
    score_max = serializers.FloatField(required=False, help_text="trace-level score of `score` at most this")
    score_label = StrictCharField(required=False, help_text="a category of `score` (or 'true' / 'false')")
    scored = serializers.BooleanField(
        required=False, allow_null=True, default=None, help_text="true: scored with `score`; false: not yet"
    )
    ordering = serializers.ChoiceField(
        choices=SCORE_ORDERINGS, required=False, help_text="by the average trace-level `score`, unscored last"
    )

    def validate(self, attrs: dict) -> dict:
        needs_score = ("score_min", "score_max", "score_label", "ordering")
        if not attrs.get("score") and (
            attrs.get("scored") is not None or any(k in attrs for k in needs_score)
        ):
            raise serializers.ValidationError({"score": ["name the score definition to filter or sort by"]})
        return attrs


class ScoreCreateSerializer(serializers.Serializer):
    definition = StrictCharField(max_length=64, help_text="the score definition's name")
    value = serializers.JSONField(
        help_text="a number (numeric), a label (categorical) or true/false (boolean)"
    )
    comment = StrictCharField(required=False, allow_blank=True, default="", max_length=COMMENT_LIMIT)
    message_sequence = StrictIntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=1,
        max_value=BIGGEST_INTEGER,
        help_text="score one message of the trace instead of the whole trace",
    )


class ScoresQuerySerializer(QuerySerializer):
    message_sequence = serializers.IntegerField(
        required=False, min_value=1, max_value=BIGGEST_INTEGER, help_text="only the scores of this message"
    )


class BranchCompareQuerySerializer(QuerySerializer):
    a = serializers.IntegerField(
        min_value=1, max_value=BIGGEST_INTEGER, help_text="the message ending branch a"
    )
    b = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=BIGGEST_INTEGER,
        help_text="the message ending branch b (the head)",
    )


class TraceCompareQuerySerializer(QuerySerializer):
    a = StrictCharField(max_length=255, help_text="a trace id")
    b = StrictCharField(max_length=255, help_text="another trace id, of the same task")


class ToolCallEditSerializer(serializers.Serializer):
    id = StrictCharField(max_length=200, help_text="the call's id in the edited message")
    arguments = serializers.JSONField(help_text="the call's new arguments: a JSON object")


class MessageEditSerializer(serializers.Serializer):
    content = StrictCharField(
        required=False, allow_blank=True, trim_whitespace=False, help_text="the message's new text"
    )
    tool_calls = ToolCallEditSerializer(
        many=True, required=False, help_text="an assistant's calls' new arguments"
    )
    rerun = StrictBooleanField(required=False, default=False, help_text="run the new branch from the edit")

    def validate(self, attrs: dict) -> dict:
        if "content" not in attrs and "tool_calls" not in attrs:
            raise serializers.ValidationError({"content": ["give content and/or tool_calls"]})
        return attrs
