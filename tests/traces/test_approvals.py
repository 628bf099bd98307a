"""The confirm gate (G5): risky calls wait for an expert, durably, and resume on a decision."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.scripted_llm import Reply, ToolCall
from traces.models import Approval, Message, Trace, TraceEvent
from traces.runner import InvalidRun, NotAllowed, RunConfig, RunConflict
from traces.services.approvals import approval_decide

pytestmark = pytest.mark.django_db


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def start_waiting_run(runner: Any, llm: Any, owner: Any, **config: Any) -> Trace:
    llm.script(
        "scripted",
        [
            Reply(
                tool_calls=[
                    ToolCall("list_files", {}),
                    ToolCall("write", {"path": "out.txt", "content": "model text"}),
                ]
            ),
            Reply(text="written"),
        ],
    )
    result = runner.run_result(
        user("write out.txt"), RunConfig(confirm_policy="ask-risky", owner_id=owner.pk, **config)
    )
    return Trace.objects.get(pk=result.trace_id)


def test_a_risky_call_waits_durably_with_an_approval_bound_to_the_exact_call(runner, llm, integrator):
    trace = start_waiting_run(runner, llm, integrator)

    assert trace.status == "waiting" and trace.run_owner == "" and trace.completed_at is None
    approval = Approval.objects.get(trace=trace)
    assistant = Message.objects.get(trace=trace, role="assistant")
    write_call = assistant.tool_calls[1]
    assert (approval.tool_call_id, approval.tool_name) == (write_call["id"], "write")
    assert approval.arguments == {"path": "out.txt", "content": "model text"}
    assert approval.status == "pending" and approval.message_sequence == assistant.sequence
    tools_run = list(Message.objects.filter(trace=trace, role="tool").values_list("name", flat=True))
    assert tools_run == ["list_files"]  # the safe call ran; the risky one waits
    types = list(TraceEvent.objects.filter(trace=trace).values_list("type", flat=True))
    assert "confirm_required" in types and types[-1] == "waiting"


def test_approving_with_edited_arguments_resumes_the_run_in_a_worker(
    runner, llm, integrator, expert, inline_worker, workspace_root
):
    trace = start_waiting_run(runner, llm, integrator)
    approval = Approval.objects.get(trace=trace)

    with inline_worker():
        approval_decide(
            user=expert,
            trace_id=trace.trace_id,
            approval_id=approval.pk,
            decision="approve",
            arguments={"path": "out.txt", "content": "expert text"},
            note="softened",
        )

    trace.refresh_from_db()
    approval.refresh_from_db()
    assert trace.status == "completed" and trace.result_summary == "written"
    assert (workspace_root / trace.trace_id / "out.txt").read_text() == "expert text"
    assert (approval.status, approval.decided_by, approval.decision_note) == ("approved", expert, "softened")
    assert approval.decided_at is not None
    response = TraceEvent.objects.get(trace=trace, type="confirm_response")
    assert (
        response.payload["decided_by"] == "expert"
        and response.payload["edited_arguments"]["content"] == "expert text"
    )
    results = Message.objects.filter(trace=trace, role="tool").order_by("sequence")
    assert [m.tool_call_id for m in results] == [
        c["id"]
        for c in Message.objects.get(trace=trace, role="assistant", tool_calls__isnull=False).tool_calls
    ]


def test_a_denied_call_gets_a_result_saying_so_and_the_run_goes_on(
    runner, llm, integrator, expert, inline_worker, workspace_root
):
    trace = start_waiting_run(runner, llm, integrator)
    approval = Approval.objects.get(trace=trace)

    with inline_worker():
        approval_decide(
            user=expert,
            trace_id=trace.trace_id,
            approval_id=approval.pk,
            decision="deny",
            note="no writes today",
        )

    trace.refresh_from_db()
    assert trace.status == "completed"
    denied = Message.objects.get(trace=trace, tool_call_id=approval.tool_call_id)
    assert (
        "An expert denied this call. Reason: no writes today" in denied.content
        and denied.kind == "tool_error"
    )
    assert not (workspace_root / trace.trace_id / "out.txt").exists()
    with pytest.raises(RunConflict, match="already decided"):
        approval_decide(user=expert, trace_id=trace.trace_id, approval_id=approval.pk, decision="approve")


def test_a_waiting_trace_refuses_new_messages_until_its_calls_are_decided(runner, llm, integrator):
    trace = start_waiting_run(runner, llm, integrator)
    with pytest.raises(RunConflict, match="waiting on tool calls"):
        runner.run_result(user("hurry up"), RunConfig(trace_id=trace.trace_id))


def test_auto_policy_and_sub_agents_allowed_to_auto_approve_do_not_ask(
    runner, llm, integrator, workspace_root, settings
):
    settings.AGENT_CONFIRM_POLICY = "ask-risky"
    settings.AGENT_SUBAGENT_AUTO_APPROVE = True
    parent = Trace.objects.create(trace_id="parent-1", status="completed")
    llm.script(
        "scripted",
        [Reply(tool_calls=[ToolCall("write", {"path": "c.txt", "content": "child"})]), Reply(text="ok")],
    )
    child = runner.run_result(
        user("child work"), RunConfig(parent_trace_id=parent.trace_id, new_trace_id="parent-1@delegate-1")
    )
    assert child.status == "completed" and not Approval.objects.exists()

    llm.script(
        "scripted",
        [Reply(tool_calls=[ToolCall("write", {"path": "d.txt", "content": "x"})]), Reply(text="ok")],
    )
    plain = runner.run_result(user("auto"), RunConfig(confirm_policy="auto"))
    assert plain.status == "completed" and not Approval.objects.exists()


def test_approval_api_lists_and_decides_with_clear_errors(
    runner, llm, integrator, expert, stranger, api_client, inline_worker
):
    trace = start_waiting_run(runner, llm, integrator)
    approval = Approval.objects.get(trace=trace)
    base = f"/api/traces/{trace.trace_id}/approvals"

    listed = api_client(integrator).get(base)
    assert listed.status_code == 200 and listed.json()[0]["arguments"]["path"] == "out.txt"
    assert api_client(stranger).get(base).status_code == 404
    assert api_client().get(base).status_code in (401, 403)
    bad = api_client(expert).post(f"{base}/{approval.pk}", {"decision": "maybe"}, format="json")
    assert bad.status_code == 400 and bad.json()["error"]
    edit_on_deny = api_client(expert).post(
        f"{base}/{approval.pk}", {"decision": "deny", "arguments": {"a": 1}}, format="json"
    )
    assert edit_on_deny.status_code == 400 and "approve" in edit_on_deny.json()["error"]
    assert api_client(expert).post(f"{base}/99999", {"decision": "approve"}, format="json").status_code == 404
    assert (
        api_client(stranger).post(f"{base}/{approval.pk}", {"decision": "approve"}, format="json").status_code
        == 404
    )

    with inline_worker():
        decided = api_client(expert).post(f"{base}/{approval.pk}", {"decision": "approve"}, format="json")
    assert decided.status_code == 200 and decided.json()["status"] == "approved"
    assert decided.json()["decided_by"] == "expert"
    again = api_client(expert).post(f"{base}/{approval.pk}", {"decision": "deny"}, format="json")
    assert again.status_code == 409
    assert Trace.objects.get(pk=trace.trace_id).status == "completed"
    assert json.loads(json.dumps(api_client(expert).get(base).json()))[0]["status"] == "approved"


@pytest.mark.parametrize(
    ("approvers", "who", "expected"),
    [
        ("staff", "expert", 200),
        ("staff", "integrator", 403),  # the owner may see the call, not decide it
        ("staff", "stranger", 404),
        ("owner", "expert", 200),
        ("owner", "integrator", 200),
        ("owner", "stranger", 404),
    ],
)
def test_who_may_decide_an_approval(
    runner, llm, integrator, expert, stranger, api_client, settings, approvers, who, expected
):
    settings.AGENT_APPROVERS = approvers
    trace = start_waiting_run(runner, llm, integrator)
    approval = Approval.objects.get(trace=trace)
    user = {"expert": expert, "integrator": integrator, "stranger": stranger}[who]

    answer = api_client(user).post(
        f"/api/traces/{trace.trace_id}/approvals/{approval.pk}",
        {"decision": "deny", "note": "no"},
        format="json",
    )

    assert answer.status_code == expected, answer.content
    approval.refresh_from_db()
    if expected == 200:
        assert (approval.status, approval.decided_by, approval.decision_note) == ("denied", user, "no")
        assert approval.decided_at is not None
    else:
        assert (approval.status, approval.decided_by) == ("pending", None)
        assert answer.json()["code"] == ("not_allowed" if expected == 403 else "trace_not_found")


def test_an_inactive_staff_user_may_not_decide(runner, llm, integrator, expert):
    trace = start_waiting_run(runner, llm, integrator)
    approval = Approval.objects.get(trace=trace)
    expert.is_active = False
    expert.save()
    with pytest.raises(NotAllowed):
        approval_decide(user=expert, trace_id=trace.trace_id, approval_id=approval.pk, decision="approve")


def test_a_sub_agents_risky_call_waits_for_an_expert_and_runs_after_approval(
    runner, llm, integrator, expert, api_client, inline_worker, workspace_root
):
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("agent", {"task": "write out.txt"})]),
            Reply(tool_calls=[ToolCall("write", {"path": "out.txt", "content": "from the child"})]),
            Reply(text="written"),
            Reply(text="done"),
        ],
    )
    first = runner.run_result(
        user("delegate the write"), RunConfig(confirm_policy="ask-risky", owner_id=integrator.pk)
    )

    assert first.status == "waiting"  # the parent waits durably on its child's approval
    child = Trace.objects.get(parent_trace_id=first.trace_id)
    approval = Approval.objects.get()
    assert (child.status, approval.trace_id, approval.tool_name) == ("waiting", child.trace_id, "write")
    written = workspace_root / first.trace_id / "out.txt"
    assert not written.exists()
    assert TraceEvent.objects.filter(trace_id=first.trace_id, type="subagent_waiting").exists()
    base = f"/api/traces/{first.trace_id}/approvals"
    listed = api_client(expert).get(base).json()
    assert [(a["approval_id"], a["trace_id"]) for a in listed] == [(approval.pk, child.trace_id)]
    assert (
        api_client(integrator)
        .post(f"{base}/{approval.pk}", {"decision": "approve"}, format="json")
        .status_code
        == 403
    )

    with inline_worker():
        decided = api_client(expert).post(f"{base}/{approval.pk}", {"decision": "approve"}, format="json")

    assert decided.status_code == 200
    parent = Trace.objects.get(pk=first.trace_id)
    child.refresh_from_db()
    assert (parent.status, parent.result_summary, child.status) == ("completed", "done", "completed")
    assert written.read_text() == "from the child"
    assert Trace.objects.filter(parent_trace_id=first.trace_id).count() == 1  # the same child ran on


def test_under_ask_risky_bash_asks_only_for_commands_matching_a_risk_rule(
    runner, llm, integrator, expert, inline_worker, workspace_root, sandboxed
):
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("bash", {"command": "ls"})]),
            Reply(tool_calls=[ToolCall("bash", {"command": "rm -rf build"})]),
            Reply(tool_calls=[ToolCall("bash", {"command": "rm -f notes.txt"})]),
            Reply(text="cleaned"),
            Reply(tool_calls=[ToolCall("bash", {"command": "rm -f again.txt"})]),
        ],
    )
    first = runner.run_result(user("clean up"), RunConfig(confirm_policy="ask-risky", owner_id=integrator.pk))

    assert first.status == "waiting"
    approval = Approval.objects.get()  # `ls` ran without asking
    assert approval.arguments == {"command": "rm -rf build"}
    assert "'deletion'" in approval.question and "rm -rf build" in approval.question
    asked = TraceEvent.objects.get(trace_id=first.trace_id, type="confirm_required").payload
    assert asked["question"] == approval.question
    ls_result = Message.objects.filter(trace_id=first.trace_id, role="tool").first()
    assert ls_result.kind == "" and "(exit 0)" in ls_result.content

    with inline_worker():
        approval_decide(
            user=expert, trace_id=first.trace_id, approval_id=approval.pk, decision="approve", scope="run"
        )

    trace = Trace.objects.get(pk=first.trace_id)
    assert (trace.status, trace.result_summary) == ("completed", "cleaned")
    assert Approval.objects.count() == 1  # the second rm ran on the "rest of the run" approval
    approval.refresh_from_db()
    assert (approval.scope, approval.decided_by) == ("run", expert)
    responses = TraceEvent.objects.filter(trace_id=first.trace_id, type="confirm_response")
    let_through = [e.payload for e in responses if e.payload["tool_call_id"] != approval.tool_call_id]
    assert len(let_through) == 1 and let_through[0]["scope"] == "run"
    assert [e.payload["approved"] for e in responses] == [True, True]  # seed 002's boolean
    assert let_through[0]["approval_id"] == approval.pk
    assert "approved_tools" not in trace.context  # it ended with the run

    runner.run_result(user("once more"), RunConfig(trace_id=first.trace_id))
    assert Trace.objects.get(pk=first.trace_id).status == "waiting"  # a new run asks again
    assert Approval.objects.count() == 2


def test_rest_of_run_scope_only_with_an_approval(runner, llm, integrator, expert):
    trace = start_waiting_run(runner, llm, integrator)
    approval = Approval.objects.get(trace=trace)
    with pytest.raises(InvalidRun, match="scope"):
        approval_decide(
            user=expert, trace_id=trace.trace_id, approval_id=approval.pk, decision="deny", scope="run"
        )
    with pytest.raises(InvalidRun, match="scope"):
        approval_decide(
            user=expert, trace_id=trace.trace_id, approval_id=approval.pk, decision="approve", scope="all"
        )


def test_the_api_approves_for_the_rest_of_the_run_and_shows_the_question(
    runner, llm, integrator, expert, api_client
):
    trace = start_waiting_run(runner, llm, integrator)
    approval = Approval.objects.get(trace=trace)
    base = f"/api/traces/{trace.trace_id}/approvals"
    listed = api_client(expert).get(base).json()[0]
    assert (listed["trace_id"], listed["question"], listed["scope"]) == (trace.trace_id, "", "call")

    bad = api_client(expert).post(
        f"{base}/{approval.pk}", {"decision": "deny", "scope": "run"}, format="json"
    )
    assert bad.status_code == 400 and "scope" in bad.json()["error"]
    decided = api_client(expert).post(
        f"{base}/{approval.pk}", {"decision": "approve", "scope": "run"}, format="json"
    )
    assert decided.status_code == 200 and decided.json()["scope"] == "run"
    assert Trace.objects.get(pk=trace.trace_id).context["approved_tools"] == {"write": approval.pk}


def test_a_call_with_invalid_arguments_is_not_put_to_an_expert(runner, llm, integrator):
    llm.script(
        "scripted",
        [Reply(tool_calls=[ToolCall("write", {"path": ["not", "a", "string"], "content": "x"})]), "gave up"],
    )
    result = runner.run_result(user("write"), RunConfig(confirm_policy="ask-risky", owner_id=integrator.pk))

    assert result.status == "completed" and not Approval.objects.exists()
    error = Message.objects.get(trace_id=result.trace_id, role="tool")
    assert error.kind == "tool_error" and "path" in error.content
