from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

pytest_plugins = ["tests.llm_fixtures"]


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> Iterator[None]:
    """On SQLite, test on a WAL file database as the service runs, not Django's in-memory one.

    Django's default test database is in-memory with a shared cache, where a write
    that meets another connection's table lock fails at once ("database table is
    locked", SQLITE_LOCKED) instead of waiting for busy_timeout. Runs here hold
    their threads (the run host, the process's lease watcher and sweeper), so a
    test's threads would meet each other's locks by chance. A file database in
    WAL mode with the service's busy_timeout waits like production does; it lives
    in memory (/dev/shm) where there is one, so it costs no disk.
    """
    from django.conf import settings

    db = settings.DATABASES["default"]
    if not db["ENGINE"].endswith("sqlite3"):
        yield
        return
    shm = Path("/dev/shm")
    folder = tempfile.mkdtemp(prefix="agentsite-test-db-", dir=shm if os.access(shm, os.W_OK) else None)
    db.setdefault("TEST", {})["NAME"] = str(Path(folder) / "test.sqlite3")
    try:
        yield
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(autouse=True)
def _fresh_kept_reads() -> Iterator[None]:
    """A test's database is emptied by rollback or truncation, neither of which tells the
    process's kept reads (agentsite/kept.py: memory indexes, presets, ...): drop them after each test."""
    yield
    from agentsite.kept import drop_all

    drop_all()


@pytest.fixture(scope="session", autouse=True)
def _end_other_sessions_before_teardown(django_db_setup: Any, django_db_blocker: Any) -> Iterator[None]:
    """Stop the sweeper thread and end the test database's other PostgreSQL sessions before
    it is dropped.

    Threads that ran ORM code keep their persistent connections (CONN_MAX_AGE):
    the Channels consumers' sync threads, runs started in a test's own thread.
    Those threads live until the process exits, so their sessions would keep
    the test database from being dropped.
    """
    yield
    from traces import sweeper

    sweeper.stop()  # a run task started it; its next cycle would meet a dropped database
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
