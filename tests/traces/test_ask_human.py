"""ask_human (S3): a human-type child trace, the parent waits durably and resumes on an answer."""

from __future__ import annotations

from typing import Any

import pytest

from tests.scripted_llm import Reply, ToolCall
from traces.models import Message, Trace, TraceEvent
from traces.runner import RunConfig

pytestmark = pytest.mark.django_db


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def ask_and_wait(runner: Any, llm: Any, owner: Any) -> tuple[Trace, Trace]:
    llm.script(
        "scripted",
        [
            Reply(
                tool_calls=[
                    ToolCall("ask_human", {"question": "Deploy to staging or prod?", "to": "ops lead"})
                ]
            ),
            lambda body: Reply(
                text="deploying: " + [m for m in body["messages"] if m["role"] == "tool"][-1]["content"]
            ),
        ],
    )
    result = runner.run_result(user("deploy the app"), RunConfig(owner_id=owner.pk))
    parent = Trace.objects.get(pk=result.trace_id)
    child = Trace.objects.get(parent_trace=parent)
    return parent, child


def test_ask_human_leaves_the_parent_waiting_with_a_human_child_and_no_worker(runner, llm, integrator):
    parent, child = ask_and_wait(runner, llm, integrator)

    assert parent.status == "waiting" and parent.run_owner == "" and parent.completed_at is None
    assert "@human-" in child.trace_id and child.agent_type == "human" and child.status == "waiting"
    assert child.task == "Deploy to staging or prod?" and child.owner_id == integrator.pk
    assert Message.objects.get(trace=child).content == "Deploy to staging or prod?"
    assert not Message.objects.filter(trace=parent, role="tool").exists()  # the call stays open
    (collaborator,) = parent.context["collaborators"]
    assert (collaborator["name"], collaborator["type"], collaborator["status"]) == (
        "ops lead",
        "human",
        "waiting",
    )
    assert TraceEvent.objects.filter(trace=parent).order_by("event_id").last().type == "waiting"


def test_an_answer_over_http_resumes_the_parent_and_becomes_the_tool_result(
    runner, llm, integrator, api_client, inline_worker
):
    parent, child = ask_and_wait(runner, llm, integrator)

    with inline_worker():
        response = api_client(integrator).post(
            f"/api/traces/{child.trace_id}/answer", {"answer": "staging"}, format="json"
        )
    assert response.status_code == 200, response.content
    assert response.json() == {
        "trace_id": child.trace_id,
        "status": "completed",
        "parent_trace_id": parent.trace_id,
        "answered_by": "integrator",
    }
    parent.refresh_from_db()
    child.refresh_from_db()
    assert child.status == "completed" and child.result_summary == "staging"
    assert [m.role for m in Message.objects.filter(trace=child).order_by("sequence")] == ["user", "assistant"]
    result = Message.objects.get(trace=parent, role="tool", name="ask_human")
    assert "staging" in result.content and "Answer from integrator" in result.content
    assert (
        parent.status == "completed"
        and parent.result_summary == "deploying: Answer from integrator\n\nstaging"
    )
    (collaborator,) = parent.context["collaborators"]
    assert collaborator["status"] == "completed"


def test_answers_are_checked(runner, llm, integrator, stranger, expert, api_client, inline_worker):
    parent, child = ask_and_wait(runner, llm, integrator)
    url = f"/api/traces/{child.trace_id}/answer"

    assert api_client().post(url, {"answer": "x"}, format="json").status_code == 401
    assert api_client(stranger).post(url, {"answer": "x"}, format="json").status_code == 404
    empty = api_client(integrator).post(url, {"answer": "  "}, format="json")
    assert empty.status_code == 400 and empty.json()["code"]
    not_human = api_client(integrator).post(
        f"/api/traces/{parent.trace_id}/answer", {"answer": "x"}, format="json"
    )
    assert not_human.status_code == 400 and "not a question to a human" in not_human.json()["error"]
    with inline_worker():
        assert api_client(expert).post(url, {"answer": "prod"}, format="json").status_code == 200
    again = api_client(expert).post(url, {"answer": "prod"}, format="json")
    assert again.status_code == 409 and again.json()["code"] == "run_conflict"


def test_an_expert_answers_in_the_admin_and_the_parent_resumes(
    runner, llm, integrator, client, inline_worker
):
    parent, child = ask_and_wait(runner, llm, integrator)
    admin_user = type(integrator).objects.create_superuser("admin", "admin@example.com", "pw-admin-123")
    client.force_login(admin_user)
    selected = {"action": "answer_questions", "_selected_action": [child.trace_id]}

    form = client.post("/admin/traces/trace/", selected)
    assert form.status_code == 200 and b"Deploy to staging or prod?" in form.content
    with inline_worker():
        done = client.post(
            "/admin/traces/trace/",
            {**selected, "apply": "1", f"answer-{child.trace_id}": "prod"},
            follow=True,
        )
    assert b"Answered 1 question(s)" in done.content
    parent.refresh_from_db()
    child.refresh_from_db()
    assert child.status == "completed" and child.context["answered_by"] == "admin"
    assert parent.status == "completed" and "prod" in parent.result_summary
    assert client.get("/admin/traces/inboxmessage/").status_code == 200


def test_under_ask_all_a_question_goes_to_the_human_without_an_approval_first(runner, llm, integrator):
    from traces.models import Approval

    llm.script("scripted", [Reply(tool_calls=[ToolCall("ask_human", {"question": "ok?"})])])
    result = runner.run_result(user("ask"), RunConfig(owner_id=integrator.pk, confirm_policy="ask-all"))

    assert result.status == "waiting" and not Approval.objects.exists()
    assert Trace.objects.get(parent_trace_id=result.trace_id).agent_type == "human"
