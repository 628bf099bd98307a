"""agentsite/outage.py in-process, on either database: which errors become 503 and
what the API and the portal answer. The database refuses through Django's own
execute_wrapper hook; tests/e2e/test_db_outage.py stops a real PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import InterfaceError, OperationalError, ProgrammingError, connection
from django.test import Client
from rest_framework.authtoken.models import Token

from agentsite.outage import RETRY_AFTER_SECONDS
from tests.factories import make_user


@contextmanager
def database_raising(error: type[Exception]) -> Iterator[None]:
    def refuse(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        raise error("server closed the connection unexpectedly")

    with connection.execute_wrapper(refuse):
        yield


@pytest.fixture
def token(db: Any) -> str:
    return Token.objects.create(user=make_user("integrator")).key


@pytest.mark.parametrize("error", [OperationalError, InterfaceError])
def test_api_answers_503_json_with_retry_after_when_the_database_is_down(token: str, error: type) -> None:
    client = Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Token {token}")
    with database_raising(error):
        response = client.get("/api/traces")
    assert response.status_code == 503
    assert response["Content-Type"] == "application/json"
    assert response["Retry-After"] == str(RETRY_AFTER_SECONDS)
    assert response.json() == {
        "error": "the database is unavailable; retry in a few seconds",
        "code": "unavailable",
    }


def test_portal_answers_a_short_503_page_when_the_session_cannot_be_read(db: Any) -> None:
    client = Client(raise_request_exception=False)
    client.force_login(make_user("expert", staff=True))
    with database_raising(OperationalError):
        response = client.get("/")
    assert response.status_code == 503
    assert response["Content-Type"].startswith("text/html")
    assert response["Retry-After"] == str(RETRY_AFTER_SECONDS)
    assert b"Unavailable for a moment" in response.content
    assert b"Traceback" not in response.content


def test_other_database_errors_stay_500(token: str) -> None:
    client = Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Token {token}")
    with database_raising(ProgrammingError):
        response = client.get("/api/traces")
    assert response.status_code == 500
    assert "Retry-After" not in response
