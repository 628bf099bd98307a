"""Human requests (S3): `ask_human` creates a human-type child trace and the parent waits.

The flow reuses the durable waiting of the confirm gate:

1. `ask_human` (tools/builtin/ask_human.py) creates the child (`agent_type`
   "human", status `waiting`, the question as its first message, the asking
   tool_call_id in its context) and asks the runner to suspend: the parent ends
   in `waiting`, its worker released, the call left open.
2. `human_answer` (API `POST /api/traces/{child}/answer`, the admin, the portal)
   records the answer on the child (message, result_summary, `completed`),
   marks the parent's collaborator completed and queues the parent to resume
   (`services.trace_continue` with no new messages).
3. The resumed run executes the still-open call again; `ask_human` finds the
   answered child for that tool_call_id and returns the answer as its result.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from traces import events as event_bus
from traces.collaboration.subtraces import collaborator_upsert
from traces.models import Approval, ApprovalStatus, Message, MessageKind, Trace, TraceStatus
from traces.runner import InvalidRun, RunConflict, RunError
from traces.selectors import trace_visible_or_404
from traces.services.runs import trace_continue

logger = logging.getLogger(__name__)

HUMAN = "human"
MAX_ANSWER_CHARS = 100_000


def human_request_for_call(*, parent_id: str, tool_call_id: str | None) -> Trace | None:
    if not tool_call_id:
        return None
    return (
        Trace.objects.filter(parent_trace_id=parent_id, agent_type=HUMAN, context__tool_call_id=tool_call_id)
        .order_by("created_at")
        .first()
    )


def human_request_create(
    *, parent: Trace, trace_id: str, goal_id: str | None, tool_call_id: str | None, question: str, to: str
) -> Trace:
    """The waiting child trace holding the question (one message, one event)."""
    now = timezone.now()
    with transaction.atomic():
        child = Trace.objects.create(
            trace_id=trace_id,
            name=f"ask {to}: {' '.join(question.split())[:60]}"[:200],
            task=question,
            agent_type=HUMAN,
            parent_trace_id=parent.trace_id,
            parent_goal_id=goal_id,
            status=TraceStatus.WAITING,
            owner_id=parent.owner_id,
            uid=parent.uid,
            context={"tool_call_id": tool_call_id, "to": to},
            last_sequence=1,
            head_sequence=1,
            total_messages=1,
            created_at=now,
            updated_at=now,
        )
        Message.objects.create(
            message_id=Message.make_id(child.trace_id, 1),
            trace=child,
            role="user",
            sequence=1,
            segment_start=1,
            content=question,
            description=question[:200],
            kind=MessageKind.INPUT,
            created_at=now,
        )
        event_bus.event_append(
            child.pk, "human_requested", {"question": question, "to": to, "parent_trace_id": parent.trace_id}
        )
    return child


def human_answer(*, user: Any, trace_id: str, answer: Any) -> Trace:
    """Record `user`'s answer to a waiting human request and resume the asking trace.

    Raises TraceNotFound (404) for a trace `user` may not see, InvalidRun (400)
    for an empty answer or a trace that is no human request, RunConflict (409)
    when it was already answered.
    """
    if not isinstance(answer, str) or not answer.strip():
        raise InvalidRun("answer must be a non-empty string")
    if len(answer) > MAX_ANSWER_CHARS:
        raise InvalidRun(f"answer is longer than {MAX_ANSWER_CHARS} characters")
    child = trace_visible_or_404(user=user, trace_id=trace_id)
    if child.agent_type != HUMAN:
        raise InvalidRun(f"trace {trace_id!r} is not a question to a human (ask_human); nothing to answer")
    now = timezone.now()
    who = user.get_username()
    with transaction.atomic():
        answered = Trace.objects.filter(pk=child.pk, status=TraceStatus.WAITING).update(
            status=TraceStatus.COMPLETED,
            result_summary=answer,
            completed_at=now,
            updated_at=now,
            last_sequence=F("last_sequence") + 1,
            head_sequence=F("last_sequence") + 1,
            total_messages=F("total_messages") + 1,
        )
        if not answered:
            child.refresh_from_db()
            raise RunConflict(f"trace {trace_id!r} is not waiting for an answer (status {child.status})")
        child.refresh_from_db()
        child.context = {**(child.context or {}), "answered_by": who}
        child.save(update_fields=["context"])
        Message.objects.create(
            message_id=Message.make_id(child.trace_id, child.head_sequence),
            trace=child,
            role="assistant",
            sequence=child.head_sequence,
            parent_sequence=child.head_sequence - 1,
            segment_start=child.head_sequence - 1,
            content=answer,
            description=f"answer from {who}: {answer[:150]}",
            created_at=now,
        )
        event_bus.event_append(child.pk, "human_answered", {"answered_by": who})
        event_bus.event_append(child.pk, "final", {"status": TraceStatus.COMPLETED, "result": answer})
        parent = _mark_collaborator_answered(child, who)
    if parent is not None:
        _resume_parent(user=user, parent=parent)
    child.refresh_from_db()
    return child


def _mark_collaborator_answered(child: Trace, who: str) -> Trace | None:
    """Caller holds a transaction. The waiting parent shows the human as completed at once."""

    parent = Trace.objects.select_for_update().filter(pk=child.parent_trace_id).first()
    if parent is None or parent.status == TraceStatus.RUNNING:
        return parent  # a run holds it: the resumed ask_human call updates it instead
    collaborator_upsert(
        parent, {"trace_id": child.trace_id, "status": TraceStatus.COMPLETED, "summary": f"{who} answered"}
    )
    Trace.objects.filter(pk=parent.pk, status=parent.status).update(context=parent.context)
    return parent


def _resume_parent(*, user: Any, parent: Trace) -> None:
    parent.refresh_from_db()
    if parent.status != TraceStatus.WAITING:
        return
    if Approval.objects.filter(trace=parent, status=ApprovalStatus.PENDING).exists():
        return  # an expert's decision is still due; that decision resumes it
    if Trace.objects.filter(parent_trace=parent, agent_type=HUMAN, status=TraceStatus.WAITING).exists():
        return  # another question of the same step is still open
    try:
        trace_continue(user=user, trace_id=parent.trace_id, messages=[])
    except RunError as exc:  # the answer is recorded; the parent resumes when next run
        logger.warning("answered, but could not resume %s: %s", parent.trace_id, exc)
