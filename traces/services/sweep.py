"""The stale-run sweep: find runs whose worker died and carry them on (W5).

A run holds its lease by refreshing `Trace.heartbeat_at` at every commit, while a
model call is in flight (traces/runner/loop.py:_stopping) and while a tool runs
(RunStore.keep_alive). A trace still `running` whose heartbeat is older than
AGENT_LEASE_SECONDS lost its worker (SIGKILL, OOM, machine gone). The sweep
(traces/tasks.py:sweep_stale_runs, a django-q2 schedule and once per worker
start) decides from what was persisted:

- a stop was requested: the trace ends `stopped`;
- the main path ends with the assistant's final answer (the worker died between
  saving it and closing the run): the trace ends `completed` with that answer;
- the run was claimed but died before its first commit (its stored request is still
  there: the first commit clears it): the request is reserved and sent again, so the
  inputs, which only it holds, are not lost;
- nothing was saved yet and no request is left: `failed`, naming why;
- otherwise the trace is re-reserved (run_token CAS, exactly like a run request)
  and a continue run with no new messages is queued: the runner heals the tool
  calls left without a result (R6) and asks the model again. Messages already
  persisted are never rewritten, so nothing is lost or written twice.

Every outcome is a compare-and-swap on the token the sweep saw, so concurrent
sweeps (several workers, several machines) and a worker that comes back to life
cannot both act: the loser changes nothing. Reservations no worker claimed in
time (status queued) are sent to the broker again from their stored request
(traces/services/queue.py:requeue_unclaimed); only one still unclaimed after
AGENT_QUEUE_GRACE_SECONDS is ended `failed`, as lost.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from memory.services import experience_record_outcome
from traces import events as event_bus
from traces.goal_tree import GoalTree
from traces.models import Trace, TraceStatus, cost_state
from traces.notifications import notify_run_ended
from traces.runner import InvalidRun, RunConfig
from traces.runner.prepare import plan_existing, text_of
from traces.selectors import trace_main_path_for_run
from traces.services.queue import requeue_unclaimed, send_on_commit
from traces.services.runs import _run_request

logger = logging.getLogger(__name__)

END_EVENTS: dict[str, str] = {
    TraceStatus.COMPLETED: "final",
    TraceStatus.STOPPED: "stopped",
    TraceStatus.FAILED: "error",
}


@dataclass
class SweepReport:
    resumed: list[str] = field(default_factory=list)
    requeued: list[str] = field(default_factory=list)
    completed: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, list[str]]:
        return asdict(self)

    def __bool__(self) -> bool:
        return any(self.as_dict().values())


def runs_sweep_stale(*, now: datetime | None = None) -> SweepReport:
    """Recover every run whose worker stopped heartbeating; returns what was done to which trace."""
    now = now or timezone.now()
    stale_before = now - timedelta(seconds=settings.AGENT_LEASE_SECONDS)
    report = SweepReport()
    stale = Trace.objects.filter(status=TraceStatus.RUNNING, heartbeat_at__lt=stale_before)
    for trace_id, token in stale.values_list("pk", "run_token"):
        outcome = trace_recover(trace_id=trace_id, token=token, stale_before=stale_before)
        getattr(report, outcome).append(trace_id)
    lost_before = now - timedelta(seconds=settings.AGENT_QUEUE_GRACE_SECONDS)
    lost = Trace.objects.filter(status=TraceStatus.QUEUED, updated_at__lt=lost_before)
    for trace_id, token in lost.values_list("pk", "run_token"):
        reason = (
            f"the queued run was not picked up by any worker within {settings.AGENT_QUEUE_GRACE_SECONDS} s "
            "(lost by the task broker); start it again"
        )
        ended = _end(trace_id, token, None, TraceStatus.FAILED, error=reason)
        (report.failed if ended else report.skipped).append(trace_id)
    report.requeued = requeue_unclaimed(now=now)
    if report:
        logger.warning("stale-run sweep: %s", {k: v for k, v in report.as_dict().items() if v})
    return report


def trace_recover(*, trace_id: str, token: int, stale_before: datetime) -> str:
    """Recover one stale run seen with lease `token`; returns the SweepReport field it belongs in."""
    trace = Trace.objects.filter(
        pk=trace_id, status=TraceStatus.RUNNING, run_token=token, heartbeat_at__lt=stale_before
    ).first()
    if trace is None:
        return "skipped"  # recovered by another sweep, or its worker is alive after all
    seen = trace.heartbeat_at
    if trace.stop_requested:
        reason = "stop requested; the worker running it had died"
        return "stopped" if _end(trace_id, token, seen, TraceStatus.STOPPED, reason=reason) else "skipped"
    if (request := _request_again(trace.run_request, trace.run_token + 1)) is not None:
        reason = "the worker running this trace died before the run's first step was saved"
        return "resumed" if _reserve(trace, request, reason) else "skipped"
    path = trace_main_path_for_run(trace_id=trace_id, head_sequence=trace.head_sequence)
    if not path:
        error = "the worker died before the run's first step was saved; start the run again"
        return "failed" if _end(trace_id, token, seen, TraceStatus.FAILED, error=error) else "skipped"
    config = RunConfig(trace_id=trace_id, agent_type=trace.agent_type or "default", reserved_token=token + 1)
    try:
        plan_existing(trace, path, [], config, TraceStatus.RUNNING)
    except InvalidRun:
        last = path[-1]
        if last.role == "assistant" and not last.tool_calls:
            result = text_of(last.content)
            ended = _end(trace_id, token, seen, TraceStatus.COMPLETED, result=result)
            return "completed" if ended else "skipped"
        error = f"the worker died and the run cannot resume from message {last.sequence} ({last.role})"
        return "failed" if _end(trace_id, token, seen, TraceStatus.FAILED, error=error) else "skipped"
    reason = "the worker running this trace stopped heartbeating"
    return "resumed" if _reserve(trace, _run_request(trace.pk, [], config), reason) else "skipped"


def _request_again(stored: Any, token: int) -> dict[str, Any] | None:
    """A claimed run's stored request (`_run_request`'s: trace id, messages, config) made
    again for reservation `token`; None when there is none (the run's first commit cleared it)."""
    args = stored.get("args") if isinstance(stored, dict) else None
    if not (isinstance(args, list) and len(args) == 3 and isinstance(args[2], dict)):
        return None
    trace_id, messages, config = args
    return _run_request(trace_id, messages, RunConfig(**{**config, "reserved_token": token}))


def _reserve(trace: Trace, request: dict[str, Any], reason: str) -> bool:
    """Take the dead run's lease over as a reservation and queue `request`."""

    token = trace.run_token
    now = timezone.now()
    with transaction.atomic():
        reserved = Trace.objects.filter(
            pk=trace.pk, status=TraceStatus.RUNNING, run_token=token, heartbeat_at=trace.heartbeat_at
        ).update(
            status=TraceStatus.QUEUED,
            run_token=token + 1,
            run_owner="",
            heartbeat_at=None,
            updated_at=now,
            last_event_id=F("last_event_id") + 1,
            run_request=request,
            queued_at=now,
        )
        if not reserved:
            return False
        event_bus.event_append(
            trace.pk,
            "run_resumed",
            {
                "reason": reason,
                "previous_worker": trace.run_owner,
                "last_heartbeat": trace.heartbeat_at.isoformat() if trace.heartbeat_at else None,
                "head_sequence": trace.head_sequence,
            },
            id_taken=True,
        )
        send_on_commit(trace.pk, request)
    return True


def _record_outcome(trace_id: str, status: str) -> None:
    """M5 for a run whose worker died after its last step: counted once, with the end
    (the caller's transaction holds the trace row; the marker stops a second count)."""
    trace = Trace.objects.only("trace_id", "context").get(pk=trace_id)
    if experience_record_outcome(trace=trace, status=status):
        Trace.objects.filter(pk=trace_id).update(context=trace.context)


def _leave_goals_open(trace_id: str, status: str) -> None:
    """Mark the goals still open, as a run's own end does (goal_updated events)."""
    trace = Trace.objects.only("trace_id", "current_goal_id", "context").get(pk=trace_id)

    def emit(kind: str, payload: dict[str, Any]) -> None:
        event_bus.event_append(trace_id, kind, payload)

    tree = GoalTree.load(trace, emit=emit)
    tree.leave_open(status)
    tree.flush()


def _end(
    trace_id: str,
    token: int,
    heartbeat_at: datetime | None,
    status: str,
    *,
    result: str | None = None,
    error: str | None = None,
    reason: str | None = None,
) -> bool:
    """End a dead or lost run with `status` and its end event.

    Matches the lease exactly as the sweep saw it (token and heartbeat, None for a
    never-claimed reservation): False if anyone acted on the trace meanwhile.
    """
    now = timezone.now()
    match: dict[str, Any] = {"pk": trace_id, "run_token": token}
    if heartbeat_at is None:
        match["status"] = TraceStatus.QUEUED
    else:
        match.update(status=TraceStatus.RUNNING, heartbeat_at=heartbeat_at)
    with transaction.atomic():
        changes: dict[str, Any] = {
            "status": status,
            "run_owner": "",
            "run_request": None,
            "error_message": error,
            "completed_at": now,
            "updated_at": now,
        }
        if result is not None:
            changes["result_summary"] = result
        if not Trace.objects.filter(**match).update(**changes):
            return False
        if status in (TraceStatus.COMPLETED, TraceStatus.FAILED):
            _record_outcome(trace_id, status)
        # The row is ours until commit (the update's lock): goal events, then the end event.
        _leave_goals_open(trace_id, status)
        figures = Trace.objects.values("head_sequence", "total_tokens", "total_cost", "unpriced_calls")
        row: dict[str, Any] = dict(figures.get(pk=trace_id))
        row["cost_state"] = cost_state(row["total_cost"], row.pop("unpriced_calls")).value
        event_bus.event_append(
            trace_id,
            END_EVENTS[status],
            {"status": status, "result": result, "error": error, "reason": reason or error, **row},
        )
        if status == TraceStatus.FAILED:  # a run the sweep gives up on fails like any other
            notify_run_ended(Trace.objects.get(pk=trace_id), status)
    return True
