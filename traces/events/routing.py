"""WebSocket routes of the trace API (mounted in agentsite/asgi.py)."""

from __future__ import annotations

from channels.routing import URLRouter
from django.urls import path

from traces.events.consumers import TraceWatchConsumer

websocket_router = URLRouter(
    [
        # django-stubs types path() for views only; Channels routes ASGI consumers through it
        path("api/traces/<str:trace_id>/watch", TraceWatchConsumer.as_asgi()),  # type: ignore[arg-type, list-item]
    ]
)
