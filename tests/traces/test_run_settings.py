"""Run settings that hold (R1, R2): a run's effective settings are stored on the
trace and kept by every later run of it, however it is resumed."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from tests.scripted_llm import Reply, ToolCall
from traces.models import Approval, Trace, TraceEvent
from traces.runner import InvalidRun, RunConfig
from traces.services.approvals import approval_decide
from traces.services.sweep import runs_sweep_stale

pytestmark = pytest.mark.django_db

READ_ONLY = ["read", "list_files", "glob", "grep"]


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def offered(request: Any) -> list[str]:
    return sorted(t["function"]["name"] for t in request.body.get("tools") or [])


def test_a_new_run_stores_its_effective_settings(runner, llm):
    llm.script("scripted", ["ok"])

    result = runner.run_result(
        user("x"),
        RunConfig(name="n", tools=READ_ONLY, temperature=0.2, llm_params={"top_p": 0.5}, max_iterations=7),
    )

    stored = Trace.objects.get(pk=result.trace_id).run_settings
    assert sorted(stored["tools"]) == sorted(READ_ONLY)
    assert (stored["temperature"], stored["max_iterations"], stored["llm_params"]) == (0.2, 7, {"top_p": 0.5})
    assert stored["confirm_policy"] == "auto" and stored["enable_memory"] is True
    request = llm.requests_for("scripted")[0]
    assert (request.body["temperature"], request.body["top_p"]) == (0.2, 0.5)


def test_a_continue_keeps_the_restriction_and_the_temperature(runner, llm):
    llm.script("scripted", ["first", "second"])
    first = runner.run_result(user("x"), RunConfig(name="n", tools=READ_ONLY, temperature=0.2))

    runner.run_result(user("go on"), RunConfig(trace_id=first.trace_id))

    again = llm.requests_for("scripted")[1]
    assert offered(again) == sorted(READ_ONLY)
    assert again.body["temperature"] == 0.2
    assert not TraceEvent.objects.filter(trace_id=first.trace_id, type="settings_changed").exists()


def test_a_continue_that_changes_a_setting_says_so(runner, llm):
    llm.script("scripted", ["first", "second"])
    first = runner.run_result(user("x"), RunConfig(name="n", tools=READ_ONLY))

    runner.run_result(user("go on"), RunConfig(trace_id=first.trace_id, tools=["read"]))

    assert offered(llm.requests_for("scripted")[1]) == ["read"]
    changed = TraceEvent.objects.get(trace_id=first.trace_id, type="settings_changed").payload["changed"]
    assert changed["tools"]["to"] == ["read"]
    with pytest.raises(InvalidRun, match="nope"):
        runner.run_result(user("more"), RunConfig(trace_id=first.trace_id, tools=["nope"]))


def test_a_read_only_run_resumed_after_an_approval_is_still_read_only(
    runner, llm, integrator, expert, inline_worker
):
    llm.script(
        "scripted",
        [Reply(tool_calls=[ToolCall("list_files", {})]), "done"],
    )
    waiting = runner.run_result(
        user("look"), RunConfig(name="n", tools=READ_ONLY, confirm_policy="ask-all", owner_id=integrator.pk)
    )
    assert waiting.status == "waiting"
    approval = Approval.objects.get(trace_id=waiting.trace_id)

    with inline_worker():
        approval_decide(user=expert, trace_id=waiting.trace_id, approval_id=approval.pk, decision="approve")

    trace = Trace.objects.get(pk=waiting.trace_id)
    assert trace.status == "completed"
    assert offered(llm.requests_for("scripted")[1]) == sorted(READ_ONLY)
    assert trace.run_settings["confirm_policy"] == "ask-all"


def test_a_read_only_run_resumed_by_the_sweep_is_still_read_only(runner, llm, inline_worker):
    llm.script("scripted", [Reply(tool_calls=[ToolCall("list_files", {})]), "done"])
    first = runner.run_result(user("look"), RunConfig(name="n", tools=READ_ONLY, max_iterations=1))
    assert first.status == "stopped"  # the step limit: a tool call made, no answer yet
    # As if the worker running it had died mid-run:
    Trace.objects.filter(pk=first.trace_id).update(
        status="running", heartbeat_at=timezone.now() - timedelta(hours=1)
    )

    with inline_worker():
        report = runs_sweep_stale()

    assert report.resumed == [first.trace_id]
    assert Trace.objects.get(pk=first.trace_id).status == "completed"
    assert offered(llm.requests_for("scripted")[1]) == sorted(READ_ONLY)


def test_a_trace_stored_before_settings_were_kept_runs_with_its_presets(runner, llm):
    llm.script("scripted", ["first", "second"])
    first = runner.run_result(user("x"), RunConfig(name="n"))
    Trace.objects.filter(pk=first.trace_id).update(run_settings={})

    runner.run_result(user("go on"), RunConfig(trace_id=first.trace_id))

    assert "write" in offered(llm.requests_for("scripted")[1])  # the default preset's tools
    assert Trace.objects.get(pk=first.trace_id).run_settings["tools"]


def test_a_runs_network_setting_reaches_its_sandboxed_commands(runner, llm, sandboxed):
    import socket

    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    probe = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected || echo refused"
    try:
        llm.script("scripted", [Reply(tool_calls=[ToolCall("bash", {"command": probe})]), "done"] * 2)
        off = runner.run_result(user("probe"), RunConfig(name="off"))
        on = runner.run_result(user("probe"), RunConfig(name="on", sandbox_network=True))
    finally:
        server.close()

    results = [
        m["content"] for r in llm.requests_for("scripted")[1::2] for m in r.messages if m["role"] == "tool"
    ]
    assert "refused" in results[0] and "connected" in results[1]
    assert Trace.objects.get(pk=off.trace_id).run_settings["sandbox_network"] is False
    assert Trace.objects.get(pk=on.trace_id).run_settings["sandbox_network"] is True


def test_only_an_expert_may_give_a_run_the_network(api_client, integrator, expert, llm):
    refused = api_client(integrator).post(
        "/api/traces", {"task": "x", "sandbox_network": True}, format="json"
    )
    assert refused.status_code == 400 and "only an expert" in refused.json()["error"]
    assert (
        api_client(expert)
        .post("/api/traces", {"task": "x", "sandbox_network": True}, format="json")
        .status_code
        == 201
    )
    assert (
        api_client(integrator)
        .post("/api/traces", {"task": "x", "sandbox_network": False}, format="json")
        .status_code
        == 201
    )
