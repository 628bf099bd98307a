"""The sweep every AGENT_SWEEP_SECONDS in a worker process (traces/sweeper.py, W5):
a queued run nobody claimed is sent to the broker again without waiting for the
minute schedule; the real django-q2 ORM broker receives it."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone
from django_q.models import OrmQ

from tests.factories import make_user
from traces import sweeper
from traces.models import Trace, TraceStatus
from traces.services.runs import RUN_TASK


@pytest.mark.django_db(transaction=True)
def test_the_sweeper_sends_an_unclaimed_queued_run_again_and_stops(settings):
    settings.AGENT_SWEEP_SECONDS = 0.05
    settings.AGENT_QUEUE_REQUEUE_SECONDS = 1
    long_ago = timezone.now() - timedelta(minutes=5)
    request = {"task": RUN_TASK, "args": ["x", [], {}], "task_name": "run x", "sends": 1}
    trace = Trace.objects.create(
        trace_id=str(uuid.uuid4()),
        task="count the files",
        status=TraceStatus.QUEUED,
        owner=make_user("integrator"),
        model="openai/scripted",
        run_token=1,
        run_request=request,
        queued_at=long_ago,
        created_at=long_ago,
        updated_at=long_ago,
    )
    request["args"][0] = trace.trace_id
    Trace.objects.filter(pk=trace.pk).update(run_request=request)
    assert sweeper.start() is not None
    try:
        deadline = time.monotonic() + 60
        while Trace.objects.get(pk=trace.pk).run_request["sends"] < 2:
            assert time.monotonic() < deadline, "the sweeper did not send the run again"
            time.sleep(0.05)
    finally:
        sweeper.stop()
    assert "sweeper" not in [t.name for t in threading.enumerate()]
    trace.refresh_from_db()
    assert trace.status == TraceStatus.QUEUED and trace.run_token == 1  # still the same reservation
    assert OrmQ.objects.count() >= 1  # the broker has it


def test_a_zero_interval_turns_the_sweeper_off(settings):
    settings.AGENT_SWEEP_SECONDS = 0
    assert sweeper.start() is None
