"""OpenTelemetry export of runs with the GenAI semantic conventions (issue 22).

Off unless the standard variables configure it (`OTEL_EXPORTER_OTLP_ENDPOINT` or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, or `OTEL_TRACES_EXPORTER=otlp|console`;
`OTEL_SDK_DISABLED=true` wins). `SpanObserver` is a runner observer
(`traces/runner/extensions.py:RunObserver`, registered by `traces/apps.py`): it
makes spans on the run's thread and ends them into the SDK's BatchSpanProcessor,
whose own thread exports: a slow or dead collector fills a bounded queue (spans
dropped past it), never the run.

Spans: `invoke_agent {agent}` per run segment; `chat {model}` per model call and
`execute_tool {tool}` per tool call under it; a sub-agent's segment is a child of
the calling `execute_tool` span when it runs in the same thread, else of its
parent trace's segment, whose context is stored in `Trace.context["otel"]` (W3C
traceparent) so a child in another thread or worker links to it. A wait for an
expert or a human is an `agentsite.wait` event when the segment pauses and a
`wait {kind}` span when the next segment resumes it.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv.attributes import error_attributes
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from traces.llm_request import provider_name
from traces.models import Trace

if TYPE_CHECKING:
    from traces.llm import LLMResponse
    from traces.models import Message
    from traces.runner.state import RunState

logger = logging.getLogger(__name__)

CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
STORED = "otel"  # Trace.context key: {"traceparent": ..., "waiting": {...}}
_propagator = TraceContextTextMapPropagator()


def provider_from_environment(environ: dict[str, str] | None = None) -> TracerProvider | None:
    """A TracerProvider exporting over OTLP/HTTP as the OTEL_* variables say, or None (export off)."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    chosen = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if chosen == "none" or (not endpoint and chosen not in ("otlp", "console")):
        return None
    exporter: SpanExporter
    if chosen == "console":
        exporter = ConsoleSpanExporter()
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        if protocol and protocol != "http/protobuf":
            logger.warning(
                "OTEL_EXPORTER_OTLP_PROTOCOL=%s: only http/protobuf is installed; using it", protocol
            )
        exporter = OTLPSpanExporter()  # endpoint, headers, timeout, compression from OTEL_*
    return provider_with(exporter, batch=True)


