"""Traces seen as A2A tasks: the state mapping, history and artifacts (reads only).

A task is a trace (its id is the trace id); its context id is the one the caller
gave when it started the task (`trace.context["a2a"]["context_id"]`), else the
trace id. States:

| trace                                             | A2A task state  |
|---------------------------------------------------|-----------------|
| queued                                            | submitted       |
| running                                           | working         |
| waiting, an ask_human question open               | input-required  |
| waiting, only an expert's approval due            | auth-required   |
| stopped at its step limit (a continue goes on)    | input-required  |
| completed                                         | completed       |
| failed                                            | failed          |
| stopped                                           | canceled        |

`rejected` is never a trace state: input the server refuses is an A2A error
before any trace exists (traces/a2a_protocol/send.py).
"""

from __future__ import annotations

import json
import mimetypes
from typing import Any

from a2a.types import a2a_pb2 as pb
from django.conf import settings
from django.db.models import Exists, OuterRef, Q, QuerySet
from google.protobuf.struct_pb2 import Struct
from google.protobuf.timestamp_pb2 import Timestamp

from traces.collaboration.humans import HUMAN
from traces.models import Message, MessageKind, Trace, TraceStatus
from traces.runner.config import STEP_LIMIT_PREFIX, TraceNotFound
from traces.runner.prepare import text_of
from traces.runner.tool_api import workspace_path
from traces.selectors import trace_main_path, trace_visible_or_404

S = pb.TaskState
TERMINAL_STATES = (S.TASK_STATE_COMPLETED, S.TASK_STATE_FAILED, S.TASK_STATE_CANCELED, S.TASK_STATE_REJECTED)
INTERRUPTED_STATES = (S.TASK_STATE_INPUT_REQUIRED, S.TASK_STATE_AUTH_REQUIRED)
HISTORY_KINDS = (MessageKind.PLAIN, MessageKind.INPUT)


def visible_task(user: Any, task_id: str) -> Trace | None:
    """The trace of task `task_id` if `user` may see it (`traces/selectors.py:trace_visible_or_404`),
    else None: each A2A method answers a missing task in its own way (TaskNotFoundError, no task)."""
    try:
        return trace_visible_or_404(user=user, trace_id=task_id)
    except TraceNotFound:
        return None


def open_question(trace_id: str) -> Trace | None:
    """The waiting ask_human child of a trace, oldest first, if any."""
    return (
        Trace.objects.filter(parent_trace_id=trace_id, agent_type=HUMAN, status=TraceStatus.WAITING)
        .order_by("created_at")
        .first()
    )


def _step_limited(trace: Trace) -> bool:
    return trace.status == TraceStatus.STOPPED and (trace.error_message or "").startswith(STEP_LIMIT_PREFIX)


def task_state(trace: Trace, *, question: Trace | None = None) -> pb.TaskState:
    """The A2A state of `trace` (see the module doc); `question` saves a query when known."""
    status = trace.status
    if status == TraceStatus.WAITING:
        asked = question if question is not None else open_question(trace.trace_id)
        return S.TASK_STATE_INPUT_REQUIRED if asked is not None else S.TASK_STATE_AUTH_REQUIRED
    if _step_limited(trace):
        return S.TASK_STATE_INPUT_REQUIRED
    plain: dict[str, pb.TaskState] = {
        TraceStatus.QUEUED: S.TASK_STATE_SUBMITTED,
        TraceStatus.RUNNING: S.TASK_STATE_WORKING,
        TraceStatus.COMPLETED: S.TASK_STATE_COMPLETED,
        TraceStatus.FAILED: S.TASK_STATE_FAILED,
        TraceStatus.STOPPED: S.TASK_STATE_CANCELED,
    }
    return plain.get(status, S.TASK_STATE_UNSPECIFIED)


def traces_in_state(traces: QuerySet[Trace], state: pb.TaskState) -> QuerySet[Trace]:
    """`traces` filtered to one A2A state, in SQL (the inverse of `task_state`)."""
    asking = Exists(
        Trace.objects.filter(parent_trace_id=OuterRef("pk"), agent_type=HUMAN, status=TraceStatus.WAITING)
    )
    limited = Q(status=TraceStatus.STOPPED, error_message__startswith=STEP_LIMIT_PREFIX)
    if state == S.TASK_STATE_INPUT_REQUIRED:
        return traces.filter((Q(status=TraceStatus.WAITING) & Q(asking)) | limited)
    if state == S.TASK_STATE_AUTH_REQUIRED:
        return traces.filter(Q(status=TraceStatus.WAITING) & ~Q(asking))
    if state == S.TASK_STATE_CANCELED:
        return traces.filter(status=TraceStatus.STOPPED).exclude(limited)
    plain = {
        S.TASK_STATE_SUBMITTED: TraceStatus.QUEUED,
        S.TASK_STATE_WORKING: TraceStatus.RUNNING,
        S.TASK_STATE_COMPLETED: TraceStatus.COMPLETED,
        S.TASK_STATE_FAILED: TraceStatus.FAILED,
    }
    if state in plain:
        return traces.filter(status=plain[state])
    return traces.none()  # rejected: no trace is ever in it


