"""LimitOffset paging that refuses what its schema refuses (W6).

DRF's LimitOffsetPagination falls back to its defaults on a bad `limit` or
`offset` (`?offset=abc` pages from 0); here a bad value is a 400 naming the
parameter, and the schema says the bounds.
"""

from __future__ import annotations

import re
from typing import Any

from rest_framework import pagination
from rest_framework.exceptions import ValidationError

from traces.api.fields import BIGGEST_INTEGER


class LimitOffsetPagination(pagination.LimitOffsetPagination):
    def get_limit(self, request: Any) -> int | None:
        return _integer(request, self.limit_query_param, minimum=1, default=self.default_limit)

    def get_offset(self, request: Any) -> int:
        return _integer(request, self.offset_query_param, minimum=0, default=0) or 0

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            minimum = 1 if parameter["name"] == self.limit_query_param else 0
            parameter["schema"].update(minimum=minimum, maximum=BIGGEST_INTEGER)
        return parameters


def _integer(request: Any, name: str, *, minimum: int, default: int | None) -> int | None:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not re.fullmatch(r"-?[0-9]+", raw) or not minimum <= int(raw) <= BIGGEST_INTEGER:
        raise ValidationError({name: [f"must be an integer from {minimum} to {BIGGEST_INTEGER}"]})
    return int(raw)