def provider_with(exporter: SpanExporter, *, batch: bool) -> TracerProvider:
    """A TracerProvider for `exporter`; `batch` exports from the SDK's thread (OTEL_BSP_* apply)."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    )
    attributes = {} if named else {"service.name": "agentsite"}
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter))
    return provider


def capture_content() -> bool:
    return os.environ.get(CAPTURE_CONTENT, "").strip().lower() == "true"


@dataclass
class _Segment:
    span: Span
    context: otel_context.Context
    common: dict[str, Any]  # attributes every span of the segment carries, built once
    chat: Span | None = None
    tools: dict[str, tuple[Span, object]] = field(default_factory=dict)  # call id -> (span, attach token)


class SpanObserver:
    """Spans of every run (a RunObserver); per-run state keyed by the RunState's id."""

    def __init__(self, provider: TracerProvider, *, content: bool | None = None) -> None:
        self.provider = provider
        self.tracer = provider.get_tracer("agentsite")
        self.content = capture_content() if content is None else content
        self._segments: dict[int, _Segment] = {}
        self._lock = threading.Lock()

    # --- run segments ----------------------------------------------------------

    def segment_started(self, run: RunState) -> None:
        trace = run.trace
        stored = dict((trace.context or {}).get(STORED) or {})
        parent, links = self._parent_of(trace, stored)
        agent = trace.agent_type or "default"
        span = self.tracer.start_span(
            f"invoke_agent {agent}",
            context=parent,
            kind=SpanKind.INTERNAL,
            links=links,
            attributes={
                gen_ai.GEN_AI_OPERATION_NAME: "invoke_agent",
                gen_ai.GEN_AI_PROVIDER_NAME: provider_name(run.model.model),
                gen_ai.GEN_AI_AGENT_NAME: agent,
                gen_ai.GEN_AI_CONVERSATION_ID: trace.trace_id,
                gen_ai.GEN_AI_REQUEST_MODEL: run.model.model,
                "agentsite.trace_id": trace.trace_id,
                "agentsite.parent_trace_id": trace.parent_trace_id or "",
                "agentsite.run_token": trace.run_token,
                "agentsite.branch": trace.head_sequence or 0,  # the message the segment continues from
            },
        )
        ctx = otel_trace.set_span_in_context(span)
        common = {
            gen_ai.GEN_AI_CONVERSATION_ID: trace.trace_id,
            gen_ai.GEN_AI_AGENT_NAME: agent,
        }
        with self._lock:
            self._segments[id(run)] = _Segment(span, ctx, common)
        waiting = stored.pop("waiting", None)
        if isinstance(waiting, dict):
            self._waited(span, ctx, waiting)
        carrier: dict[str, str] = {}
        _propagator.inject(carrier, ctx)
        stored["traceparent"] = carrier.get("traceparent", "")
        trace.context = {**(trace.context or {}), STORED: stored}  # written with the next commit

    def _parent_of(
        self, trace: Trace, stored: dict[str, Any]
    ) -> tuple[otel_context.Context | None, list[Link]]:
        """The calling tool's span in this thread, else the parent trace's stored segment; a
        continued trace links to its previous segment."""
        links = []
        previous = _span_context(stored.get("traceparent"))
        if previous is not None:
            links.append(Link(previous, {"agentsite.link": "previous_segment"}))
        current = otel_trace.get_current_span()
        if current.get_span_context().is_valid and trace.parent_trace_id:
            return otel_context.get_current(), links
        if trace.parent_trace_id:
            parent_context = (
                Trace.objects.filter(pk=trace.parent_trace_id).values_list("context", flat=True).first() or {}
            )
            found = _span_context(((parent_context or {}).get(STORED) or {}).get("traceparent"))
            if found is not None:
                return otel_trace.set_span_in_context(otel_trace.NonRecordingSpan(found)), links
        return otel_context.Context(), links  # a new OTel trace (not whatever is current)

    def _waited(self, span: Span, ctx: otel_context.Context, waiting: dict[str, Any]) -> None:
        since = waiting.get("since")
        if not isinstance(since, int):
            return
        kind = str(waiting.get("kind", "wait"))
        wait = self.tracer.start_span(
            f"wait {kind}",
            context=ctx,
            start_time=since,
            attributes={"agentsite.wait.kind": kind, "gen_ai.tool.name": str(waiting.get("tool", ""))},
        )
        wait.end(end_time=time.time_ns())

    def waiting(self, run: RunState, kind: str, tool: str) -> None:
        segment = self._segments.get(id(run))
        if segment is not None:
            segment.span.add_event("agentsite.wait", {"agentsite.wait.kind": kind, "gen_ai.tool.name": tool})
        stored = dict((run.trace.context or {}).get(STORED) or {})
        stored["waiting"] = {"kind": kind, "tool": tool, "since": time.time_ns()}
        run.trace.context = {**(run.trace.context or {}), STORED: stored}

    def segment_ended(self, run: RunState) -> None:
        with self._lock:
            segment = self._segments.pop(id(run), None)
        if segment is None:
            return
        for span, token in segment.tools.values():
            otel_context.detach(token)  # type: ignore[arg-type]
            span.end()
        if segment.chat is not None:
            segment.chat.end()
        trace = run.trace
        span = segment.span
        span.set_attributes(
            {
                "agentsite.status": trace.status,
                "agentsite.total_tokens": trace.total_tokens,
                "agentsite.cost_usd": trace.total_cost,
                gen_ai.GEN_AI_USAGE_INPUT_TOKENS: trace.total_prompt_tokens,
                gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS: trace.total_completion_tokens,
            }
        )
        if trace.status in ("failed", "running"):  # running: the lease was lost or the run crashed
            span.set_status(Status(StatusCode.ERROR, (trace.error_message or trace.status)[:500]))
        span.end()

    # --- model calls -----------------------------------------------------------

    def model_started(
        self, run: RunState, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> None:
        segment = self._segments.get(id(run))
        if segment is None:
            return
        model = run.model.model
        attributes: dict[str, Any] = {
            **segment.common,
            gen_ai.GEN_AI_OPERATION_NAME: "chat",
            gen_ai.GEN_AI_PROVIDER_NAME: provider_name(model),
            gen_ai.GEN_AI_REQUEST_MODEL: model,
            "agentsite.goal_id": run.trace.current_goal_id or "",
        }
        for name in ("temperature", "max_tokens", "top_p"):
            if name in run.params:
                attributes[f"gen_ai.request.{name}"] = run.params[name]
        if self.content:
            attributes[gen_ai.GEN_AI_INPUT_MESSAGES] = _json(messages)
            if tools:
                attributes["gen_ai.tool.definitions"] = _json(tools)
        segment.chat = self.tracer.start_span(
            f"chat {model}", context=segment.context, kind=SpanKind.CLIENT, attributes=attributes
        )

    def model_ended(
        self, run: RunState, response: LLMResponse | None, message: Message | None, error: str | None
    ) -> None:
        segment = self._segments.get(id(run))
        if segment is None or segment.chat is None:
            return
        span, segment.chat = segment.chat, None
        ended: dict[str, Any] = {}
        if response is not None:
            ended = {
                gen_ai.GEN_AI_RESPONSE_MODEL: response.model or run.model.model,
                gen_ai.GEN_AI_USAGE_INPUT_TOKENS: response.prompt_tokens,
                gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS: response.completion_tokens,
                gen_ai.GEN_AI_RESPONSE_FINISH_REASONS: (response.finish_reason or "",),
            }
            if response.cost is not None:
                ended["agentsite.cost_usd"] = response.cost
            if self.content:
                ended[gen_ai.GEN_AI_OUTPUT_MESSAGES] = _json([response.message_dict()])
        if message is not None:
            ended["agentsite.sequence"] = message.sequence
            ended["agentsite.message_id"] = message.message_id
        span.set_attributes(ended)  # one call: the SDK locks per call
        if error is not None:
            span.set_attribute(error_attributes.ERROR_TYPE, error.split(":", 1)[0][:100])
            span.set_status(Status(StatusCode.ERROR, error[:500]))
        span.end()

    # --- tool calls ------------------------------------------------------------

    def tool_started(self, run: RunState, call: dict[str, Any], name: str) -> None:
        segment = self._segments.get(id(run))
        if segment is None:
            return
        attributes: dict[str, Any] = {
            **segment.common,
            gen_ai.GEN_AI_OPERATION_NAME: "execute_tool",
            gen_ai.GEN_AI_TOOL_NAME: name,
            gen_ai.GEN_AI_TOOL_CALL_ID: str(call.get("id") or ""),
            gen_ai.GEN_AI_TOOL_TYPE: "function",
            "agentsite.goal_id": run.trace.current_goal_id or "",
        }
        if self.content:
            attributes["gen_ai.tool.call.arguments"] = str((call.get("function") or {}).get("arguments", ""))
        span = self.tracer.start_span(
            f"execute_tool {name}", context=segment.context, kind=SpanKind.INTERNAL, attributes=attributes
        )
        # current while the tool runs: a sub-agent in this thread nests under it
        token = otel_context.attach(otel_trace.set_span_in_context(span, segment.context))
        segment.tools[str(call.get("id") or "")] = (span, token)

    def tool_ended(self, run: RunState, call: dict[str, Any], message: Message | None) -> None:
        segment = self._segments.get(id(run))
        entry = segment.tools.pop(str(call.get("id") or ""), None) if segment else None
        if entry is None:
            return
        span, token = entry
        otel_context.detach(token)  # type: ignore[arg-type]
        if message is None:
            span.set_attribute("agentsite.suspended", True)
        else:
            span.set_attribute("agentsite.sequence", message.sequence)
            if message.kind == "tool_error":
                span.set_attribute(error_attributes.ERROR_TYPE, "tool_error")
                span.set_status(Status(StatusCode.ERROR, (message.description or "tool error")[:500]))
            if self.content:
                span.set_attribute("gen_ai.tool.call.result", str(message.content or ""))
        span.end()


def _span_context(traceparent: Any) -> otel_trace.SpanContext | None:
    if not isinstance(traceparent, str) or not traceparent:
        return None
    found = otel_trace.get_current_span(_propagator.extract({"traceparent": traceparent})).get_span_context()
    return found if found.is_valid else None


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def register_from_environment() -> SpanObserver | None:
    """Install span export for every run when the OTEL_* variables configure it (at app start)."""
    provider = provider_from_environment()
    if provider is None:
        return None
    from traces.runner.extensions import extensions

    observer = SpanObserver(provider)
    extensions.observers.append(observer)
    return observer
