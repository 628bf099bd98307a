"""Authentication and origin checks for the WebSocket API (W4).

The portal's browser authenticates with its session cookie (Channels'
AuthMiddlewareStack); integrations with the same DRF token as the REST API, in an
`Authorization: Token <key>` header or, for clients that cannot set headers on a
WebSocket (browsers), a `?token=<key>` query parameter. A token, when given,
decides alone: a bad one leaves the connection anonymous even if a session exists.

Origins. Browsers always send an Origin header with a WebSocket handshake, and
only browsers carry ambient cookies, so cross-site WebSocket hijacking is checked
against ALLOWED_HOSTS whenever an Origin is present; a client without one (an
integration's script) is not a browser and is let through to authenticate.

Outages. The session, the token and the trace are read from the database at
connect; when it is unreachable the socket closes with 4503 (as HTTP 503; try again later)
instead of the handshake failing with an HTTP 500 (DatabaseOutageGuard).
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import parse_qs

from channels.auth import AuthMiddlewareStack
from channels.security.websocket import OriginValidator
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.db import InterfaceError, OperationalError

from traces.api.authentication import active_user_for_key
from traces.events.consumers import CLOSE_UNAVAILABLE
from traces.events.reads import read

logger = logging.getLogger(__name__)

TOKEN_PARAM = "token"
TOKEN_SCHEME = b"token"


def token_from_scope(scope: dict[str, Any]) -> str | None:
    """The API token a handshake carries (header first, then the query string), or None."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, key = value.partition(b" ")
            if scheme.lower() == TOKEN_SCHEME and key.strip():
                return key.strip().decode("latin1")
    query = parse_qs(scope.get("query_string", b"").decode("latin1"))
    values = query.get(TOKEN_PARAM)
    return values[0] if values and values[0] else None


async def user_for_token(key: str) -> Any:
    """The token's active user, or AnonymousUser; read on a watch-read thread
    (traces/events/reads.py: a kept connection, not a connect per handshake)."""
    return await read(_user_for_token, key)


def _user_for_token(key: str) -> Any:
    return active_user_for_key(key) or AnonymousUser()


class TokenAuthMiddleware:
    """Sets scope["user"] from an API token when the handshake carries one."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        key = token_from_scope(scope)
        if key is not None:
            scope = dict(scope, user=await user_for_token(key))
        return await self.app(scope, receive, send)


class BrowserOriginValidator(OriginValidator):
    """ALLOWED_HOSTS origin check for browsers; clients without an Origin header pass."""

    def __init__(self, app: Any) -> None:
        super().__init__(app, settings.ALLOWED_HOSTS)

    def valid_origin(self, parsed_origin: Any) -> bool:
        if parsed_origin is None:
            return True
        return self.validate_origin(parsed_origin)


class DatabaseOutageGuard:
    """Closes the socket with 4503 when the database is unreachable at connect.

    Wraps the whole stack, so it covers the session and token look-ups as well as
    the consumer's own reads; the client reconnects later with its `since`.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        accepted = False

        async def send_tracking_accept(message: dict[str, Any]) -> None:
            nonlocal accepted
            accepted = accepted or message["type"] == "websocket.accept"
            await send(message)

        try:
            return await self.app(scope, receive, send_tracking_accept)
        except (OperationalError, InterfaceError) as exc:
            logger.warning("WebSocket %s closed: database unavailable (%s)", scope.get("path"), exc)
            if not accepted:
                # A close code only reaches the client after the handshake.
                await send({"type": "websocket.accept"})
            await send({"type": "websocket.close", "code": CLOSE_UNAVAILABLE})


def websocket_auth_stack(app: Any) -> Any:
    """Outage guard, origin check, then session auth, then token auth (which overrides the session)."""
    return DatabaseOutageGuard(BrowserOriginValidator(AuthMiddlewareStack(TokenAuthMiddleware(app))))
