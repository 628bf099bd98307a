"""The database session a thread uses, and ending one from the server's side (the
kept-connection tests: tests/test_web.py, tests/traces/test_watch_reads.py)."""

from __future__ import annotations

import time
from typing import Any

from django.db import connection


def session() -> Any:
    """The server session (PostgreSQL) or the connection object (SQLite) of this thread."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_backend_pid()")
            return cursor.fetchone()[0]
        cursor.execute("SELECT 1")
        return id(connection.connection)


def end_session(pid: int) -> None:
    """Terminate PostgreSQL session `pid` and wait (up to 2.5 s) until it is gone."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
        for _ in range(50):
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid])
            if cursor.fetchone()[0] == 0:
                return
            time.sleep(0.05)
