"""MCP servers as tool sources, against our own counter_server.py (a real server, the real SDK)."""

from __future__ import annotations

import json
import logging
import sys
import threading
from typing import Any

import pytest

from tests.scripted_llm import Reply, ToolCall
from tests.tools.conftest import wait_until_gone
from tests.tools.mcp.conftest import COUNTER, counter_stdio
from tools.mcp.selectors import enabled_servers
from tools.mcp.sessions import sessions
from traces.models import Approval, Message, Trace, TraceEvent
from traces.runner import InvalidRun, RunConfig
from traces.services.approvals import approval_decide

pytestmark = pytest.mark.django_db


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def tool_messages(trace_id: str) -> list[Message]:
    return list(Message.objects.filter(trace_id=trace_id, role="tool").order_by("sequence"))


def offered(request: Any) -> dict[str, dict[str, Any]]:
    return {t["function"]["name"]: t["function"] for t in request.get("tools") or []}


def test_a_run_offers_the_servers_tools_and_keeps_one_server_for_its_calls(runner, llm, declare, sandboxed):
    declare(counter_stdio())
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("mcp__counter__increment", {"by": 2})]),
            Reply(tool_calls=[ToolCall("mcp__counter__increment", {})]),
            Reply(text="counted"),
        ],
    )

    result = runner.run_result(user("count"), RunConfig())

    assert result.status == "completed"
    tools = offered(llm.requests_for("scripted")[0])
    increment = tools["mcp__counter__increment"]
    assert increment["parameters"]["properties"]["by"]["type"] == "integer"
    assert "counter" in increment["description"] and "read" in tools  # beside the built-ins
    results = tool_messages(result.trace_id)
    assert [m.content for m in results] == ["2", "3"]  # one server process for the run's calls
    assert all(m.kind == "" for m in results)
    events = TraceEvent.objects.filter(trace_id=result.trace_id, type="tool_result")
    assert [e.payload["source"] for e in events] == [
        "mcp:counter",
        "mcp:counter",
    ]  # the trace names the server
    assert sessions.connections_of(result.trace_id) == []  # closed with the run
    assert wait_until_gone(str(COUNTER), 10) == []


def test_each_run_gets_its_own_server_in_its_sandbox_with_only_the_declared_environment(
    runner, llm, declare, sandboxed, monkeypatch
):
    monkeypatch.setenv("WORKER_SECRET", "do-not-leak")
    declare(counter_stdio(env={"COUNTER_MODE": "test"}))
    for _ in range(2):
        llm.script(
            "scripted",
            [
                Reply(
                    tool_calls=[ToolCall("mcp__counter__increment", {}), ToolCall("mcp__counter__whoami", {})]
                ),
                Reply(text="ok"),
            ],
        )
    first = runner.run_result(user("a"), RunConfig())
    second = runner.run_result(user("b"), RunConfig())

    for result in (first, second):
        count, whoami = tool_messages(result.trace_id)
        assert count.content == "1"  # a new process: state does not leak between runs
        seen = json.loads(whoami.content)
        assert "COUNTER_MODE" in seen["env"] and "WORKER_SECRET" not in seen["env"]
        assert "DJANGO_SETTINGS_MODULE" not in seen["env"]
        trace = Trace.objects.get(pk=result.trace_id)
        assert seen["cwd"].endswith(trace.trace_id)  # the run's workspace
        assert seen["pid"] < 10  # its own PID namespace


def test_a_slow_call_is_a_timeout_error_and_the_next_call_works(runner, llm, declare, sandboxed):
    declare(counter_stdio(timeout=1))
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("mcp__counter__slow", {"seconds": 30})]),
            Reply(tool_calls=[ToolCall("mcp__counter__increment", {})]),
            Reply(text="done"),
        ],
    )

    result = runner.run_result(user("wait"), RunConfig())

    slow, increment = tool_messages(result.trace_id)
    assert slow.kind == "tool_error" and "did not answer within 1 s" in slow.content
    assert increment.kind == "" and increment.content == "1"
    assert result.status == "completed"


def test_an_error_result_and_an_unknown_argument_are_tool_errors(runner, llm, declare, sandboxed):
    declare(counter_stdio())
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("mcp__counter__fail", {"reason": "the disk is full"})]),
            Reply(tool_calls=[ToolCall("mcp__counter__increment", {"by": "many"})]),
            Reply(text="done"),
        ],
    )

    result = runner.run_result(user("fail"), RunConfig())

    failed, invalid = tool_messages(result.trace_id)
    assert failed.kind == "tool_error" and "the disk is full" in failed.content
    assert invalid.kind == "tool_error" and "increment" in invalid.content and "many" in invalid.content
    assert result.status == "completed"


def test_a_list_changed_notification_offers_the_new_tool_from_the_next_step(runner, llm, declare, sandboxed):
    declare(counter_stdio())
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("mcp__counter__unlock", {})]),
            Reply(tool_calls=[ToolCall("mcp__counter__secret", {})]),
            Reply(text="found it"),
        ],
    )

    result = runner.run_result(user("unlock"), RunConfig())

    first, second, _ = llm.requests_for("scripted")
    assert "mcp__counter__secret" not in offered(first) and "mcp__counter__secret" in offered(second)
    assert [m.content for m in tool_messages(result.trace_id)] == ["unlocked", "open sesame"]
    changed = TraceEvent.objects.get(trace_id=result.trace_id, type="tools_changed")
    assert changed.payload["added"] == ["mcp__counter__secret"]


