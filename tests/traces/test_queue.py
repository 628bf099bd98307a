"""Queued runs are recoverable from the database alone (traces/services/queue.py, W5).

The broker here is django-q2's real ORM broker (its OrmQ table) or its sync mode;
`Conf.ORM` names a database alias that does not exist to make the real broker
fail, as a broker outage does.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from django_q.conf import Conf
from django_q.models import OrmQ

from tests.scripted_llm import Reply
from tests.traces.test_doorbell_sender import Redis
from tests.traces.test_doorbell_sender import pytestmark as needs_redis
from traces.models import Trace, TraceStatus
from traces.services.sweep import runs_sweep_stale


@pytest.fixture
def orm_broker(monkeypatch: Any) -> None:
    """django-q2's ORM broker on the test database: sent tasks are OrmQ rows."""
    monkeypatch.setattr(Conf, "SYNC", False)
    monkeypatch.setattr(Conf, "ORM", "default")


def start(client: Any, task: str = "say hi") -> str:
    response = client.post("/api/traces", {"task": task}, format="json")
    assert response.status_code == 201, response.content
    return str(response.json()["trace_id"])


def test_a_start_while_the_broker_is_down_is_accepted_and_sent_again_by_the_sweep(
    api_client, integrator, llm, monkeypatch, django_capture_on_commit_callbacks, inline_worker
):
    monkeypatch.setattr(Conf, "SYNC", False)
    monkeypatch.setattr(Conf, "ORM", "no-such-database")  # every send fails inside the real broker
    client = api_client(integrator)
    with django_capture_on_commit_callbacks(execute=True):
        trace_id = start(client)

    trace = Trace.objects.get(pk=trace_id)
    assert trace.status == TraceStatus.QUEUED and trace.heartbeat_at is None
    assert trace.run_request is not None and trace.run_request["task"] == "traces.tasks.run_trace"
    assert client.get(f"/api/traces/{trace_id}").json()["status"] == "queued"
    assert client.post(f"/api/traces/{trace_id}/run", {"task": "again"}, format="json").status_code == 409

    llm.script("scripted", [Reply(text="hi")])
    monkeypatch.setattr(Conf, "ORM", "default")  # the broker is back; sync mode runs what is sent
    monkeypatch.setattr(Conf, "SYNC", True)
    with inline_worker():
        report = runs_sweep_stale(now=timezone.now() + timedelta(seconds=31))
    assert report.requeued == [trace_id]
    trace.refresh_from_db()
    assert (trace.status, trace.result_summary, trace.run_request) == (TraceStatus.COMPLETED, "hi", None)
    assert runs_sweep_stale(now=timezone.now() + timedelta(hours=1)).requeued == []


def test_an_unclaimed_request_is_sent_again_with_a_growing_wait(
    api_client, integrator, llm, orm_broker, django_capture_on_commit_callbacks, settings
):
    settings.AGENT_QUEUE_REQUEUE_SECONDS = 30
    settings.AGENT_QUEUE_REQUEUE_MAX_SECONDS = 100
    with django_capture_on_commit_callbacks(execute=True):
        trace_id = start(api_client(integrator))
    assert OrmQ.objects.count() == 1  # sent once; imagine the broker lost it

    now = timezone.now()
    assert runs_sweep_stale(now=now + timedelta(seconds=10)).requeued == []  # not yet due
    assert runs_sweep_stale(now=now + timedelta(seconds=31)).requeued == [trace_id]
    # Next wait 60 s after that send, then 100 s (the maximum), never twice at once.
    assert runs_sweep_stale(now=now + timedelta(seconds=80)).requeued == []
    assert runs_sweep_stale(now=now + timedelta(seconds=92)).requeued == [trace_id]
    assert runs_sweep_stale(now=now + timedelta(seconds=180)).requeued == []
    assert runs_sweep_stale(now=now + timedelta(seconds=193)).requeued == [trace_id]
    assert OrmQ.objects.count() == 4
    assert Trace.objects.get(pk=trace_id).run_request["sends"] == 4


def test_every_send_of_a_request_runs_it_once(
    api_client, integrator, llm, orm_broker, monkeypatch, django_capture_on_commit_callbacks
):
    """The broker delivers the original and the sweep's copy: the second claim finds nothing."""
    from django_q.signing import SignedPackage

    from traces.tasks import run_trace

    with django_capture_on_commit_callbacks(execute=True):
        trace_id = start(api_client(integrator))
    runs_sweep_stale(now=timezone.now() + timedelta(seconds=31))
    tasks = [SignedPackage.loads(row.payload) for row in OrmQ.objects.order_by("id")]
    assert [t["args"][0] for t in tasks] == [trace_id, trace_id]

    llm.script("scripted", [Reply(text="once")])
    monkeypatch.setattr(Conf, "SYNC", True)  # a worker runs the whole run in the task
    for task in tasks:
        run_trace(*task["args"])
    trace = Trace.objects.get(pk=trace_id)
    assert (trace.status, trace.result_summary, trace.run_token) == (TraceStatus.COMPLETED, "once", 2)
    assert len(llm.requests_for("scripted")) == 1


