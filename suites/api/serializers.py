"""What the suite endpoints read and answer (issue 23, item 5)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from suites.models import Case, CaseRun, Suite, SuiteRun
from suites.selectors import Table
from traces.api.fields import StrictCharField


class CaseSerializer(serializers.ModelSerializer):
    class Meta:
        model = Case
        fields = (
            "id",
            "name",
            "messages",
            "preset",
            "checks",
            "source_trace_id",
            "source_sequence",
            "created_at",
        )


class SuiteSerializer(serializers.ModelSerializer):
    cases = CaseSerializer(many=True, read_only=True)

    class Meta:
        model = Suite
        fields = ("id", "name", "description", "created_at", "cases")


class SuiteCreateSerializer(serializers.Serializer):
    name = StrictCharField(max_length=200)
    description = StrictCharField(required=False, allow_blank=True, default="", max_length=5000)


class CaseCreateSerializer(serializers.Serializer):
    trace_id = StrictCharField(max_length=255)
    sequence = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=1)
    name = StrictCharField(required=False, allow_blank=True, default="", max_length=200)
    checks = serializers.JSONField(
        help_text="a list of checks: answer_contains, answer_matches, "
        "file_exists, tool_called, tool_not_called, rubric"
    )


class SuiteRunCreateSerializer(serializers.Serializer):
    model = StrictCharField(required=False, allow_blank=True, default="", max_length=200)
    preset = StrictCharField(required=False, allow_blank=True, default="", max_length=100)
    baseline = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=1)
    settings = serializers.DictField(
        required=False, default=dict, help_text='run settings for every replay, e.g. {"enable_memory": false}'
    )


class CaseRunSerializer(serializers.ModelSerializer):
    case = serializers.CharField(source="case.name")

    class Meta:
        model = CaseRun
        fields = (
            "case_id",
            "case",
            "trace_id",
            "judge_trace_id",
            "outcome",
            "trace_status",
            "results",
            "tokens",
            "cost",
            "duration_ms",
            "finished_at",
        )


class SuiteRunSerializer(serializers.ModelSerializer):
    suite = serializers.CharField(source="suite.name")
    queue_id = serializers.IntegerField(allow_null=True)
    summary = serializers.SerializerMethodField()
    cases = serializers.SerializerMethodField()

    class Meta:
        model = SuiteRun
        fields = (
            "id",
            "suite",
            "model",
            "preset",
            "run_settings",
            "baseline_id",
            "queue_id",
            "created_at",
            "finished_at",
            "summary",
            "cases",
        )

    def _table(self) -> Table:
        table = self.context["table"]
        assert isinstance(table, Table)
        return table

    def get_summary(self, run: SuiteRun) -> dict[str, Any]:
        table = self._table()
        return {
            "cases": len(table.rows),
            "finished": table.finished,
            "passed": table.passed,
            "pass_rate": round(table.pass_rate, 4),
            "regressions": table.regressions,
            "fixed": table.fixed,
        }

    def get_cases(self, run: SuiteRun) -> list[dict[str, Any]]:
        rows = []
        for row in self._table().rows:
            data = dict(CaseRunSerializer(row.now).data)
            data["baseline"] = CaseRunSerializer(row.before).data if row.before else None
            data["change"] = row.change
            rows.append(data)
        return rows
