"""SendMessage onto traces: which existing service a message goes to (sync; the handler
calls these through database_sync_to_async).

- no task id: a new trace (`services.runs.trace_start`), the preset named by the
  request's `metadata.skill` (or `metadata.preset`) among the presets offered to
  A2A callers;
- a task waiting on an ask_human question (input-required): the message answers
  it (`collaboration.humans.human_answer`) and the trace resumes;
- a task paused at its step limit (input-required): the message continues it
  (`services.runs.trace_continue`);
- a submitted or working task, or one waiting for an expert's approval
  (auth-required): the message goes to its inbox (S4,
  `collaboration.inbox.inbox_receive`), read by the check_messages tool;
- a task in a terminal state: UnsupportedOperationError (A2A: a terminal task
  cannot be restarted; send a new task in the same context).
"""

from __future__ import annotations

import json
from typing import Any

from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import (
    ContentTypeNotSupportedError,
    InvalidParamsError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from django.conf import settings
from django.db.models import Q
from google.protobuf.json_format import MessageToDict

from memory.presets import preset_names
from traces.a2a_protocol import tasks
from traces.collaboration.humans import human_answer
from traces.collaboration.inbox import inbox_receive
from traces.models import Trace
from traces.runner import InvalidRun, RunConflict, TraceNotFound
from traces.selectors import traces_visible_to
from traces.services.runs import trace_continue, trace_start

MAX_TEXT_CHARS = 100_000


def offered_presets() -> list[str]:
    """The presets A2A callers may pick as skills: AGENT_A2A_PRESETS, else every preset."""
    known = preset_names()
    wanted = settings.AGENT_A2A_PRESETS
    return [name for name in wanted if name in known] if wanted else known


def message_text(message: pb.Message) -> str:
    """The text a message carries: its text parts, and its data parts as JSON.

    ContentTypeNotSupportedError for file parts (raw bytes or URLs): a trace's
    input is text; InvalidParamsError for a message with nothing in it."""
    texts = []
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            texts.append(part.text)
        elif kind == "data":
            texts.append(json.dumps(MessageToDict(part)["data"], ensure_ascii=False))
        else:
            raise ContentTypeNotSupportedError(
                message=f"{kind} parts are not accepted (media type {part.media_type or 'unknown'}); "
                "send text or data parts"
            )
    text = "\n\n".join(t for t in texts if t.strip())
    if not text:
        raise InvalidParamsError(message="the message has no text or data part with content")
    if len(text) > MAX_TEXT_CHARS:
        raise InvalidParamsError(message=f"the message is longer than {MAX_TEXT_CHARS} characters")
    return text


def message_send(*, user: Any, request: pb.SendMessageRequest) -> tuple[Trace, int]:
    """Deliver a SendMessage request; the trace it went to and its last event id
    before the delivery (a stream of the task's updates starts after it)."""
    message = request.message
    if message.role != pb.Role.ROLE_USER:
        raise InvalidParamsError(message="a message sent to an agent must have role ROLE_USER")
    text = message_text(message)
    try:
        if not message.task_id:
            return _start(user, request, text), 0
        return _deliver(user, message, text)
    except TraceNotFound as exc:
        raise TaskNotFoundError(message=str(exc)) from None
    except InvalidRun as exc:
        raise InvalidParamsError(message=str(exc)) from None
    except RunConflict as exc:
        raise UnsupportedOperationError(message=str(exc)) from None


def _metadata(request: pb.SendMessageRequest) -> dict[str, Any]:
    found = MessageToDict(request.message.metadata) if request.message.metadata.fields else {}
    if request.metadata.fields:
        found.update(MessageToDict(request.metadata))
    return found


def _start(user: Any, request: pb.SendMessageRequest, text: str) -> Trace:
    meta = _metadata(request)
    preset = meta.get("skill") or meta.get("preset") or "default"
    offered = offered_presets()
    if not isinstance(preset, str) or preset not in offered:
        raise InvalidParamsError(message=f"unknown skill {preset!r}; this agent offers: {', '.join(offered)}")
    context_id = request.message.context_id
    return trace_start(
        user=user,
        messages=[*_earlier_conversation(user, context_id), {"role": "user", "content": text}],
        preset=preset,
        name=f"A2A from {user.get_username()}: {' '.join(text.split())[:60]}",
        context={
            "a2a": {"caller": user.get_username(), **({"context_id": context_id} if context_id else {})}
        },
    )


def _earlier_conversation(user: Any, context_id: str) -> list[dict[str, Any]]:
    """A new task in an existing context starts from that context's latest task's
    conversation (the user's and the agent's texts): a finished task takes no more
    messages (A2A), so a follow-up is a new task that still remembers."""
    if not context_id:
        return []
    latest = (
        traces_visible_to(user)
        .filter(parent_trace__isnull=True)
        .filter(
            Q(context__a2a__context_id=context_id) | Q(pk=context_id, context__a2a__context_id__isnull=True)
        )
        .order_by("-created_at")
        .first()
    )
    if latest is None:
        return []
    return [
        {"role": "user" if m.role == pb.Role.ROLE_USER else "assistant", "content": m.parts[0].text}
        for m in tasks.history(latest, None)
    ]


def _deliver(user: Any, message: pb.Message, text: str) -> tuple[Trace, int]:
    trace = tasks.visible_task(user, message.task_id)
    if trace is None:
        raise TaskNotFoundError(message=f"task {message.task_id!r} does not exist")
    if message.context_id and message.context_id != tasks.context_id_of(trace):
        raise InvalidParamsError(
            message=f"task {trace.trace_id!r} belongs to context {tasks.context_id_of(trace)!r}, "
            f"not {message.context_id!r}"
        )
    cursor = trace.last_event_id
    question = tasks.open_question(trace.trace_id)
    state = tasks.task_state(trace, question=question)
    if state in tasks.TERMINAL_STATES:
        raise UnsupportedOperationError(
            message=f"task {trace.trace_id!r} is {pb.TaskState.Name(state)} and cannot take more messages; "
            "start a new task (it may carry the same contextId)"
        )
    if question is not None:
        human_answer(user=user, trace_id=question.trace_id, answer=text)
    elif state == pb.TaskState.TASK_STATE_INPUT_REQUIRED:  # paused at its step limit
        trace_continue(user=user, trace_id=trace.trace_id, messages=[{"role": "user", "content": text}])
    else:
        inbox_receive(
            user=user,
            to_trace_id=trace.trace_id,
            from_agent_id=f"a2a:{user.get_username()}",
            content=text,
            conversation_id=tasks.context_id_of(trace),
        )
    trace.refresh_from_db()
    return trace, cursor