def test_stopping_a_queued_run_drops_its_request(
    api_client, integrator, llm, orm_broker, django_capture_on_commit_callbacks
):
    client = api_client(integrator)
    with django_capture_on_commit_callbacks(execute=True):
        trace_id = start(client)
    assert client.post(f"/api/traces/{trace_id}/stop").status_code == 202
    trace = Trace.objects.get(pk=trace_id)
    assert (trace.status, trace.run_request) == (TraceStatus.STOPPED, None)
    assert runs_sweep_stale(now=timezone.now() + timedelta(hours=1)).requeued == []


def test_failed_resends_during_an_outage_do_not_grow_the_wait(integrator, monkeypatch, orm_broker):
    now = timezone.now()
    trace = Trace.objects.create(
        task="t",
        owner=integrator,
        status=TraceStatus.QUEUED,
        run_token=1,
        run_request={
            "task": "traces.tasks.run_trace",
            "args": ["x", [], {}],
            "task_name": "run x",
            "sends": 1,
        },
        queued_at=now,
    )
    monkeypatch.setattr(Conf, "ORM", "no-such-database")  # the broker is down
    for n in range(1, 5):  # four tries, each one base interval (30 s) after the last
        assert runs_sweep_stale(now=now + timedelta(seconds=31 * n)).requeued == []
        trace.refresh_from_db()
        assert trace.run_request["sends"] == 1 and trace.status == TraceStatus.QUEUED
    monkeypatch.setattr(Conf, "ORM", "default")  # back: sent at the next base interval
    assert runs_sweep_stale(now=now + timedelta(seconds=31 * 5)).requeued == [trace.trace_id]
    assert OrmQ.objects.count() == 1
    trace.refresh_from_db()
    assert trace.run_request["sends"] == 2


def _trace_writes(queries: Any) -> list[str]:
    return [
        q["sql"]
        for q in queries
        if q["sql"].startswith(('INSERT INTO "traces_trace"', 'UPDATE "traces_trace"'))
    ]


def test_a_start_and_a_continue_store_the_request_in_their_one_write_of_the_trace(
    api_client, integrator, llm, monkeypatch, django_capture_on_commit_callbacks, inline_worker
):
    """The reservation and the worker's request are one statement: the insert of a new
    trace, the compare-and-swap of a continued one (a second UPDATE cost every start a
    round trip)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = api_client(integrator)
    llm.script("scripted", [Reply(text="hi")])
    with inline_worker():  # the run is sent (and run) after the request's transaction
        with CaptureQueriesContext(connection) as started:
            trace_id = start(client)
    writes = _trace_writes(started.captured_queries)
    assert len(writes) == 1 and writes[0].startswith("INSERT") and "run_request" in writes[0]
    trace = Trace.objects.get(pk=trace_id)
    assert (trace.status, trace.result_summary, trace.run_request) == (TraceStatus.COMPLETED, "hi", None)
    token = trace.run_token

    monkeypatch.setattr(Conf, "SYNC", False)  # django-q2's ORM broker: a sent task is an OrmQ row
    monkeypatch.setattr(Conf, "ORM", "default")
    with django_capture_on_commit_callbacks(execute=True):
        with CaptureQueriesContext(connection) as continued:
            again = {"messages": [{"role": "user", "content": "again"}]}
            response = client.post(f"/api/traces/{trace_id}/run", again, format="json")
    assert response.status_code == 202, response.content
    writes = _trace_writes(continued.captured_queries)
    assert len(writes) == 1 and writes[0].startswith("UPDATE") and "run_request" in writes[0]
    trace.refresh_from_db()
    assert (trace.status, trace.run_token) == (TraceStatus.QUEUED, token + 1)
    assert trace.run_request is not None and trace.run_request["args"][2]["reserved_token"] == token + 1
    assert trace.queued_at is not None and OrmQ.objects.count() == 1


@needs_redis
def test_sends_share_one_redis_connection_and_it_reconnects_after_an_outage(tmp_path, monkeypatch):
    """django-q2 makes a broker, and so a Redis client and connection, per `async_task`
    unless given one: the process keeps one (`queue._broker`)."""
    import redis as redis_py

    from traces.process_local import PerProcess
    from traces.services import queue

    server = Redis(tmp_path)
    server.start()
    try:
        monkeypatch.setattr(Conf, "SYNC", False)
        monkeypatch.setattr(Conf, "ORM", None)
        monkeypatch.setattr(Conf, "REDIS", server.url)
        monkeypatch.setattr(queue, "_broker", PerProcess(queue._make_broker))
        request = {"task": "traces.tasks.run_trace", "args": ["t-1"], "task_name": "run t-1"}
        look = redis_py.from_url(server.url)
        assert queue.send("t-1", request)
        opened = look.info("stats")["total_connections_received"]
        assert all(queue.send("t-1", request) for _ in range(20))
        assert look.llen(f"django_q:{Conf.CLUSTER_NAME}:q") == 21
        assert look.info("stats")["total_connections_received"] == opened  # no connection per send

        server.kill()
        assert queue.send("t-1", request) is False  # logged; the sweep sends it again
        server.start()  # same port, same data
        assert queue.send("t-1", request) is True
        assert redis_py.from_url(server.url).llen(f"django_q:{Conf.CLUSTER_NAME}:q") == 22
    finally:
        server.kill()
