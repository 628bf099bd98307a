"""OpenTelemetry export end to end (issue 22): a run through the real service (daphne +
qcluster on the embedded SQLite default) exports over OTLP/HTTP to a real Arize Phoenix,
and Phoenix, read back through its REST API, holds it as one trace with the GenAI span
names, parents and token counts.

Phoenix comes from PyPI into its own virtualenv (tests/e2e/phoenix.py); where it cannot
be installed the test skips, except in CI (CI=true), where that fails.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from tests.e2e.phoenix import Phoenix, PhoenixUnavailable, install
from tests.e2e.stack import Stack
from tests.scripted_llm import Reply, ScriptedLLM, ToolCall

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        bool(os.environ.get("DATABASE_URL")),
        reason="e2e tests start their own servers; they run once, in the SQLite pass",
    ),
]

PROJECT = "agentsite-e2e"  # Phoenix files spans by the openinference.project.name resource attribute


@pytest.fixture(scope="module")
def phoenix() -> Iterator[Phoenix]:
    try:
        executable = install()
    except PhoenixUnavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"Phoenix is needed in CI: {exc}")
        pytest.skip(str(exc))
    server = Phoenix(executable)  # starting: `exporting` waits for it after starting the service
    yield server
    server.stop()


@pytest.fixture(scope="module")
def exporting(phoenix: Phoenix, scripted_llm_server: ScriptedLLM) -> Iterator[Stack]:
    """The embedded service with OTLP export to Phoenix, batched every 200 ms."""
    stack = Stack(
        model_url=scripted_llm_server.url,
        redis=False,
        postgres=False,
        OTEL_EXPORTER_OTLP_ENDPOINT=phoenix.url,
        OTEL_RESOURCE_ATTRIBUTES=f"openinference.project.name={PROJECT}",
        OTEL_BSP_SCHEDULE_DELAY="200",
    )
    try:
        phoenix.wait_ready()
    except BaseException:
        stack.stop()
        raise
    print(f"\nPhoenix ready {phoenix.startup_seconds:.1f} s after its start (the service started meanwhile)")
    yield stack
    stack.stop()


def test_a_run_through_the_service_arrives_in_phoenix_as_one_trace(
    exporting: Stack, phoenix: Phoenix, scripted_llm_server: ScriptedLLM
):
    model = scripted_llm_server
    model.reset()
    model.script(
        "scripted",
        [
            Reply(
                tool_calls=[
                    ToolCall("list_files", {"path": "."}),
                    ToolCall("agent", {"task": "count files"}),
                ],
                prompt_tokens=101,
                completion_tokens=17,
            ),
            Reply(text="no files", prompt_tokens=53, completion_tokens=3),  # the sub-agent
            Reply(text="Listed and counted.", prompt_tokens=211, completion_tokens=5),
        ],
    )
    status, body = exporting.api(
        "POST", "/traces", {"messages": [{"role": "user", "content": "list, count"}]}
    )
    assert status == 201, body
    trace_id = body["trace_id"]
    exporting.wait_for(
        lambda: exporting.api("GET", f"/traces/{trace_id}")[1]["status"] in ("completed", "failed"),
        timeout=60,
        what="the run to finish",
    )
    assert exporting.api("GET", f"/traces/{trace_id}")[1]["status"] == "completed"

    def all_arrived() -> list[dict] | None:
        spans = phoenix.spans(PROJECT)
        return spans if len(spans) >= 7 else None

    started = time.monotonic()
    try:
        spans = exporting.wait_for(all_arrived, timeout=60, what="7 spans in Phoenix")
    except AssertionError:
        raise AssertionError(
            f"Phoenix holds {phoenix.spans(PROJECT)}\nqcluster log:\n{exporting.log('qcluster-0')}"
        ) from None
    print(f"spans readable in Phoenix {time.monotonic() - started:.1f} s after the run ended")

    names = sorted(s["name"] for s in spans)
    assert names == sorted(
        ["invoke_agent default"] * 2
        + ["chat openai/scripted"] * 3
        + ["execute_tool list_files", "execute_tool agent"]
    )
    assert len({s["context"]["trace_id"] for s in spans}) == 1  # one trace, the sub-agent's spans in it
    by_id = {s["context"]["span_id"]: s for s in spans}
    (root,) = [s for s in spans if s["parent_id"] is None]
    assert root["name"] == "invoke_agent default"
    assert root["attributes"]["gen_ai.conversation.id"] == trace_id
    assert root["attributes"]["agentsite.status"] == "completed"
    (agent_call,) = [s for s in spans if s["name"] == "execute_tool agent"]
    (child,) = [s for s in spans if s["name"] == "invoke_agent default" and s is not root]
    assert child["parent_id"] == agent_call["context"]["span_id"]
    assert agent_call["parent_id"] == root["context"]["span_id"]
    child_trace_id = child["attributes"]["gen_ai.conversation.id"]
    assert child["attributes"]["agentsite.parent_trace_id"] == trace_id

    chats = sorted((s for s in spans if s["name"] == "chat openai/scripted"), key=lambda s: s["start_time"])
    usage = [
        (
            by_id[c["parent_id"]]["attributes"]["gen_ai.conversation.id"],
            c["attributes"]["gen_ai.usage.input_tokens"],
            c["attributes"]["gen_ai.usage.output_tokens"],
        )
        for c in chats
    ]
    assert usage == [(trace_id, 101, 17), (child_trace_id, 53, 3), (trace_id, 211, 5)]
    assert root["attributes"]["gen_ai.usage.input_tokens"] == 101 + 211  # the segment's totals
    assert root["attributes"]["gen_ai.usage.output_tokens"] == 17 + 5
