"""Handing runs to workers so that the database alone can hand them over again (W5).

A run request is accepted in one transaction: the trace becomes `queued` with a
fresh `run_token`, and the task and arguments a worker needs go into
`Trace.run_request`. Only after that commits is the task sent to the broker
(`send_on_commit`). Nothing is lost when the broker is:

- down when we send: the send fails, is logged, and the request stays accepted
  (the API answers 201/202, the trace reads `queued`);
- lost a task it had (a Redis broker delivers at most once; a killed cluster's
  prefetched tasks are gone);

in both cases `requeue_unclaimed` (called by the sweep) finds the trace still
`queued` after AGENT_QUEUE_REQUEUE_SECONDS and sends the stored request again,
waiting twice as long before each further resend (at most
AGENT_QUEUE_REQUEUE_MAX_SECONDS; a send the broker refused does not count, so
after a broker outage the wait is one base interval at most). A duplicate delivery is harmless: the worker
claims exactly the reserved token (traces/runner/store.py:trace_claim), so
the second claim finds nothing and does nothing. The run's first commit clears
`run_request` (not the claim: a worker that dies between the two leaves the sweep the
request to send again, traces/services/sweep.py).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.utils import timezone

from traces.models import Trace, TraceStatus
from traces.process_local import PerProcess

logger = logging.getLogger(__name__)


def run_request(task: str, args: list[Any], *, task_name: str) -> dict[str, Any]:
    """What a worker needs to run a reserved trace, as `Trace.run_request` stores it.

    The caller writes it with the reservation, in one statement (`trace_start` inserts
    it with the trace, `_reserve` sets it with the status), and calls `send_on_commit`.
    """
    return {"task": task, "args": _plain(args), "task_name": task_name, "sends": 1}


def send_on_commit(trace_id: str, request: dict[str, Any]) -> None:
    """Send the stored request to the broker once the caller's transaction commits."""
    transaction.on_commit(lambda: send(trace_id, request))


def send(trace_id: str, request: dict[str, Any]) -> bool:
    """Give the stored request to the broker; False (logged) when the broker refused it."""
    from django_q.tasks import async_task

    try:
        # save=False: a run's success is its trace; django-q's monitor would otherwise
        # re-read every kept Success row (save_limit) for each finished task (issue 18).
        async_task(
            request["task"],
            *request["args"],
            task_name=request["task_name"],
            save=False,
            broker=_broker.get(),
        )
    except Exception as exc:  # any broker failure: the request is safe in the database
        logger.warning(
            "could not queue the run of trace %s (%s: %s); it stays queued and the sweep sends it again",
            trace_id,
            type(exc).__name__,
            exc,
        )
        return False
    return True


def _make_broker() -> Any:
    from django_q.brokers import get_broker

    return get_broker()


# The process's broker: django-q2's `async_task` otherwise makes one per call, and a
# Redis broker's new client opened a new connection per send (a start cost daphne a
# TCP connect to Redis). redis-py's pool is thread-safe and reconnects by itself; the
# ORM broker is stateless. A forked worker makes its own.
_broker = PerProcess(_make_broker)


def requeue_unclaimed(*, now: datetime | None = None) -> list[str]:
    """Send again every queued request no worker claimed in time; returns the trace ids sent."""
    now = now or timezone.now()
    base = settings.AGENT_QUEUE_REQUEUE_SECONDS
    cap = settings.AGENT_QUEUE_REQUEUE_MAX_SECONDS
    candidates = Trace.objects.filter(
        status=TraceStatus.QUEUED,
        run_request__isnull=False,
        queued_at__lt=now - timedelta(seconds=base),
    ).values_list("pk", "run_token", "queued_at", "run_request")
    sent = []
    for trace_id, token, queued_at, request in candidates:
        if queued_at is None or not isinstance(request, dict):
            continue
        sends = int(request.get("sends", 1))
        if queued_at > now - timedelta(seconds=min(cap, base * 2 ** (sends - 1))):
            continue  # backing off: sent again recently
        again = {**request, "sends": sends + 1}
        # Compare-and-swap on what we saw: of concurrent sweeps, one sends.
        taken = Trace.objects.filter(
            pk=trace_id, status=TraceStatus.QUEUED, run_token=token, queued_at=queued_at
        ).update(run_request=again, queued_at=now)
        if not taken:
            continue
        if send(trace_id, again):
            sent.append(trace_id)
        else:
            # Not delivered: the wait does not grow, so an outage's end is noticed within
            # one base interval, not after a wait doubled by every failed try.
            Trace.objects.filter(
                pk=trace_id, status=TraceStatus.QUEUED, run_token=token, queued_at=now
            ).update(run_request=request)
    if sent:
        logger.warning("queued runs sent to the broker again (not claimed in time): %s", sent)
    return sent


def _plain(args: list[Any]) -> list[Any]:
    """The arguments as stored JSON gives them back (tuples become lists, dates strings)."""
    import json

    return json.loads(json.dumps(args, cls=DjangoJSONEncoder))
