"""Traces read as A2A tasks (traces/a2a_protocol): states, history, listing, message routing.

On the ORM (SQLite and PostgreSQL); the protocol end to end is tests/e2e/test_a2a_server.py.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import (
    ContentTypeNotSupportedError,
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from django.utils import timezone

from tests.factories import make_trace
from traces.a2a_protocol import listing, send, tasks
from traces.collaboration.humans import HUMAN
from traces.models import InboxMessage, Trace, TraceStatus
from traces.runner.config import STEP_LIMIT_PREFIX

pytestmark = pytest.mark.django_db
S = pb.TaskState

CASES = [
    ({"status": TraceStatus.QUEUED}, False, S.TASK_STATE_SUBMITTED),
    ({"status": TraceStatus.RUNNING}, False, S.TASK_STATE_WORKING),
    ({"status": TraceStatus.WAITING}, True, S.TASK_STATE_INPUT_REQUIRED),
    ({"status": TraceStatus.WAITING}, False, S.TASK_STATE_AUTH_REQUIRED),
    (
        {"status": TraceStatus.STOPPED, "error_message": f"{STEP_LIMIT_PREFIX} 5 steps"},
        False,
        S.TASK_STATE_INPUT_REQUIRED,
    ),
    ({"status": TraceStatus.STOPPED}, False, S.TASK_STATE_CANCELED),
    ({"status": TraceStatus.COMPLETED}, False, S.TASK_STATE_COMPLETED),
    ({"status": TraceStatus.FAILED}, False, S.TASK_STATE_FAILED),
]


def _trace(owner: Any, fields: dict[str, Any], asking: bool) -> Trace:
    trace = make_trace(owner, **fields)
    if asking:
        make_trace(
            owner,
            parent_trace=trace,
            agent_type=HUMAN,
            status=TraceStatus.WAITING,
            task="Which region?",
        )
    return trace


def test_each_trace_status_maps_to_one_task_state_and_the_sql_filter_agrees(integrator):
    made = [(_trace(integrator, fields, asking), expected) for fields, asking, expected in CASES]
    roots = Trace.objects.filter(parent_trace__isnull=True)
    for trace, expected in made:
        assert tasks.task_state(trace) == expected, trace.status
    for state in {expected for _, expected in made} | {S.TASK_STATE_REJECTED}:
        wanted = {t.trace_id for t, expected in made if expected == state}
        assert set(tasks.traces_in_state(roots, state).values_list("pk", flat=True)) == wanted, S.Name(state)


def test_input_required_says_the_question_and_the_task_carries_history_and_answer(integrator):
    trace = _trace(integrator, {"status": TraceStatus.WAITING}, asking=True)
    assert tasks.task_status(trace).message.parts[0].text == "Which region?"
    done = make_trace(
        integrator,
        messages=[("user", "add 2 and 2"), ("assistant", "4")],
        result_summary='{"sum": 4}',
    )
    task = tasks.task_of(done, history_length=1)
    assert [m.parts[0].text for m in task.history] == ["4"]
    (answer,) = task.artifacts
    assert answer.parts[0].text == '{"sum": 4}'
    assert answer.parts[1].data.struct_value.fields["sum"].number_value == 4  # structured: a data part


def test_list_tasks_pages_most_recently_updated_first_and_refuses_a_forged_token(integrator, stranger):
    base = timezone.now()
    made = [make_trace(integrator, updated_at=base + timedelta(seconds=n)) for n in range(5)]
    make_trace(stranger)
    seen, token = [], ""
    while True:
        page = listing.tasks_list(user=integrator, request=pb.ListTasksRequest(page_size=2, page_token=token))
        assert page.total_size == 5
        seen.extend(t.id for t in page.tasks)
        token = page.next_page_token
        if not token:
            break
    assert seen == [t.trace_id for t in reversed(made)]
    with pytest.raises(InvalidParamsError):
        listing.tasks_list(user=integrator, request=pb.ListTasksRequest(page_token="not-ours"))
    with pytest.raises(InvalidParamsError):
        listing.tasks_list(user=integrator, request=pb.ListTasksRequest(page_size=101))


def _request(
    *parts: pb.Part, task_id: str = "", role: int = pb.Role.ROLE_USER, **meta: Any
) -> pb.SendMessageRequest:
    message = pb.Message(message_id=str(uuid.uuid4()), role=role, parts=list(parts), task_id=task_id)
    request = pb.SendMessageRequest(message=message)
    if meta:
        request.metadata.update(meta)
    return request


def test_send_refuses_files_empty_messages_agent_roles_and_unknown_skills(integrator):
    with pytest.raises(ContentTypeNotSupportedError):
        send.message_send(
            user=integrator, request=_request(pb.Part(raw=b"%PDF", media_type="application/pdf"))
        )
    with pytest.raises(InvalidParamsError):
        send.message_send(user=integrator, request=_request(pb.Part(text="  ")))
    with pytest.raises(InvalidParamsError):
        send.message_send(user=integrator, request=_request(pb.Part(text="hi"), role=pb.Role.ROLE_AGENT))
    with pytest.raises(InvalidParamsError, match="unknown skill 'painter'"):
        send.message_send(user=integrator, request=_request(pb.Part(text="hi"), skill="painter"))
    assert not Trace.objects.exists()


def test_send_to_a_task_routes_by_its_state(integrator, stranger):
    running = make_trace(integrator, status=TraceStatus.RUNNING)
    trace, _ = send.message_send(
        user=integrator, request=_request(pb.Part(text="also this"), task_id=running.pk)
    )
    (inbox,) = InboxMessage.objects.filter(to_trace=running)
    assert inbox.content == "also this" and inbox.from_agent_id == "a2a:integrator"
    done = make_trace(integrator)
    with pytest.raises(UnsupportedOperationError):
        send.message_send(user=integrator, request=_request(pb.Part(text="more"), task_id=done.pk))
    with pytest.raises(TaskNotFoundError):
        send.message_send(user=stranger, request=_request(pb.Part(text="hi"), task_id=running.pk))


def test_cancel_of_a_waiting_task_stops_it_its_question_and_its_pending_approval(integrator):
    from traces.a2a_protocol.handler import _cancel
    from traces.collaboration.humans import human_answer
    from traces.models import Approval, ApprovalStatus, TraceEvent
    from traces.runner import RunConflict

    parent = _trace(integrator, {"status": TraceStatus.WAITING}, asking=True)
    question = Trace.objects.get(parent_trace=parent)
    approval = Approval.objects.create(trace=parent, tool_call_id="c1", message_sequence=1, tool_name="bash")
    task = _cancel(user=integrator, trace_id=parent.pk)
    assert task.status.state == S.TASK_STATE_CANCELED
    question.refresh_from_db()
    approval.refresh_from_db()
    assert question.status == TraceStatus.STOPPED and approval.status == ApprovalStatus.DENIED
    assert TraceEvent.objects.filter(trace=parent, type="stopped").count() == 1
    with pytest.raises(RunConflict):
        human_answer(user=integrator, trace_id=question.pk, answer="too late")
    with pytest.raises(TaskNotCancelableError):
        _cancel(user=integrator, trace_id=parent.pk)


def test_workspace_files_are_file_parts_within_the_limits(integrator, settings, tmp_path):
    from traces.runner.tool_api import workspace_for

    settings.AGENT_WORKSPACE_ROOT = str(tmp_path)
    settings.AGENT_A2A_MAX_FILE_BYTES = 100
    trace = make_trace(integrator, result_summary="wrote it")
    assert tasks.workspace_files(trace) == [] and not any(tmp_path.iterdir())  # a read makes no directory
    workspace = workspace_for(trace.trace_id)
    (workspace / "notes").mkdir()
    (workspace / "notes" / "plan.md").write_text("# plan")
    (workspace / "big.bin").write_bytes(b"x" * 101)
    (answer, files) = tasks.task_of(trace).artifacts
    assert answer.artifact_id == "answer" and files.artifact_id == "workspace"
    (part,) = files.parts
    assert (part.filename, part.raw, part.media_type) == ("notes/plan.md", b"# plan", "text/markdown")
