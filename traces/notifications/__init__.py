"""Notifications: people are told when a run waits for them, needs attention or fails.

`notify_run_ended` is called once per run end (traces/runner/loop.py:AgentRunner._finish,
after the final commit, while the run still holds its lease) and decides what to tell:

- `waiting_approval`: the run waits on calls an expert must decide (its own approvals
  and its sub-agents', G5);
- `waiting_answer`: it waits on a question to a human (ask_human, S3);
- `attention`: a guard failed the run and flagged it for an expert (a loop, G6);
- `failed`: it failed.

`AGENT_NOTIFY_EVENTS` picks the kinds a deployment sends (a loop's end is told as
`attention` when that is picked, else as `failed`). A sub-agent running inside its
parent's run tells nobody: its parent's run ends right after it (waiting on the
child's approval) or goes on with the child's error as a tool result.

Once per waiting state: what was told is written as a `notification` event on the
trace, with keys `approval:<id>` and `question:<human trace id>`, under the run's
lease. A later run that waits again on a call or question already told (a parent
resumed while another of its sub-agents still waits, a continue with the calls
undecided) finds those keys and tells only what is new, or nothing.

Delivery never holds the run: the event's transaction enqueues django-q2 tasks on
commit, one per webhook (`webhooks.py:deliver_webhook`, signed, retried) and one for
e-mail (`mail.py:deliver_email`). They get the payload and a digest naming the
webhook, then re-read the URL and the recipients, so no URL (which may carry a
token) or address sits in the task queue.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.urls import reverse
from django.utils import timezone

from traces import events as event_bus
from traces.models import Approval, ApprovalStatus, Trace, TraceEvent, TraceStatus
from traces.notifications.webhooks import webhook_targets

logger = logging.getLogger(__name__)

WEBHOOK_TASK = "traces.notifications.webhooks.deliver_webhook"
EMAIL_TASK = "traces.notifications.mail.deliver_email"
EVENT_TYPE = "notification"
REASON_CHARS = 200
QUESTION_CHARS = 4000
HUMAN = "human"  # traces/collaboration/humans.py:HUMAN (humans imports the runner, which imports this module)


def notify_run_ended(trace: Trace, status: str) -> None:
    """Tell people that `trace`'s run ended waiting for them, flagged or failed.

    Precondition: the run's final state is committed and its lease still held.
    Records what is told as a `notification` event and enqueues its delivery after
    that commits. Never raises: the run has ended, telling about it cannot fail it.
    """
    try:
        _notify(trace, status)
    except Exception:
        logger.exception("could not queue the notifications of trace %s", trace.trace_id)


def _notify(trace: Trace, status: str) -> None:
    if status not in (TraceStatus.WAITING, TraceStatus.FAILED) or not settings.AGENT_NOTIFY_EVENTS:
        return
    if (
        trace.parent_trace_id
        and Trace.objects.filter(pk=trace.parent_trace_id, status=TraceStatus.RUNNING).exists()
    ):
        return  # a sub-agent inside its parent's run: the parent's end is told
    webhooks = webhook_targets(trace.agent_type)
    if not webhooks and not settings.AGENT_NOTIFY_EMAIL:
        return
    notes = _waiting_notes(trace) if status == TraceStatus.WAITING else _failure_notes(trace)
    notes = [note for note in notes if note["kind"] in settings.AGENT_NOTIFY_EVENTS]
    if not notes:
        return
    with transaction.atomic():
        recorded = [_record(trace, note) for note in notes]
        payloads = [payload for payload in recorded if payload is not None]
        if len(payloads) < len(recorded):
            transaction.set_rollback(True)
            logger.info("trace %s: lease lost before its notifications were recorded", trace.trace_id)
            return
        transaction.on_commit(lambda: _enqueue(payloads, list(webhooks)))


def _waiting_notes(trace: Trace) -> list[dict[str, Any]]:
    """The approvals and questions `trace` waits on that no earlier notification told."""
    told = _told_keys(trace)
    mine_or_children = Q(trace_id=trace.trace_id) | Q(trace__trace_id__startswith=f"{trace.trace_id}@")
    approvals = [
        approval
        for approval in Approval.objects.filter(mine_or_children, status=ApprovalStatus.PENDING)
        .order_by("requested_at", "pk")
        .values("pk", "trace_id", "tool_name", "risk")
        if f"approval:{approval['pk']}" not in told
    ]
    questions = [
        question
        for question in Trace.objects.filter(
            parent_trace_id=trace.trace_id, agent_type=HUMAN, status=TraceStatus.WAITING
        )
        .order_by("created_at")
        .values("trace_id", "task")
        if f"question:{question['trace_id']}" not in told
    ]
    notes = []
    if approvals:
        notes.append(
            {
                "kind": "waiting_approval",
                "keys": [f"approval:{a['pk']}" for a in approvals],
                "approvals": [_approval_item(trace, a) for a in approvals],
            }
        )
    if questions:
        notes.append(
            {
                "kind": "waiting_answer",
                "keys": [f"question:{q['trace_id']}" for q in questions],
                "questions": [_question_item(q) for q in questions],
            }
        )
    return notes


def _failure_notes(trace: Trace) -> list[dict[str, Any]]:
    # `needs_attention` stays set on a trace once flagged; the guard that flags a run
    # fails it with the attention reason as its error, so equal texts mean "this run".
    flagged_now = trace.needs_attention and trace.error_message == trace.attention_reason
    kind = "attention" if flagged_now and "attention" in settings.AGENT_NOTIFY_EVENTS else "failed"
    # Only the first line, clipped: an error can quote a provider's answer or an
    # exception's text (model output, tool arguments). The rest stays behind the links.
    first_line = (trace.error_message or "").strip().split("\n", 1)[0]
    reason = first_line[:REASON_CHARS] + ("…" if len(first_line) > REASON_CHARS else "")
    return [{"kind": kind, "keys": [], "reason": reason or "the run failed"}]


def _told_keys(trace: Trace) -> set[str]:
    payloads = TraceEvent.objects.filter(trace_id=trace.trace_id, type=EVENT_TYPE).values_list(
        "payload", flat=True
    )
    return {key for payload in payloads for key in (payload or {}).get("keys", [])}


def _approval_item(trace: Trace, approval: Mapping[str, Any]) -> dict[str, Any]:
    """An approval as told: which call waits, never its arguments."""
    return {
        "approval_id": approval["pk"],
        "trace_id": approval["trace_id"],
        "tool": approval["tool_name"],
        "risk": approval["risk"],
        # decided through the waiting run's own trace, which lists its sub-agents' approvals
        "api": _link(reverse("traces-api:approval-decide", args=[trace.trace_id, approval["pk"]])),
    }


def _question_item(question: Mapping[str, Any]) -> dict[str, Any]:
    text = question["task"] or ""
    return {
        "trace_id": question["trace_id"],
        "question": text[:QUESTION_CHARS] + ("…" if len(text) > QUESTION_CHARS else ""),
        "portal": _link(reverse("portal:trace-detail", args=[question["trace_id"]])),
        "answer_api": _link(reverse("traces-api:trace-answer", args=[question["trace_id"]])),
    }


def _link(path: str) -> str:
    return f"{settings.AGENT_PUBLIC_URL}{path}"


def _record(trace: Trace, note: dict[str, Any]) -> dict[str, Any] | None:
    """Caller holds a transaction. The note's `notification` event, under the run's lease;
    the payload to deliver, or None when the lease is gone."""
    moved = Trace.objects.filter(pk=trace.pk, run_token=trace.run_token).update(
        last_event_id=F("last_event_id") + 1
    )
    if not moved:
        return None
    event = event_bus.event_append(
        trace.pk,
        EVENT_TYPE,
        lambda event_id: {"id": f"{trace.trace_id}:{event_id}", "kind": note["kind"], "keys": note["keys"]},
        id_taken=True,
    )
    trace.last_event_id = event.event_id
    payload = {
        "id": event.payload["id"],
        "kind": note["kind"],
        "trace_id": trace.trace_id,
        "status": str(trace.status),
        "agent_type": trace.agent_type,
        "created_at": timezone.now().isoformat(),
        "portal": _link(reverse("portal:trace-detail", args=[trace.trace_id])),
        "api": _link(reverse("traces-api:trace-detail", args=[trace.trace_id])),
        "approvals": note.get("approvals", []),
        "questions": note.get("questions", []),
        "reason": note.get("reason"),
    }
    return payload


def _enqueue(payloads: list[dict[str, Any]], webhooks: list[str]) -> None:
    from django_q.tasks import async_task

    for payload in payloads:
        name = f"notify {payload['id']} {payload['kind']}"
        for digest in webhooks:
            async_task(WEBHOOK_TASK, payload, digest, task_name=name)
        if settings.AGENT_NOTIFY_EMAIL:
            async_task(EMAIL_TASK, payload, task_name=name)
