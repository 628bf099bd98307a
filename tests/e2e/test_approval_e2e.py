"""An approval survives a worker restart (G5, issue 6): real daphne + qcluster on
PostgreSQL + Redis, the run waits without a worker, the cluster is killed and
restarted, an expert approves over HTTP, and the run completes."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.e2e.stack import Stack
from tests.e2e.test_service import assert_contiguous, assert_healthy_messages, need_servers, start
from tests.scripted_llm import Reply, ScriptedLLM, ToolCall

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        bool(os.environ.get("DATABASE_URL")),
        reason="e2e tests start their own PostgreSQL and Redis; they run once, in the SQLite pass",
    ),
]


@pytest.fixture(scope="module")
def gated(scripted_llm_server: ScriptedLLM) -> Iterator[Stack]:
    need_servers()
    stack = Stack(
        model_url=scripted_llm_server.url,
        redis=True,
        postgres=True,
        AGENT_CONFIRM_POLICY="ask-risky",
        AGENT_LEASE_SECONDS="3",
    )
    yield stack
    stack.stop()


def test_a_pending_approval_survives_a_worker_restart_and_the_run_completes(
    gated: Stack, scripted_llm_server
):
    model = scripted_llm_server
    model.reset()
    model.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("write", {"path": "plan.md", "content": "draft"})]),
            "Written after approval.",
        ],
    )
    trace_id = start(gated, "write plan.md")

    def waiting() -> bool:
        return gated.api("GET", f"/traces/{trace_id}")[1]["status"] == "waiting"

    gated.wait_for(waiting, what="the run to wait for approval")
    gated.kill_cluster(gated.clusters[-1])  # no worker holds a waiting run; kill them anyway
    gated.start_cluster()
    status, approvals = gated.api("GET", f"/traces/{trace_id}/approvals")
    assert status == 200 and len(approvals) == 1
    pending = approvals[0]
    assert (pending["status"], pending["tool"], pending["arguments"]) == (
        "pending",
        "write",
        {"path": "plan.md", "content": "draft"},
    )
    assert gated.api("GET", f"/traces/{trace_id}")[1]["status"] == "waiting"  # the sweep left it alone

    decision = {"decision": "approve", "arguments": {"path": "plan.md", "content": "approved text"}}
    url = f"/traces/{trace_id}/approvals/{pending['approval_id']}"
    assert gated.api("POST", url, decision)[0] == 403  # the run's owner is no expert
    status, decided = gated.api("POST", url, decision, as_expert=True)
    assert status == 200 and decided["status"] == "approved" and decided["decided_by"] == "reviewer"

    events = list(gated.events(trace_id, timeout=60))
    assert_contiguous(events)
    types = [e["type"] for e in events]
    assert types.index("confirm_required") < types.index("waiting") < types.index("confirm_response")
    assert types[-1] == "final" and events[-1]["payload"]["result"] == "Written after approval."
    messages = assert_healthy_messages(gated, trace_id)
    written = next(m for m in messages if m["role"] == "tool")
    assert "plan.md" in written["content"] and written["kind"] == ""
    assert (gated.tmp / "workspaces" / trace_id / "plan.md").read_text() == "approved text"
