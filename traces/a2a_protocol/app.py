"""The A2A endpoints as one ASGI app beside Django (agentsite/asgi.py routes to it).

The SDK's Starlette dispatchers serve the JSON-RPC binding at /a2a/jsonrpc and
the HTTP+JSON binding under /a2a/rest, with our TraceRequestHandler behind both;
the agent card is public at /.well-known/agent-card.json. Every other A2A
request needs the REST API's token (`Authorization: Bearer <key>` or
`Token <key>`, checked by DRF's TokenAuthentication, so the same rules hold:
unknown key, inactive user); without one it is answered 401 with a
`WWW-Authenticate: Bearer` header and a JSON body, before any A2A dispatch.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from a2a.auth.user import User
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import DefaultServerCallContextBuilder, create_jsonrpc_routes, create_rest_routes
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from channels.db import database_sync_to_async
from rest_framework.exceptions import AuthenticationFailed
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from traces.a2a_protocol.card import JSONRPC_PATH, REST_PATH, agent_card
from traces.a2a_protocol.handler import AgentsiteUser, TraceRequestHandler
from traces.api.authentication import TokenAuthentication

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]
USER_KEY = "agentsite.user"


class ContextBuilder(DefaultServerCallContextBuilder):
    """The call context's user is the Django user the token middleware found."""

    def build_user(self, request: Request) -> User:
        return AgentsiteUser(request.scope.get(USER_KEY))


def _token_user(key: str) -> Any:
    try:
        return TokenAuthentication().authenticate_credentials(key)[0]
    except AuthenticationFailed:
        return None


def _key(scope: Scope) -> str | None:
    for name, value in scope.get("headers") or []:
        if name.lower() == b"authorization":
            scheme, _, key = value.decode("latin-1").strip().partition(" ")
            if scheme.lower() in ("bearer", "token") and key.strip():
                return key.strip()
    return None


def _unauthorized(detail: str) -> Response:
    return JSONResponse(
        {"error": detail, "code": "not_authenticated"},
        status_code=401,
        headers={"WWW-Authenticate": 'Bearer realm="agentsite"'},
    )


class TokenAuth:
    """ASGI middleware: an A2A call needs an API token; the card does not."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] == AGENT_CARD_WELL_KNOWN_PATH:
            await self.app(scope, receive, send)
            return
        key = _key(scope)
        user = await database_sync_to_async(_token_user)(key) if key else None
        if user is None:
            detail = "invalid API token" if key else "an API token is required (Authorization: Bearer <key>)"
            await _unauthorized(detail)(scope, receive, send)
            return
        scope[USER_KEY] = user
        await self.app(scope, receive, send)


async def _card(request: Request) -> Response:
    base = f"{request.url.scheme}://{request.url.netloc}"
    card = await database_sync_to_async(agent_card)(base)
    return JSONResponse(agent_card_to_dict(card))


def a2a_app() -> ASGIApp:
    handler, context = TraceRequestHandler(), ContextBuilder()
    routes = [
        Route(AGENT_CARD_WELL_KNOWN_PATH, _card, methods=["GET"]),
        *create_jsonrpc_routes(handler, JSONRPC_PATH, context_builder=context),
        *create_rest_routes(handler, context_builder=context, path_prefix=REST_PATH),
    ]
    return TokenAuth(Starlette(routes=routes))


def is_a2a_path(path: str) -> bool:
    return path == AGENT_CARD_WELL_KNOWN_PATH or path.startswith("/a2a/")


def with_a2a(django_app: Any) -> ASGIApp:
    """Route the A2A paths (is_a2a_path) to the A2A app, everything else to `django_app`."""
    a2a = a2a_app()

    async def route(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and is_a2a_path(scope["path"]):
            await a2a(scope, receive, send)
        else:
            await django_app(scope, receive, send)

    return route
