"""A2A client (X4): an agentsite agent calls an A2A agent that is not agentsite.

The peer is built from the a2a-sdk's server pieces only (tests/e2e/a2a_peer.py),
served by daphne; agentsite is a live stack (daphne + qcluster) whose agent is
the scripted model behind the real litellm client. The peer is registered the
way an operator does it in the admin: a RemoteAgentConfig row with its key.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.stack import ROOT, Stack, free_port, kill_group, wait_for_port
from tests.e2e.test_remote_agents import finished, tool_results
from tests.e2e.test_service import start
from tests.scripted_llm import Reply, ScriptedLLM, ToolCall

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")), reason="e2e tests run once, in the SQLite pass"),
]


@pytest.fixture(scope="module")
def peer() -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "tests.e2e.a2a_peer:application",
        ],
        cwd=ROOT,
        env={**os.environ, "A2A_PEER_URL": url},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for_port(port, process, "the A2A peer")
        yield url
    finally:
        kill_group(process)


@pytest.fixture(scope="module")
def stack(scripted_llm_server: ScriptedLLM, peer: str) -> Iterator[Stack]:
    stack = Stack(
        model_url=scripted_llm_server.url,
        redis=False,
        postgres=False,
        workers=2,
        AGENT_REMOTE_POLL_SECONDS="0.1",
        AGENT_CONTEXT_EVERY="1",  # the context injection (remote agents, their skills) every step
    )
    try:
        stack.manage(
            "shell",
            "-c",
            "from traces.models import RemoteAgentConfig;"
            f"RemoteAgentConfig.objects.create(url={peer!r}, name='peer', api_key='peer-key')",
        )
        yield stack
    finally:
        stack.stop()


def tool_data(result: str) -> dict[str, Any]:
    return json.loads(result.split("\n\n", 1)[1])


def test_a_delegation_to_an_a2a_agent_completes_and_is_recorded(stack, peer, scripted_llm_server):
    model = scripted_llm_server
    model.reset()
    model.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("agent", {"task": "hello", "agent_url": peer, "agent_type": "echo"})]),
            "the peer echoed",
        ],
    )
    trace_id = start(stack, "ask the peer")
    trace = finished(stack, trace_id)
    assert trace["status"] == "completed", trace
    (result,) = tool_results(stack, trace_id, "agent")
    data = tool_data(result)
    assert data["status"] == "completed" and data["summary"] == "echo[echo]: hello"
    assert data["sub_trace_id"].startswith(f"agent://127.0.0.1:{peer.rsplit(':', 1)[1]}/")
    assert data["remote_agent"]["name"] == "peer"
    assert data["remote_agent"]["skills"] == [{"id": "echo", "description": "says it back"}]
    (goal,) = trace["goal_tree"]["goals"]
    assert goal["type"] == "agent_call" and goal["sub_trace_ids"] == [data["sub_trace_id"]]
    assert "peer-key" not in json.dumps(stack.api("GET", f"/traces/{trace_id}/messages?mode=all")[1])
    # the card's skills are shown to the model from then on
    second_request = model.requests_for("scripted")[-1].body
    assert "Remote agents" in json.dumps(second_request) and "skills (agent_type) echo" in json.dumps(
        second_request
    )


def test_a_remote_that_needs_input_makes_the_run_wait_for_a_human_answer(stack, peer, scripted_llm_server):
    """input-required like ask_human: the remote's question becomes a human trace, the run
    ends waiting (no worker held); the answer goes to the same remote task and the call
    returns its result."""
    model = scripted_llm_server
    model.reset()
    model.script(
        "scripted",
        [Reply(tool_calls=[ToolCall("agent", {"task": "a question for you", "agent_url": peer})]), "done"],
    )
    trace_id = start(stack, "talk to the peer")
    trace = finished(stack, trace_id)
    assert trace["status"] == "waiting", trace
    (child,) = trace["sub_traces"]
    question = stack.api("GET", f"/traces/{child['trace_id']}")[1]["task"]
    assert child["agent_type"] == "human" and "asks: Which colour?" in question
    status, body = stack.api("POST", f"/traces/{child['trace_id']}/answer", {"answer": "teal"})
    assert status == 200, body
    done = stack.wait_for(
        lambda: (t := stack.api("GET", f"/traces/{trace_id}")[1])["status"] == "completed" and t,
        timeout=60,
        what="the asking run to resume and complete",
    )
    assert done["result_summary"] == "done"
    (result,) = tool_results(stack, trace_id, "agent")
    data = tool_data(result)
    assert data["status"] == "completed" and data["summary"] == "you chose teal"
    assert f"({data['sub_trace_id']})" in question  # the answer went to the same remote task


def test_a_failing_remote_and_an_unknown_skill_are_clear_tool_errors(stack, peer, scripted_llm_server):
    scripted_llm_server.reset()
    scripted_llm_server.script(
        "scripted",
        [
            Reply(
                tool_calls=[
                    ToolCall("agent", {"task": "please fail", "agent_url": peer}),
                    ToolCall("agent", {"task": "x", "agent_url": peer, "agent_type": "painter"}),
                ]
            ),
            "gave up",
        ],
    )
    trace_id = start(stack, "try the peer")
    assert finished(stack, trace_id)["status"] == "completed"
    failed, unknown = tool_results(stack, trace_id, "agent")
    assert (
        tool_data(failed)["status"] == "failed" and tool_data(failed)["error"] == "the peer failed on purpose"
    )
    assert "peer has no skill 'painter'; its skills: echo" in unknown
