from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection

pytest_plugins = ["tests.llm_fixtures"]


@pytest.fixture(scope="session", autouse=True)
def _end_other_sessions_before_teardown(django_db_setup: Any, django_db_blocker: Any) -> Iterator[None]:
    """End the test database's other PostgreSQL sessions before it is dropped.

    Threads that ran ORM code keep their persistent connections (CONN_MAX_AGE):
    the Channels consumers' sync threads, runs started in a test's own thread.
    Those threads live until the process exits, so their sessions would keep
    the test database from being dropped.
    """
    yield
    if connection.vendor != "postgresql":
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


@pytest.fixture
def sandboxed() -> None:
    """Skip a test that needs bubblewrap where it cannot run; in CI (CI=true), which installs it, fail."""
    from tools import sandbox

    reason = sandbox.unavailable_reason()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"the sandbox must run in CI: {reason}")
    pytest.skip(f"the sandbox cannot run here: {reason}")
