"""Remote agents (S5, X4) and ask_human across a worker restart (S3), on live services.

Two instances of the service on loopback, each real daphne + qcluster on its own
SQLite file, configured with each other's URL and API key (AGENT_REMOTE_AGENTS):
an agent on one delegates to, continues, and is called back by the other, over
the A2A protocol (each serves it; each calls with the a2a-sdk's client).
"""

from __future__ import annotations

import json
import os
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.stack import Stack, free_port
from tests.e2e.test_service import start
from tests.scripted_llm import Reply, ScriptedLLM, ToolCall

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        bool(os.environ.get("DATABASE_URL")),
        reason="e2e tests run once, in the SQLite pass",
    ),
]


def base_url(stack: Stack) -> str:
    return f"http://127.0.0.1:{stack.port}"


@pytest.fixture(scope="module")
def pair(scripted_llm_server: ScriptedLLM) -> Iterator[tuple[Stack, Stack]]:
    """Instance `a` knows `b` (and a dead port); `b` knows `a` (its cluster restarted to read it)."""
    b = Stack(model_url=scripted_llm_server.url, redis=False, postgres=False, workers=2)
    a = None
    try:
        dead = f"http://127.0.0.1:{free_port()}"
        a = Stack(
            model_url=scripted_llm_server.url,
            redis=False,
            postgres=False,
            workers=2,
            AGENT_REMOTE_AGENTS=json.dumps({base_url(b): b.token, dead: "nobody-listens"}),
            AGENT_REMOTE_POLL_SECONDS="0.2",
        )
        a.dead_url = dead  # type: ignore[attr-defined]
        b.env["AGENT_REMOTE_AGENTS"] = json.dumps({base_url(a): a.token})
        b.env["AGENT_REMOTE_POLL_SECONDS"] = "0.2"
        b.kill_cluster(b.clusters[-1])
        b.start_cluster()
        yield a, b
    finally:
        b.stop()
        if a is not None:
            a.stop()


def finished(stack: Stack, trace_id: str, timeout: float = 60) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        body = stack.api("GET", f"/traces/{trace_id}")[1]
        return body if body["status"] in ("completed", "failed", "stopped", "waiting") else None

    return stack.wait_for(done, timeout=timeout, what=f"trace {trace_id} to finish")


def tool_results(stack: Stack, trace_id: str, name: str) -> list[str]:
    messages = stack.api("GET", f"/traces/{trace_id}/messages")[1]
    return [m["content"] for m in messages if m["role"] == "tool" and m.get("name") == name]


def test_an_agent_delegates_to_a_remote_instance_and_continues_the_same_remote_trace(
    pair, scripted_llm_server
):
    a, b = pair
    model = scripted_llm_server
    model.reset()
    model.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("agent", {"task": "name a colour", "agent_url": base_url(b)})]),
            "teal",  # the run on b
            "b said teal",
        ],
    )
    trace_id = start(a, "ask the other instance")
    trace = finished(a, trace_id)
    assert trace["status"] == "completed" and trace["result_summary"] == "b said teal", trace

    (result,) = tool_results(a, trace_id, "agent")
    data = json.loads(result.split("\n\n", 1)[1])
    remote_id = data["sub_trace_id"]
    host, remote_trace = remote_id[len("agent://") :].split("/", 1)
    assert host == f"127.0.0.1:{b.port}" and data["summary"] == "teal" and data["status"] == "completed"
    status, on_b = b.api("GET", f"/traces/{remote_trace}")
    assert status == 200 and on_b["status"] == "completed" and on_b["result_summary"] == "teal"
    (goal,) = trace["goal_tree"]["goals"]
    assert goal["type"] == "agent_call" and goal["sub_trace_ids"] == [remote_id]
    # the remote child read through a's API (a2a GetTask on b with the stored key)
    status, read = a.api("GET", f"/traces/{trace_id}/remote?id={urllib.parse.quote(remote_id, safe='')}")
    assert status == 200 and read["status"] == "completed" and read["remote_id"] == remote_id, read
    assert [m["role"] for m in read["messages"]][:1] == ["user"] and "name a colour" in read["messages"][0][
        "content"
    ]
    assert read["messages"][-1] == {"role": "agent", "content": "teal"} and read["message_count"] >= 2
    assert a.api("GET", f"/traces/{trace_id}/remote?id=agent%3A%2F%2F127.0.0.1%3A1%2Fx")[0] == 404

    model.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("agent", {"task": "and a second one?", "continue_from": remote_id})]),
            lambda body: Reply(
                text="teal, then coral" if "name a colour" in json.dumps(body) else "no memory"
            ),
            "b remembered",
        ],
    )
    status, _ = a.api("POST", f"/traces/{trace_id}/run", {"messages": [{"role": "user", "content": "more"}]})
    assert status == 202
    assert finished(a, trace_id)["result_summary"] == "b remembered"
    followed = json.loads(tool_results(a, trace_id, "agent")[-1].split("\n\n", 1)[1])
    assert followed["summary"] == "teal, then coral"
    # A2A: a finished task takes no more messages, so the follow-up is a new task in the
    # same context on b, started from that context's conversation ("name a colour")
    next_trace = followed["sub_trace_id"].rsplit("/", 1)[1]
    assert next_trace != remote_trace
    on_b = b.api("GET", f"/traces/{next_trace}")[1]
    assert on_b["result_summary"] == "teal, then coral"
    assert on_b["context"]["a2a"]["context_id"] == remote_trace
    assert b.api("GET", f"/traces/{remote_trace}")[1]["result_summary"] == "teal"


