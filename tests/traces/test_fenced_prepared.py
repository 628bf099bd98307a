"""A run's step commit on PostgreSQL is a prepared statement (traces/runner/fenced.py:_prepared_cursor)."""

from __future__ import annotations

import pytest
from django.db import connection

from traces.models import Message, Trace
from traces.runner.fenced import fenced_write

pytestmark = [
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's prepared statements"),
    pytest.mark.django_db(transaction=True),  # in autocommit, as a worker writes
]


def prepared_statements() -> list[str]:
    """The statements this session prepared through the protocol (not SQL PREPARE)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT statement FROM pg_prepared_statements WHERE NOT from_sql ORDER BY prepare_time"
        )
        return [row[0] for row in cursor.fetchall()]


def commit(sequence: int, token: int = 3) -> bool | None:
    return fenced_write(
        trace_id="prep",
        token=token,
        trace_values={"head_sequence": sequence},
        inserts=[
            (
                Message,
                [
                    Message(
                        message_id=f"prep-{sequence}",
                        trace_id="prep",
                        sequence=sequence,
                        role="user",
                        content=f"m{sequence}",
                    )
                ],
            )
        ],
    )


def test_the_step_commit_is_prepared_once_per_connection_and_reused():
    Trace.objects.create(trace_id="prep", run_token=3)
    before = prepared_statements()

    assert [commit(sequence) for sequence in (1, 2, 3)] == [False, False, False]
    Trace.objects.filter(pk="prep").update(name="renamed")  # Django's own cursors prepare nothing
    assert commit(4, token=2) is None  # a lost lease writes nothing through it either
    assert connection.connection.prepare_threshold is None  # as Django set it: other queries uncounted

    added = prepared_statements()[len(before) :]
    assert len(added) == 1 and added[0].startswith(
        'WITH t AS (UPDATE "traces_trace" SET "head_sequence" = $1'
    )
    assert list(Message.objects.order_by("sequence").values_list("content", flat=True)) == ["m1", "m2", "m3"]
    assert Trace.objects.get(pk="prep").head_sequence == 3


def test_with_prepared_commits_off_the_commit_binds_on_the_client(settings):
    settings.AGENT_DB_PREPARED_COMMITS = False
    Trace.objects.create(trace_id="prep", run_token=3)
    before = prepared_statements()

    assert [commit(sequence) for sequence in (1, 2)] == [False, False]

    assert prepared_statements() == before
    assert Message.objects.count() == 2
