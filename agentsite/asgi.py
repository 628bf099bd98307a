"""ASGI entry point: HTTP through Django (agentsite/web.py), WebSockets through Channels."""

from __future__ import annotations

import os

from agentsite import heap
from agentsite.web import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter  # noqa: E402
from django.urls import get_resolver  # noqa: E402

from traces.a2a_protocol.app import with_a2a  # noqa: E402
from traces.api.websocket_auth import websocket_auth_stack  # noqa: E402
from traces.events.routing import websocket_router  # noqa: E402
from traces.mcp.mount import with_mcp  # noqa: E402

application = ProtocolTypeRouter(
    {
        # /mcp: agentsite as an MCP server (traces/mcp/); A2A (X4): the card and /a2a/
        "http": with_a2a(with_mcp(django_asgi_app)),
        "websocket": websocket_auth_stack(websocket_router),
    }
)

# The URL conf (every view, serializer and DRF with them) loads now, not in the first
# request, which held every other request behind its imports for ~60 ms (issue 18: no
# cold start); then startup's objects go out of the full collections' walk (agentsite/heap.py).
get_resolver().url_patterns  # noqa: B018 (the access imports the URL conf)
heap.settle()
