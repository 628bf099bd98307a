"""Stopping traces from outside the runner: a running or queued run (R5), a waiting one.

Re-exported by `traces/services/runs.py`, beside the start and continue they undo.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from traces import events as event_bus
from traces.models import ACTIVE_STATUSES, Approval, ApprovalStatus, Trace, TraceStatus
from traces.runner import RunConflict
from traces.runner.store import trace_request_stop
from traces.selectors import trace_visible_or_404


def trace_stop(*, user: Any, trace_id: str) -> Trace:
    """Stop a running or queued trace (R5).

    A run a worker holds is flagged and exits at its next checkpoint (within
    AGENT_STOP_POLL_SECONDS even during a model call). A run still queued is
    stopped here at once; its task then finds the reservation gone and does
    nothing. Raises TraceNotFound (404), RunConflict (409) when not running.
    """
    trace = trace_visible_or_404(user=user, trace_id=trace_id)
    if trace.status not in ACTIVE_STATUSES:
        raise RunConflict(f"trace {trace.trace_id!r} is not running (status {trace.status}); nothing to stop")
    if trace.status == TraceStatus.QUEUED and _cancel_queued(trace):
        trace.refresh_from_db()
        return trace
    if not trace_request_stop(trace_id=trace.trace_id):
        trace.refresh_from_db()
        raise RunConflict(
            f"trace {trace.trace_id!r} finished (status {trace.status}) before it could be stopped"
        )
    trace.refresh_from_db()
    return trace


def trace_stop_waiting(*, user: Any, trace_id: str, reason: str) -> Trace:
    """Stop a waiting trace (an A2A CancelTask of an input- or auth-required task).

    Nothing runs, so nothing is flagged: the trace and its waiting children end
    `stopped` here (a `stopped` event each), their open questions can no longer be
    answered and their pending approvals are denied with `reason`. Raises
    TraceNotFound (404), RunConflict (409) when the trace is not waiting.
    """
    trace = trace_visible_or_404(user=user, trace_id=trace_id)
    now = timezone.now()
    with transaction.atomic():
        waiting = [
            trace.pk,
            *Trace.objects.filter(parent_trace_id=trace.pk, status=TraceStatus.WAITING).values_list(
                "pk", flat=True
            ),
        ]
        for pk in waiting:
            stopped = Trace.objects.filter(pk=pk, status=TraceStatus.WAITING).update(
                status=TraceStatus.STOPPED,
                completed_at=now,
                updated_at=now,
                error_message=reason,
                last_event_id=F("last_event_id") + 1,
            )
            if not stopped and pk == trace.pk:
                raise RunConflict(
                    f"trace {trace.trace_id!r} is not waiting (status {trace.status}); nothing to stop"
                )
            if stopped:
                head = Trace.objects.values_list("head_sequence", flat=True).get(pk=pk)
                event_bus.event_append(
                    pk,
                    "stopped",
                    {
                        "status": TraceStatus.STOPPED,
                        "result": None,
                        "error": reason,
                        "head_sequence": head,
                        "reason": reason,
                    },
                    id_taken=True,
                )
        Approval.objects.filter(trace_id__in=waiting, status=ApprovalStatus.PENDING).update(
            status=ApprovalStatus.DENIED, decided_at=now, decision_note=reason
        )
    trace.refresh_from_db()
    return trace


def _cancel_queued(trace: Trace) -> bool:
    """Stop a reservation no worker has claimed yet; False if a worker just did."""
    now = timezone.now()
    with transaction.atomic():
        cancelled = Trace.objects.filter(
            pk=trace.pk, status=TraceStatus.QUEUED, run_token=trace.run_token
        ).update(
            status=TraceStatus.STOPPED,
            run_request=None,
            completed_at=now,
            updated_at=now,
            last_event_id=F("last_event_id") + 1,
        )
        if not cancelled:
            return False
        head = Trace.objects.values_list("head_sequence", flat=True).get(pk=trace.pk)
        event_bus.event_append(
            trace.pk,
            "stopped",
            {
                "status": TraceStatus.STOPPED,
                "result": None,
                "error": None,
                "head_sequence": head,
                "reason": "stopped before a worker started the run",
            },
            id_taken=True,
        )
    return True
