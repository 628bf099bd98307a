"""The wait watcher's lease renewal (traces/runner/waitwatch.py:_beat): one UPDATE for
every waiting run of the process, each row renewed only while its run still holds it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.factories import make_trace
from traces.models import Trace
from traces.runner.waitwatch import _beat

pytestmark = pytest.mark.django_db


def test_one_update_renews_the_leases_still_held_and_no_other(integrator):
    old = timezone.now() - timedelta(minutes=5)
    traces = [make_trace(integrator, status="running", run_token=3, heartbeat_at=old) for _ in range(4)]
    held, lost, other = traces[:2], traces[2], traces[3]

    with CaptureQueriesContext(connection) as queries:
        _beat([(t.pk, 3) for t in held] + [(lost.pk, 2)])  # another run claimed `lost` (token 3 now)
    assert len(queries) == 1

    beats = dict(Trace.objects.values_list("pk", "heartbeat_at"))
    assert all(beats[t.pk] > old for t in held)
    assert beats[lost.pk] == old and beats[other.pk] == old
