"""django-q2 tasks: thin wrappers that re-read state and call the runner (W1).

Enqueued by traces.services after the request's transaction commits; a worker
runs them, never a request.
"""

from __future__ import annotations

import logging
from typing import Any

from django.utils import timezone

from traces.models import Trace, TraceStatus
from traces.runner import AgentRunner, LeaseLost, RunConfig, RunConflict, RunError
from traces.services.sweep import runs_sweep_stale

logger = logging.getLogger(__name__)


def run_trace(
    trace_id: str, messages: list[dict[str, Any]], config_dict: dict[str, Any]
) -> dict[str, Any] | None:
    """Run the reserved trace `trace_id` to its end; returns the run's result.

    A duplicate delivery, or one whose reservation was stopped before it started,
    finds the reservation gone (RunConflict) and does nothing. A run refused at
    preparation (the request was valid when queued but no longer is) gives the
    reservation back with the reason, so the trace does not stay 'running'.
    """
    config = RunConfig(**config_dict)
    try:
        result = AgentRunner().run_result(messages, config)
    except (RunConflict, LeaseLost) as exc:
        logger.info("run of trace %s skipped (duplicate or superseded delivery): %s", trace_id, exc)
        return None
    except RunError as exc:
        logger.warning("run of trace %s refused: %s", trace_id, exc)
        _give_back_reservation(trace_id, config, str(exc))
        return None
    return result.as_dict()


def _give_back_reservation(trace_id: str, config: RunConfig, reason: str) -> None:
    """End a reservation no worker claimed: back to its old status, or failed with the reason."""
    if config.reserved_token is None:
        return
    Trace.objects.filter(
        pk=trace_id, status=TraceStatus.RUNNING, heartbeat_at__isnull=True, run_token=config.reserved_token
    ).update(
        status=config.reserved_from or TraceStatus.FAILED,
        error_message=None if config.reserved_from else reason[:2000],
        completed_at=timezone.now(),
        updated_at=timezone.now(),
    )


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


def on_worker_start(sender: Any = None, proc_name: str = "", **kwargs: Any) -> None:
    """django-q2's post_spawn: each worker process sweeps once before taking tasks.

    So runs of a cluster that was killed are resumed as soon as a cluster starts
    again, without waiting for the schedule. Never fails the worker's start.
    """
    try:
        ensure_sweep_schedule()
        sweep_stale_runs()
    except Exception:
        logger.exception("stale-run sweep at worker start (%s) failed", proc_name)
