"""OpenTelemetry GenAI spans of runs (issue 22), read back with the SDK's in-memory exporter."""

from __future__ import annotations

import http.server
import json
import select
import socket
import threading
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.scripted_llm import Reply, ToolCall
from traces.models import Approval, Message, Trace
from traces.observability.otel import SpanObserver, provider_from_environment, provider_with
from traces.runner import RunConfig
from traces.runner.extensions import extensions
from traces.services.approvals import approval_decide

pytestmark = pytest.mark.django_db


@pytest.fixture
def spans() -> Any:
    """Every run's spans into an in-memory exporter while the test runs (content not captured)."""
    exporter = InMemorySpanExporter()
    observer = SpanObserver(provider_with(exporter, batch=False), content=False)
    extensions.observers.append(observer)
    yield exporter, observer
    extensions.observers.remove(observer)


def by_name(finished: Any) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for span in finished:
        out.setdefault(span.name, []).append(span)
    return out


def test_a_run_with_a_tool_a_sub_agent_and_an_approval_makes_genai_spans(
    spans, runner, llm, integrator, expert, inline_worker, workspace_root
):
    exporter, _ = spans
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("list_files", {}), ToolCall("agent", {"task": "count the files"})]),
            Reply(text="3 files"),  # the sub-agent
            Reply(tool_calls=[ToolCall("write", {"path": "out.txt", "content": "secret-ish text"})]),
            Reply(text="written"),
        ],
    )
    result = runner.run_result(
        [{"role": "user", "content": "count, then write"}],
        RunConfig(confirm_policy="ask-risky", owner_id=integrator.pk, llm_params={"temperature": 0.5}),
    )
    assert result.status == "waiting"
    with inline_worker():
        approval = Approval.objects.get(trace_id=result.trace_id)
        approval_decide(user=expert, trace_id=result.trace_id, approval_id=approval.pk, decision="approve")
    trace = Trace.objects.get(pk=result.trace_id)
    assert trace.status == "completed"
    child = Trace.objects.get(parent_trace_id=trace.trace_id)

    named = by_name(exporter.get_finished_spans())
    segments = [
        s for s in named["invoke_agent default"] if s.attributes["gen_ai.conversation.id"] == trace.pk
    ]
    assert len(segments) == 2  # paused for the approval, then resumed
    first, second = sorted(segments, key=lambda s: s.start_time)
    assert (
        first.attributes["agentsite.status"] == "waiting"
        and second.attributes["agentsite.status"] == "completed"
    )
    assert [e.name for e in first.events] == ["agentsite.wait"]
    assert first.events[0].attributes["agentsite.wait.kind"] == "approval"
    assert second.links[0].context.span_id == first.context.span_id  # the resumed segment links back
    (wait,) = named["wait approval"]
    assert wait.parent.span_id == second.context.span_id and wait.attributes["gen_ai.tool.name"] == "write"
    assert wait.start_time >= first.end_time - 10**8 and wait.end_time <= second.end_time

    chats = named["chat openai/scripted"]
    assert len(chats) == 4
    for chat in chats:
        a = chat.attributes
        assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.provider.name"] == "openai"
        assert a["gen_ai.request.model"] == "openai/scripted" and a["gen_ai.response.model"]
        is_child = a["gen_ai.conversation.id"] == child.pk
        assert a.get("gen_ai.request.temperature") == (None if is_child else 0.5)  # the run's parameters
        message = Message.objects.get(trace_id=a["gen_ai.conversation.id"], sequence=a["agentsite.sequence"])
        assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (
            message.prompt_tokens,
            message.completion_tokens,
        )
        assert "gen_ai.input.messages" not in a and "gen_ai.output.messages" not in a  # no content opt-in

    (list_files,) = named["execute_tool list_files"]
    (agent_call,) = named["execute_tool agent"]
    (write,) = named["execute_tool write"]
    assert list_files.parent.span_id == first.context.span_id
    assert write.parent.span_id == second.context.span_id
    assert (
        agent_call.attributes["gen_ai.tool.call.id"]
        == Message.objects.get(trace=trace, role="tool", name="agent").tool_call_id
    )
    assert "gen_ai.tool.call.arguments" not in write.attributes
    # the sub-agent: a child of the calling tool's span, in the same OTel trace
    (child_segment,) = [
        s
        for s in exporter.get_finished_spans()
        if s.attributes.get("gen_ai.conversation.id") == child.pk and s.name.startswith("invoke_agent")
    ]
    assert child_segment.parent.span_id == agent_call.context.span_id
    assert {s.context.trace_id for s in exporter.get_finished_spans()} == {
        first.context.trace_id,
        second.context.trace_id,
    }
    assert child_segment.attributes["agentsite.parent_trace_id"] == trace.pk


