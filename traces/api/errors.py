"""One error shape for the API (W6): `{"error": <reason>, "code": <code>}`.

Run errors carry their HTTP status (400, 404, 409); DRF's own errors keep theirs
with the reason flattened into `error` (validation errors also list `fields`);
an oversized body is 413; a URL that matches no endpoint is a JSON 404 too
(`not_found`, Django's handler404). Bad input never becomes a 500.
"""

from __future__ import annotations

import re
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from traces.runner import RunError

# Where the API is mounted (agentsite/urls.py): errors there are JSON, elsewhere pages.
API_PREFIXES = ("/api/", "/webhook/")


class RequestTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "request body too large"
    default_code = "request_too_large"


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, RunError):
        return error_response(str(exc), _code(type(exc).__name__), exc.status)
    if isinstance(exc, RequestDataTooBig):
        exc = RequestTooLarge(str(exc))
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    response = drf_exception_handler(exc, context)
    if response is None or not isinstance(exc, exceptions.APIException):
        return response
    data: dict[str, Any] = {"error": _reason(exc.detail), "code": _first_code(exc)}
    if isinstance(exc, exceptions.ValidationError):
        data["fields"] = exc.detail
    response.data = data
    return response


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler404: an API URL no endpoint matches (e.g. a non-integer approval id) answers JSON."""
    if not request.path.startswith(API_PREFIXES):
        return defaults.page_not_found(request, exception)
    return JsonResponse({"error": f"no API endpoint at {request.path}", "code": "not_found"}, status=404)


def error_response(reason: str, code: str, status_code: int) -> Response:
    return Response({"error": reason, "code": code}, status=status_code)


def _code(class_name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", class_name).lower()


def _first_code(exc: exceptions.APIException) -> str:
    codes = exc.get_codes()
    while isinstance(codes, (dict, list)) and codes:
        codes = next(iter(codes.values())) if isinstance(codes, dict) else codes[0]
    return codes if isinstance(codes, str) else exc.default_code


def _reason(detail: Any, field: str = "") -> str:
    """The first message of a (possibly nested) DRF error detail, prefixed by its field.

    A list serializer's errors hold `{}` for the items that were fine: skipped."""
    if isinstance(detail, dict):
        key, value = next(((k, v) for k, v in detail.items() if v not in ({}, [])), (None, None))
        if key is None:
            return field or "invalid"
        name = key if key != "non_field_errors" else ""
        return _reason(value, f"{field}.{name}" if field and name else field or name)
    if isinstance(detail, list) and detail:
        return _reason(next((item for item in detail if item not in ({}, [])), detail[0]), field)
    return f"{field}: {detail}" if field else str(detail)
