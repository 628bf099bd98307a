"""The TracerProvider of span export (issue 22): what the standard OTEL_* variables
configure (`provider_from_environment`, read once at app start by
`traces/observability/otel.py:register_from_environment`), or one for a given
exporter (`provider_with`: tests, bench/otel_overhead.py).
"""

from __future__ import annotations

import logging
import os

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

logger = logging.getLogger(__name__)


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
