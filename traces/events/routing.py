"""WebSocket routes of the trace API (mounted in agentsite/asgi.py)."""

from __future__ import annotations

from django.urls import path

from traces.events.consumers import TraceWatchConsumer

websocket_urlpatterns = [
    path("api/traces/<str:trace_id>/watch", TraceWatchConsumer.as_asgi()),
]
