"""OpenTelemetry export of runs with the GenAI semantic conventions (issue 22).

Off unless the standard variables configure it (`OTEL_EXPORTER_OTLP_ENDPOINT` or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, or `OTEL_TRACES_EXPORTER=otlp|console`;
`OTEL_SDK_DISABLED=true` wins; read by `traces/observability/otel_provider.py`).
`SpanObserver` is a runner observer
(`traces/runner/extensions.py:RunObserver`, registered by `traces/apps.py`): on the
run's thread it only records a span's fields and, when the span ends, hands one
finished `ReadableSpan` to the SDK's BatchSpanProcessor, whose own thread encodes and
exports: a slow or dead collector fills a bounded queue (spans dropped past it), never
the run.

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
import os
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace import Tracer as SdkTracer
from opentelemetry.sdk.trace.sampling import Decision
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv.attributes import error_attributes
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from traces.llm_request import provider_name
from traces.models import Trace
from traces.observability.otel_provider import provider_from_environment as provider_from_environment
from traces.observability.otel_provider import provider_with as provider_with

if TYPE_CHECKING:
    from traces.llm import LLMResponse
    from traces.models import Message
    from traces.runner.state import RunState

CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
STORED = "otel"  # Trace.context key: {"traceparent": ..., "waiting": {...}}
_propagator = TraceContextTextMapPropagator()
_UNSET = Status(StatusCode.UNSET)


def capture_content() -> bool:
    return os.environ.get(CAPTURE_CONTENT, "").strip().lower() == "true"


@dataclass(slots=True)
class _Open:
    """A span in flight: plain fields the run's thread fills; `SpanObserver._end` turns it
    into a ReadableSpan for the span processor (no SDK Span object, lock or per-call
    attribute cleaning on the run's thread)."""

    name: str
    context: SpanContext
    parent: SpanContext | None
    kind: SpanKind
    attributes: dict[str, Any]
    links: tuple[Link, ...] = ()
    start: int = field(default_factory=time.time_ns)
    events: list[Event] = field(default_factory=list)


@dataclass
class _Segment:
    span: _Open
    context: otel_context.Context  # the segment's span as the current one (parent of its children)
    common: dict[str, Any]  # attributes every span of the segment carries, built once
    chat: _Open | None = None
    tools: dict[str, tuple[_Open, object]] = field(default_factory=dict)  # call id -> (span, attach token)


class SpanObserver:
    """Spans of every run (a RunObserver); per-run state keyed by the RunState's id.

    The run's thread does the least it can per span: ids from the provider's id
    generator, a dict of attributes, and at the end one `ReadableSpan` handed to the
    provider's span processor (the BatchSpanProcessor appends it to its queue; its
    thread encodes and sends). Sampling is decided once per segment by the provider's
    sampler; a segment's spans follow it (the SDK default, parent-based).
    """

    def __init__(self, provider: TracerProvider, *, content: bool | None = None) -> None:
        self.provider = provider
        tracer = provider.get_tracer("agentsite")
        if not isinstance(tracer, SdkTracer):  # provider is an SDK TracerProvider: always true
            raise TypeError("SpanObserver needs the OpenTelemetry SDK's TracerProvider")
        self._processor = tracer.span_processor
        self._ids = tracer.id_generator
        self._sampler = tracer.sampler
        self._resource = provider.resource
        self._scope = InstrumentationScope("agentsite")
        self._max_length = SpanLimits().max_span_attribute_length  # OTEL_*ATTRIBUTE_VALUE_LENGTH_LIMIT
        self.content = capture_content() if content is None else content
        self._segments: dict[int, _Segment] = {}
        self._lock = threading.Lock()

    def _child(self, parent: SpanContext, name: str, kind: SpanKind, attributes: dict[str, Any]) -> _Open:
        context = SpanContext(
            parent.trace_id, self._ids.generate_span_id(), False, parent.trace_flags, parent.trace_state
        )
        return _Open(name, context, parent, kind, attributes)

    def _end(self, span: _Open, status: Status = _UNSET, end: int | None = None) -> None:
        if not span.context.trace_flags.sampled:
            return
        self._processor.on_end(
            ReadableSpan(
                span.name,
                context=span.context,
                parent=span.parent,
                resource=self._resource,
                attributes={k: v for k, v in span.attributes.items() if v is not None},
                events=span.events,
                links=span.links,
                kind=span.kind,
                status=status,
                start_time=span.start,
                end_time=time.time_ns() if end is None else end,
                instrumentation_scope=self._scope,
            )
        )

    def _text(self, value: str) -> str:
        return value if self._max_length is None else value[: self._max_length]

    # --- run segments ----------------------------------------------------------

    def segment_started(self, run: RunState) -> None:
        trace = run.trace
        stored = dict((trace.context or {}).get(STORED) or {})
        parent, links = self._parent_of(trace, stored)
        agent = trace.agent_type or "default"
        name = f"invoke_agent {agent}"
        attributes = {
            gen_ai.GEN_AI_OPERATION_NAME: "invoke_agent",
            gen_ai.GEN_AI_PROVIDER_NAME: provider_name(run.model.model),
            gen_ai.GEN_AI_AGENT_NAME: agent,
            gen_ai.GEN_AI_CONVERSATION_ID: trace.trace_id,
            gen_ai.GEN_AI_REQUEST_MODEL: run.model.model,
            "agentsite.trace_id": trace.trace_id,
            "agentsite.parent_trace_id": trace.parent_trace_id or "",
            "agentsite.run_token": trace.run_token,
            "agentsite.branch": trace.head_sequence or 0,  # the message the segment continues from
        }
        span = self._root(parent, name, attributes, tuple(links))
        ctx = otel_trace.set_span_in_context(otel_trace.NonRecordingSpan(span.context))
        common = {
            gen_ai.GEN_AI_CONVERSATION_ID: trace.trace_id,
            gen_ai.GEN_AI_AGENT_NAME: agent,
        }
        with self._lock:
            self._segments[id(run)] = _Segment(span, ctx, common)
        waiting = stored.pop("waiting", None)
        if isinstance(waiting, dict):
            self._waited(span, waiting)
        carrier: dict[str, str] = {}
        _propagator.inject(carrier, ctx)
        stored["traceparent"] = carrier.get("traceparent", "")
        trace.context = {**(trace.context or {}), STORED: stored}  # written with the next commit

    def _root(
        self, parent: otel_context.Context, name: str, attributes: dict[str, Any], links: tuple[Link, ...]
    ) -> _Open:
        """A segment's span under `parent` (or a new OTel trace), sampled as the provider says."""
        above = otel_trace.get_current_span(parent).get_span_context()
        trace_id = above.trace_id if above.is_valid else self._ids.generate_trace_id()
        decision = self._sampler.should_sample(parent, trace_id, name, SpanKind.INTERNAL, attributes, links)
        flags = TraceFlags(TraceFlags.SAMPLED if decision.decision == Decision.RECORD_AND_SAMPLE else 0)
        context = SpanContext(trace_id, self._ids.generate_span_id(), False, flags, decision.trace_state)
        attributes.update(decision.attributes or {})
        return _Open(name, context, above if above.is_valid else None, SpanKind.INTERNAL, attributes, links)

    def _parent_of(self, trace: Trace, stored: dict[str, Any]) -> tuple[otel_context.Context, list[Link]]:
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

    def _waited(self, segment: _Open, waiting: dict[str, Any]) -> None:
        since = waiting.get("since")
        if not isinstance(since, int):
            return
        kind = str(waiting.get("kind", "wait"))
        attributes = {"agentsite.wait.kind": kind, "gen_ai.tool.name": str(waiting.get("tool", ""))}
        wait = self._child(segment.context, f"wait {kind}", SpanKind.INTERNAL, attributes)
        wait.start = since
        self._end(wait)

    def waiting(self, run: RunState, kind: str, tool: str) -> None:
        segment = self._segments.get(id(run))
        if segment is not None:
            segment.span.events.append(
                Event("agentsite.wait", {"agentsite.wait.kind": kind, "gen_ai.tool.name": tool})
            )
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
            self._end(span)
        if segment.chat is not None:
            self._end(segment.chat)
        trace = run.trace
        segment.span.attributes.update(
            {
                "agentsite.status": trace.status,
                "agentsite.total_tokens": trace.total_tokens,
                "agentsite.cost_usd": trace.total_cost,
                gen_ai.GEN_AI_USAGE_INPUT_TOKENS: trace.total_prompt_tokens,
                gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS: trace.total_completion_tokens,
            }
        )
        status = _UNSET
        if trace.status in ("failed", "running"):  # running: the lease was lost or the run crashed
            status = Status(StatusCode.ERROR, (trace.error_message or trace.status)[:500])
        self._end(segment.span, status)

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
            attributes[gen_ai.GEN_AI_INPUT_MESSAGES] = self._text(_json(messages))
            if tools:
                attributes["gen_ai.tool.definitions"] = self._text(_json(tools))
        segment.chat = self._child(segment.span.context, f"chat {model}", SpanKind.CLIENT, attributes)

    def model_ended(
        self, run: RunState, response: LLMResponse | None, message: Message | None, error: str | None
    ) -> None:
        segment = self._segments.get(id(run))
        if segment is None or segment.chat is None:
            return
        span, segment.chat = segment.chat, None
        attributes = span.attributes
        if response is not None:
            attributes[gen_ai.GEN_AI_RESPONSE_MODEL] = response.model or run.model.model
            attributes[gen_ai.GEN_AI_USAGE_INPUT_TOKENS] = response.prompt_tokens
            attributes[gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS] = response.completion_tokens
            attributes[gen_ai.GEN_AI_RESPONSE_FINISH_REASONS] = (response.finish_reason or "",)
            if response.cost is not None:
                attributes["agentsite.cost_usd"] = response.cost
            if self.content:
                attributes[gen_ai.GEN_AI_OUTPUT_MESSAGES] = self._text(_json([response.message_dict()]))
        if message is not None:
            attributes["agentsite.sequence"] = message.sequence
            attributes["agentsite.message_id"] = message.message_id
        status = _UNSET
        if error is not None:
            attributes[error_attributes.ERROR_TYPE] = error.split(":", 1)[0][:100]
            status = Status(StatusCode.ERROR, error[:500])
        self._end(span, status)

    # --- tool calls ------------------------------------------------------------

    def tool_started(self, run: RunState, call: dict[str, Any], name: str) -> None:
        segment = self._segments.get(id(run))
        if segment is None:
            return
        call_id = str(call.get("id") or "")
        attributes: dict[str, Any] = {
            **segment.common,
            gen_ai.GEN_AI_OPERATION_NAME: "execute_tool",
            gen_ai.GEN_AI_TOOL_NAME: name,
            gen_ai.GEN_AI_TOOL_CALL_ID: call_id,
            gen_ai.GEN_AI_TOOL_TYPE: "function",
            "agentsite.goal_id": run.trace.current_goal_id or "",
        }
        if self.content:
            arguments = str((call.get("function") or {}).get("arguments", ""))
            attributes["gen_ai.tool.call.arguments"] = self._text(arguments)
        span = self._child(segment.span.context, f"execute_tool {name}", SpanKind.INTERNAL, attributes)
        # current while the tool runs: a sub-agent in this thread nests under it
        token = otel_context.attach(
            otel_trace.set_span_in_context(otel_trace.NonRecordingSpan(span.context), segment.context)
        )
        segment.tools[call_id] = (span, token)

    def tool_ended(self, run: RunState, call: dict[str, Any], message: Message | None) -> None:
        segment = self._segments.get(id(run))
        entry = segment.tools.pop(str(call.get("id") or ""), None) if segment else None
        if entry is None:
            return
        span, token = entry
        otel_context.detach(token)  # type: ignore[arg-type]
        status = _UNSET
        if message is None:
            span.attributes["agentsite.suspended"] = True
        else:
            span.attributes["agentsite.sequence"] = message.sequence
            if message.kind == "tool_error":
                span.attributes[error_attributes.ERROR_TYPE] = "tool_error"
                status = Status(StatusCode.ERROR, (message.description or "tool error")[:500])
            if self.content:
                span.attributes["gen_ai.tool.call.result"] = self._text(str(message.content or ""))
        self._end(span, status)


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