def test_the_remote_instance_calls_back_the_first_one(pair, scripted_llm_server):
    a, b = pair
    scripted_llm_server.reset()
    scripted_llm_server.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("agent", {"task": "say hi", "agent_url": base_url(a)})]),
            "hi from a",
            "a answered",
        ],
    )
    trace_id = start(b, "call a")
    assert finished(b, trace_id)["result_summary"] == "a answered"
    assert f"agent://127.0.0.1:{a.port}/" in tool_results(b, trace_id, "agent")[0]


def test_remote_failures_are_clear_tool_errors(pair, scripted_llm_server):
    a, _ = pair
    scripted_llm_server.reset()
    scripted_llm_server.script(
        "scripted",
        [
            Reply(
                tool_calls=[
                    ToolCall("agent", {"task": "x", "agent_url": "http://198.51.100.7:8000"}),
                    ToolCall("agent", {"task": "x", "agent_url": a.dead_url}),
                ]
            ),
            "gave up",
        ],
    )
    trace_id = start(a, "try remotes")
    assert finished(a, trace_id)["status"] == "completed"
    unknown, dead = tool_results(a, trace_id, "agent")
    assert "no remote agent is configured for 'http://198.51.100.7:8000'" in unknown
    assert f"remote agent {a.dead_url} is unreachable" in dead


def test_ask_human_waits_across_a_worker_restart_and_resumes_on_an_answer(pair, scripted_llm_server):
    a, _ = pair
    scripted_llm_server.reset()
    scripted_llm_server.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("ask_human", {"question": "Which region?"})]),
            lambda body: Reply(
                text="using " + [m for m in body["messages"] if m["role"] == "tool"][-1]["content"]
            ),
        ],
    )
    trace_id = start(a, "deploy")
    trace = finished(a, trace_id)
    assert trace["status"] == "waiting"
    (child,) = trace["sub_traces"]
    assert child["agent_type"] == "human" and child["status"] == "waiting"
    child_id = child["trace_id"]
    a.kill_cluster(a.clusters[-1])  # nobody holds a waiting run; a restart loses nothing
    a.start_cluster()

    status, body = a.api("POST", f"/traces/{child_id}/answer", {"answer": "eu-west"})
    assert status == 200 and body["status"] == "completed", body
    trace = a.wait_for(
        lambda: (t := a.api("GET", f"/traces/{trace_id}")[1])["status"] == "completed" and t,
        timeout=60,
        what="the parent to resume and complete",
    )
    assert "eu-west" in trace["result_summary"]


def test_explore_children_run_concurrently_in_a_worker_on_a_sqlite_file(pair, scripted_llm_server):
    a, _ = pair
    scripted_llm_server.reset()

    def child(body: dict[str, Any]) -> Reply:
        task = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
        return Reply(text=f"found {task.split()[-1]}", delay=1.0)

    scripted_llm_server.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("agent", {"task": ["look at a", "look at b", "look at c"]})]),
            child,
            child,
            child,
            "merged",
        ],
    )
    trace_id = start(a, "explore three ways")
    trace = finished(a, trace_id)
    assert trace["status"] == "completed", trace
    assert sorted(s["status"] for s in trace["sub_traces"]) == ["completed"] * 3
    messages = a.api("GET", f"/traces/{trace_id}/messages")[1]
    (result,) = [m for m in messages if m["role"] == "tool" and m["name"] == "agent"]
    assert all(f"found {x}" in result["content"] for x in "abc")
    assert result["duration_ms"] < 2000, f"three 1 s children took {result['duration_ms']} ms"