def test_presets_and_runs_choose_mcp_tools_by_name_pattern_and_policy(runner, llm, declare, sandboxed):
    declare(counter_stdio(tools={"slow": {"offered": False}, "increment": {"risk": "safe"}}))
    llm.script("scripted", [Reply(text="ok")])

    runner.run_result(user("hi"), RunConfig(tools=["mcp__counter__*", "read"]))

    names = set(offered(llm.requests_for("scripted")[0]))
    assert names == {
        "read",
        "mcp__counter__increment",
        "mcp__counter__unlock",
        "mcp__counter__fail",
        "mcp__counter__whoami",
    }
    with pytest.raises(InvalidRun, match="unknown tool"):
        runner.run_result(user("hi"), RunConfig(tools=["mcp__counter__slow"]))  # not offered by policy
    tool_set = runner.tool_registry
    assert tool_set.get("mcp__counter__increment").risk == "safe"
    assert tool_set.get("mcp__counter__fail").risk == "risky"  # the default for a server's tools
    assert [
        t.name
        for t in tool_set.select(allowed=None, denied=["mcp__counter__*"])
        if t.name.startswith("mcp__")
    ] == []


def test_under_ask_risky_an_mcp_call_waits_for_an_expert_then_runs(
    runner, llm, declare, sandboxed, integrator, expert, inline_worker
):
    declare(counter_stdio())
    llm.script(
        "scripted",
        [Reply(tool_calls=[ToolCall("mcp__counter__increment", {"by": 5})]), Reply(text="incremented")],
    )

    result = runner.run_result(user("count"), RunConfig(confirm_policy="ask-risky", owner_id=integrator.pk))

    assert result.status == "waiting" and tool_messages(result.trace_id) == []
    approval = Approval.objects.get(trace_id=result.trace_id)
    assert (approval.tool_name, approval.arguments) == ("mcp__counter__increment", {"by": 5})
    with inline_worker():
        approval_decide(user=expert, trace_id=result.trace_id, approval_id=approval.pk, decision="approve")
    trace = Trace.objects.get(pk=result.trace_id)
    assert trace.status == "completed" and trace.result_summary == "incremented"
    assert [m.content for m in tool_messages(result.trace_id)] == ["5"]


def test_an_http_servers_token_reaches_the_server_but_no_trace_or_log(
    runner, llm, declare, http_server, caplog
):
    server = http_server([sys.executable, str(COUNTER), "http"])
    token = "tok-3f9a-never-in-traces"
    declare(
        {
            "name": "remote",
            "transport": "http",
            "url": server.url,
            "bearer_token": token,
            "headers": {"X-Team": token},
        }
    )
    llm.script(
        "scripted",
        [
            Reply(
                tool_calls=[ToolCall("mcp__remote__increment", {}), ToolCall("mcp__remote__increment", {})]
            ),
            "done",
        ],
    )

    with caplog.at_level(logging.DEBUG):
        result = runner.run_result(user("count"), RunConfig())

    assert [m.content for m in tool_messages(result.trace_id)] == ["1", "2"]
    stored = json.dumps(
        [
            list(Message.objects.filter(trace_id=result.trace_id).values()),
            list(TraceEvent.objects.filter(trace_id=result.trace_id).values()),
            Trace.objects.filter(pk=result.trace_id).values().get(),
        ],
        default=str,
    )
    assert token not in stored and token not in caplog.text
    assert token not in repr(runner.tool_registry.get("mcp__remote__increment").func.__closure__)


def test_concurrent_runs_in_one_process_each_keep_their_own_server(declare, sandboxed, tmp_path):
    """The MCP layer under the run threads of one worker (traces/runhost.py): no database here,
    since SQLite's in-memory test database cannot take concurrent writers."""
    declare(counter_stdio())
    server = enabled_servers()["counter"]
    runs = 4
    seen: dict[str, list[str]] = {}
    errors: list[BaseException] = []

    def run(trace_id: str) -> None:
        try:
            for _ in range(3):
                result = sessions.call(
                    server, "increment", {}, trace_id=trace_id, workspace=tmp_path, writable=True
                )
                seen.setdefault(trace_id, []).append(result.content[0].text)  # type: ignore[union-attr]
        except BaseException as exc:
            errors.append(exc)
        finally:
            sessions.close_run(trace_id)

    threads = [threading.Thread(target=run, args=(f"concurrent-{n}",)) for n in range(runs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)

    assert errors == [] and all(values == ["1", "2", "3"] for values in seen.values()) and len(seen) == runs
    assert wait_until_gone(str(COUNTER), 10) == []  # every run's server ended with it


def test_with_the_sandbox_off_a_stdio_server_still_gets_only_its_declared_environment(
    runner, llm, declare, settings, monkeypatch
):
    settings.AGENT_SANDBOX = False
    monkeypatch.setenv("WORKER_SECRET", "do-not-leak")
    declare(counter_stdio(env={"COUNTER_MODE": "test"}))
    llm.script("scripted", [Reply(tool_calls=[ToolCall("mcp__counter__whoami", {})]), Reply(text="ok")])

    result = runner.run_result(user("who"), RunConfig())

    (whoami,) = tool_messages(result.trace_id)
    seen = json.loads(whoami.content)
    assert "COUNTER_MODE" in seen["env"] and "WORKER_SECRET" not in seen["env"]
    assert seen["cwd"].endswith(result.trace_id)
