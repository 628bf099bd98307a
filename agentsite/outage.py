"""Answers while the database is unreachable (Q3): 503 with Retry-After, never a traceback.

Django turns an exception raised anywhere in a request (a view, DRF's token
lookup, the session or auth middleware, the session save on the way out) into a
response by calling the 500 handler inside the `except` block, so the handler
sees the exception in `sys.exc_info()`. An OperationalError or InterfaceError
there means the database could not be reached or dropped the connection: the
API answers its usual JSON error shape with code `unavailable`, the portal a
short page rendered without the database. Every other error stays a 500.

Nothing is lost: a request that failed did nothing, and runs whose worker lost the
database are resumed by the sweep (traces/services/sweep.py). The broken connection is
discarded when the request ends (CONN_HEALTH_CHECKS and Django's
`close_if_unusable_or_obsolete`), so the next request after the outage connects
afresh and the same process serves again without a restart.
"""

from __future__ import annotations

import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template import loader
from django.views import defaults

from traces.api.errors import API_PREFIXES

RETRY_AFTER_SECONDS = 5
REASON = "the database is unavailable; retry in a few seconds"


def is_database_outage(exc: BaseException | None) -> bool:
    """True for errors that mean the database is unreachable, not a bug in a query."""
    return isinstance(exc, (OperationalError, InterfaceError))


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: 503 during a database outage, Django's plain 500 page otherwise."""
    if not is_database_outage(sys.exc_info()[1]):
        return defaults.server_error(request)
    return outage_response(request)


def outage_response(request: HttpRequest) -> HttpResponse:
    """The 503 answer: JSON `{"error", "code": "unavailable"}` for the API, a short page elsewhere."""
    response: HttpResponse
    if request.path.startswith(API_PREFIXES):
        response = JsonResponse({"error": REASON, "code": "unavailable"}, status=503)
    else:
        # No request in the context: context processors would read the session and user.
        page = loader.get_template("503.html").render({"retry_after": RETRY_AFTER_SECONDS})
        response = HttpResponse(page, status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response