def test_content_is_exported_only_when_opted_in(runner, llm, integrator):
    exporter = InMemorySpanExporter()
    observer = SpanObserver(provider_with(exporter, batch=False), content=True)
    extensions.observers.append(observer)
    try:
        llm.script("scripted", [Reply(tool_calls=[ToolCall("list_files", {})]), Reply(text="two files")])
        runner.run_result([{"role": "user", "content": "list them"}], RunConfig(owner_id=integrator.pk))
    finally:
        extensions.observers.remove(observer)
    named = by_name(exporter.get_finished_spans())
    last = sorted(named["chat openai/scripted"], key=lambda s: s.start_time)[-1]
    sent = json.loads(last.attributes["gen_ai.input.messages"])
    assert sent[1] == {"role": "user", "content": "list them"}
    assert json.loads(last.attributes["gen_ai.output.messages"])[0]["content"] == "two files"
    assert "gen_ai.tool.call.result" in named["execute_tool list_files"][0].attributes


def test_export_is_off_unless_the_otel_variables_configure_it():
    assert provider_from_environment({}) is None
    assert (
        provider_from_environment({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"})
        is None
    )
    assert (
        provider_from_environment({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"})
        is None
    )
    provider = provider_from_environment({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    assert provider is not None
    provider.shutdown()


class StalledCollector:
    """An OTLP/HTTP collector that reads each export and answers nothing until released.

    It counts the exports it holds and the ones whose client gave up waiting (closed the
    connection): an exporter that blocked the run would have to give up before the run
    could go on, so "held, none given up" after a run proves the run never waited.
    """

    def __init__(self) -> None:
        collector = self
        self.held = 0
        self.given_up = 0
        self.arrived = threading.Event()
        self.released = threading.Event()
        self._lock = threading.Lock()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with collector._lock:
                    collector.held += 1
                collector.arrived.set()
                while not collector.released.wait(0.05):
                    readable, _, _ = select.select([self.connection], [], [], 0)
                    if readable and not self.connection.recv(1, socket.MSG_PEEK):
                        with collector._lock:
                            collector.given_up += 1
                        return
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stalled_collector() -> Any:
    collector = StalledCollector()
    yield collector
    collector.close()


def listing_run(runner: Any, llm: Any, owner: Any) -> None:
    llm.script("scripted", [Reply(tool_calls=[ToolCall("list_files", {})])] * 6 + [Reply(text="done")])
    result = runner.run_result([{"role": "user", "content": "list six times"}], RunConfig(owner_id=owner.pk))
    assert result.status == "completed"


def test_a_collector_that_never_answers_neither_holds_nor_fails_the_run(
    runner, llm, integrator, stalled_collector, monkeypatch
):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", stalled_collector.url)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "120")  # a blocked run would wait this long
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2")
    provider = provider_from_environment()
    assert provider is not None
    observer = SpanObserver(provider, content=True)
    extensions.observers.append(observer)
    try:
        listing_run(runner, llm, integrator)
        assert stalled_collector.arrived.wait(30), "no export reached the collector"
        listing_run(runner, llm, integrator)  # ends its spans while that export hangs
        # Both runs completed while the collector held an export unanswered and no
        # exporter gave up on one: nothing on a run's thread waited for the collector.
        assert stalled_collector.held >= 1 and stalled_collector.given_up == 0
    finally:
        extensions.observers.remove(observer)
        stalled_collector.released.set()  # answer, so the exporter's thread ends now
        provider.shutdown()
    assert stalled_collector.given_up == 0


def test_the_service_is_named_agentsite_unless_otel_names_it(monkeypatch):
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    assert (
        provider_with(InMemorySpanExporter(), batch=False).resource.attributes["service.name"] == "agentsite"
    )
    monkeypatch.setenv("OTEL_SERVICE_NAME", "agents-eu")
    assert (
        provider_with(InMemorySpanExporter(), batch=False).resource.attributes["service.name"] == "agents-eu"
    )
