"""The watchers' read threads keep their database connection (traces/events/reads.py)."""

from __future__ import annotations

import time

import pytest
from django.db import OperationalError, connection

from agentsite.kept_threads import connections_open
from tests.db_sessions import end_session, session
from traces.events.reads import ReadThreads

pytestmark = pytest.mark.django_db(transaction=True)


def closed() -> bool:
    return not connections_open()


def test_a_read_thread_keeps_its_connection_until_it_is_idle(settings):
    settings.AGENT_WATCH_READ_IDLE_SECONDS = 0.3
    threads = ReadThreads(1)

    first = threads.submit(session).result(5)
    assert threads.submit(session).result(5) == first  # no new connection per read
    assert threads.submit(closed).result(5) is False

    time.sleep(0.8)
    assert threads.submit(closed).result(5) is True  # idle: closed, a quiet server holds none


def test_with_no_idle_time_every_read_closes_its_connection(settings):
    settings.AGENT_WATCH_READ_IDLE_SECONDS = 0
    threads = ReadThreads(1)

    threads.submit(session).result(5)

    assert threads.submit(closed).result(5) is True


def test_a_failed_read_is_tried_once_more_on_a_new_connection_only_when_it_ran_on_a_kept_one(settings):
    settings.AGENT_WATCH_READ_IDLE_SECONDS = 30
    threads = ReadThreads(1)
    calls: list[bool] = []

    def failing() -> None:
        calls.append(closed())
        raise OperationalError("server closed the connection unexpectedly")

    with pytest.raises(OperationalError):
        threads.submit(failing).result(5)
    assert calls == [True]  # on a fresh connection: the failure is the answer

    threads.submit(session).result(5)
    calls.clear()
    with pytest.raises(OperationalError):
        threads.submit(failing).result(5)
    assert calls == [False, True]  # on the kept one, then once on a new one


@pytest.mark.skipif(connection.vendor != "postgresql", reason="ends a PostgreSQL session")
def test_a_read_survives_its_kept_session_being_ended(settings):
    settings.AGENT_WATCH_READ_IDLE_SECONDS = 30
    threads = ReadThreads(1)
    pid = threads.submit(session).result(5)

    end_session(pid)

    assert threads.submit(session).result(5) not in (pid, None)
