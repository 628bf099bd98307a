"""Serializer fields that take a JSON body's values as the schema types them (W6).

DRF coerces: its CharField turns 5 into "5", IntegerField "5" into 5, FloatField
"0.5" into 0.5. The OpenAPI schema says string, integer, number, so a value of
another JSON type is refused with 400 instead of silently converted.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from rest_framework import serializers

# The largest integer both databases compare against (SQLite's INTEGER, PostgreSQL's bigint).
BIGGEST_INTEGER = 2**63 - 1


class StrictCharField(serializers.CharField):
    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictFloatField(serializers.FloatField):
    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class StrictRegexField(serializers.RegexField):
    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictCharFieldSchema(OpenApiSerializerFieldExtension):
    """A string that may not be blank is refused when it is only whitespace (DRF
    trims before the check), so its request schema asks for a non-space character."""

    target_class = StrictCharField

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> Any:
        schema = auto_schema._map_serializer_field(self.target, direction, bypass_extensions=True)
        if direction == "request" and self.target.trim_whitespace and not self.target.allow_blank:
            schema["pattern"] = r"\S"
        return schema
