"""django-q2 tasks: thin wrappers that re-read state and call the runner (W1).

Enqueued by traces.services after the request's transaction commits; a worker
runs them, never a request.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings

from agentsite import heap
from traces import sweeper
from traces.runhost import FULL, reservation_touch, run_host, run_in_this_thread
from traces.runner import RunConfig
from traces.services.queue import send
from traces.services.runs import _run_request
from traces.services.sweep import runs_sweep_stale

logger = logging.getLogger(__name__)


def run_trace(trace_id: str, messages: list[dict[str, Any]], config_dict: dict[str, Any]) -> str:
    """Hand the reserved trace `trace_id` to this process's run host; returns what came of it.

    Returns once the run has claimed its trace (it goes on in its own thread,
    traces/runhost.py) or ended at once (a duplicate delivery does nothing, a
    refused run gives its reservation back). While the process is full it waits
    for a slot, so the worker takes no further task; after AGENT_SLOT_WAIT_SECONDS
    it queues the run again, still reserved, for a process with room to take, and
    waits for a slot to free before it returns (so it takes no task it cannot start,
    in all at most half the task timeout: django-q2 never kills a waiting worker).
    django-q2's sync mode (tests, `Q_CLUSTER["sync"]`) runs the whole run here.
    """
    from django_q.conf import Conf

    config = RunConfig(**config_dict)
    if Conf.SYNC:
        return run_in_this_thread(trace_id, messages, config)
    host, most = run_host(), settings.Q_CLUSTER["timeout"] / 2
    wait = min(settings.AGENT_SLOT_WAIT_SECONDS, most)
    outcome = host.start(trace_id, messages, config, wait=wait)
    if outcome == FULL:
        outcome = _queue_again(trace_id, messages, config)
        # Still full: take no further task until a slot frees, but hold none meanwhile,
        # so the run just queued goes to a process with room.
        host.wait_for_room(most - wait)
    return outcome


def _queue_again(trace_id: str, messages: list[dict[str, Any]], config: RunConfig) -> str:
    """The process stayed full: back to the broker, the reservation marked as still queued.

    Sent like any queued request (traces/services/queue.py:send): a broker that
    refuses it leaves the run queued for the sweep to send again.
    """
    if not reservation_touch(trace_id=trace_id, config=config):
        return "skipped"  # stopped or claimed meanwhile: nothing to queue
    if send(trace_id, _run_request(trace_id, messages, config)):
        logger.info("run of trace %s queued again: this worker stayed full", trace_id)
    return "requeued"


SWEEP_TASK = "traces.tasks.sweep_stale_runs"
SWEEP_SCHEDULE_NAME = "traces: sweep stale runs"


def sweep_stale_runs() -> dict[str, list[str]]:
    """Scheduled (every minute) and at every worker start: resume runs whose worker died (W5)."""

    return runs_sweep_stale().as_dict()


def ensure_sweep_schedule() -> None:
    """Create the django-q2 schedule of the sweep once (every minute, django-q2's finest step)."""
    from django_q.models import Schedule

    if not Schedule.objects.filter(name=SWEEP_SCHEDULE_NAME).exists():
        Schedule.objects.create(
            name=SWEEP_SCHEDULE_NAME,
            func=SWEEP_TASK,
            schedule_type=Schedule.MINUTES,
            minutes=1,
            repeats=-1,
        )
    # Workers starting together may each have created one: keep the first.
    extra = Schedule.objects.filter(name=SWEEP_SCHEDULE_NAME).order_by("pk").values_list("pk", flat=True)[1:]
    Schedule.objects.filter(pk__in=list(extra)).delete()


PRUNE_TASK = "traces.tasks.prune_old_traces"
PRUNE_SCHEDULE_NAME = "traces: prune old traces"


def prune_old_traces() -> dict[str, int]:
    """Scheduled daily when AGENT_RETENTION_DAYS is set: delete finished traces older than that."""
    from datetime import timedelta

    from traces.services.delete import traces_prune

    summary = traces_prune(older_than=timedelta(days=settings.AGENT_RETENTION_DAYS))
    logger.info(
        "pruned %d traces older than %s days: %s",
        len(summary.trace_ids),
        settings.AGENT_RETENTION_DAYS,
        summary.as_dict(),
    )
    return {"roots": len(summary.trace_ids), **summary.as_dict()}


def ensure_prune_schedule() -> None:
    """The daily prune's django-q2 schedule while AGENT_RETENTION_DAYS is set; none otherwise."""
    from django_q.models import Schedule

    schedules = Schedule.objects.filter(name=PRUNE_SCHEDULE_NAME)
    if not settings.AGENT_RETENTION_DAYS:
        schedules.delete()
        return
    if not schedules.exists():
        Schedule.objects.create(
            name=PRUNE_SCHEDULE_NAME, func=PRUNE_TASK, schedule_type=Schedule.DAILY, repeats=-1
        )
    extra = schedules.order_by("pk").values_list("pk", flat=True)[1:]
    Schedule.objects.filter(pk__in=list(extra)).delete()


def on_worker_start(sender: Any = None, proc_name: str = "", **kwargs: Any) -> None:
    """django-q2's post_spawn: each worker process sweeps once before taking tasks.

    So runs of a cluster that was killed are resumed as soon as a cluster starts
    again, without waiting for the schedule. Never fails the worker's start.
    """
    try:
        ensure_sweep_schedule()
        ensure_prune_schedule()
        sweep_stale_runs()
    except Exception:
        logger.exception("stale-run sweep at worker start (%s) failed", proc_name)
    sweeper.start()  # and every AGENT_SWEEP_SECONDS from now on
    heap.settle()  # what this process made at its start, out of full collections' way
    heap.defer_full_collections()  # to when its runs are done (RunHost._run)