def context_id_of(trace: Trace) -> str:
    return str(((trace.context or {}).get("a2a") or {}).get("context_id") or trace.trace_id)


def timestamp(trace: Trace) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(trace.updated_at)
    return stamp


def agent_message(trace: Trace, text: str, *, message_id: str) -> pb.Message:
    return pb.Message(
        message_id=message_id,
        context_id=context_id_of(trace),
        task_id=trace.trace_id,
        role=pb.Role.ROLE_AGENT,
        parts=[pb.Part(text=text)],
    )


def task_status(trace: Trace, *, question: Trace | None = None) -> pb.TaskStatus:
    """The status of the task with a message saying what it waits for or why it ended."""
    asked = question
    if trace.status == TraceStatus.WAITING and asked is None:
        asked = open_question(trace.trace_id)
    state = task_state(trace, question=asked)
    status = pb.TaskStatus(state=state, timestamp=timestamp(trace))
    text = _status_text(trace, state, asked)
    if text:
        status.message.CopyFrom(
            agent_message(trace, text, message_id=f"{trace.trace_id}:status:{trace.last_event_id}")
        )
    return status


def _status_text(trace: Trace, state: pb.TaskState, asked: Trace | None) -> str | None:
    if state == S.TASK_STATE_INPUT_REQUIRED and asked is not None:
        return asked.task or "a question is waiting for your answer"
    if state == S.TASK_STATE_INPUT_REQUIRED:
        return f"{trace.error_message}; send a message to go on"
    if state == S.TASK_STATE_AUTH_REQUIRED:
        return "waiting for an expert's approval in the agentsite portal"
    if state in (S.TASK_STATE_FAILED, S.TASK_STATE_CANCELED):
        return trace.error_message or None
    return None


def history(trace: Trace, limit: int | None) -> list[pb.Message]:
    """The conversation of the main path as A2A messages: user inputs and the agent's
    text replies (tool calls, tool results and injected context left out); the last
    `limit` of them (0 = none, None = all)."""
    if limit == 0:
        return []
    found = []
    for message in trace_main_path(trace_id=trace.trace_id):
        item = _history_message(trace, message)
        if item is not None:
            found.append(item)
    return found[-limit:] if limit else found


def _history_message(trace: Trace, message: Message) -> pb.Message | None:
    if message.role not in ("user", "assistant") or message.kind not in HISTORY_KINDS:
        return None
    text = text_of(message.content)
    if not text.strip():
        return None
    return pb.Message(
        message_id=message.message_id,
        context_id=context_id_of(trace),
        task_id=trace.trace_id,
        role=pb.Role.ROLE_USER if message.role == "user" else pb.Role.ROLE_AGENT,
        parts=[pb.Part(text=text)],
    )


def artifacts(trace: Trace) -> list[pb.Artifact]:
    """The final answer (a text part, and a data part when it is a JSON object or
    array) once the task completed, and the files of the run's workspace (each up
    to AGENT_A2A_MAX_FILE_BYTES, at most AGENT_A2A_MAX_FILES)."""
    found = []
    if trace.status == TraceStatus.COMPLETED and trace.result_summary:
        found.append(answer_artifact(trace))
    files = workspace_files(trace)
    if files:
        found.append(pb.Artifact(artifact_id="workspace", name="workspace files", parts=files))
    return found


def answer_artifact(trace: Trace) -> pb.Artifact:
    result = trace.result_summary or ""
    parts = [pb.Part(text=result, media_type="text/plain")]
    try:
        structured = json.loads(result)
    except ValueError:
        structured = None
    if isinstance(structured, dict | list):
        holder = Struct()
        holder.update({"value": structured})
        parts.append(pb.Part(data=holder.fields["value"], media_type="application/json"))
    return pb.Artifact(artifact_id="answer", name="answer", parts=parts)


def workspace_files(trace: Trace) -> list[pb.Part]:
    """File parts for the regular files of a root trace's workspace, smallest limits first."""
    if trace.parent_trace_id or trace.agent_type == HUMAN:
        return []
    directory = workspace_path(trace.trace_id)  # a read: no directory is made for it
    if not directory.is_dir():
        return []
    parts: list[pb.Part] = []
    for path in sorted(p for p in directory.rglob("*") if p.is_file() and not p.is_symlink()):
        if len(parts) >= settings.AGENT_A2A_MAX_FILES:
            break
        if path.stat().st_size > settings.AGENT_A2A_MAX_FILE_BYTES:
            continue
        name = path.relative_to(directory).as_posix()
        media_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
        parts.append(pb.Part(raw=path.read_bytes(), filename=name, media_type=media_type))
    return parts


def task_of(trace: Trace, *, history_length: int | None = None, with_artifacts: bool = True) -> pb.Task:
    """The A2A task of a trace. Caller checked that the user may see it."""
    task = pb.Task(id=trace.trace_id, context_id=context_id_of(trace), status=task_status(trace))
    task.history.extend(history(trace, history_length))
    if with_artifacts:
        task.artifacts.extend(artifacts(trace))
    caller = ((trace.context or {}).get("a2a") or {}).get("caller")
    task.metadata.update({"agentsite_status": trace.status, **({"caller": caller} if caller else {})})
    return task
