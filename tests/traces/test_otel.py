"""OpenTelemetry GenAI spans of runs (issue 22), read back with the SDK's in-memory exporter."""

from __future__ import annotations

import json
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


@pytest.fixture
def blackhole() -> Any:
    """A collector that accepts connections and never answers (worse than a closed port)."""
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


def timed_run(runner: Any, llm: Any, owner: Any) -> float:
    import time

    llm.script("scripted", [Reply(tool_calls=[ToolCall("list_files", {})])] * 6 + [Reply(text="done")])
    started = time.perf_counter()
    result = runner.run_result([{"role": "user", "content": "list six times"}], RunConfig(owner_id=owner.pk))
    assert result.status == "completed"
    return time.perf_counter() - started


def test_a_collector_that_never_answers_does_not_slow_the_run(
    runner, llm, integrator, blackhole, monkeypatch
):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", blackhole)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "3")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "20")  # export attempts during the run
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2")
    provider = provider_from_environment()
    assert provider is not None
    timed_run(runner, llm, integrator)  # warm: imports, the first litellm call
    without = timed_run(runner, llm, integrator)
    observer = SpanObserver(provider, content=True)
    extensions.observers.append(observer)
    try:
        with_export = timed_run(runner, llm, integrator)
    finally:
        extensions.observers.remove(observer)
        provider.shutdown()
    assert with_export < without * 1.5 + 0.5, (with_export, without)


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
