"""Who calls /mcp: the REST API's token, checked by the REST API's own class.

MCP clients send `Authorization: Bearer <key>` (the MCP authorization spec's
scheme); `Token <key>`, the REST API's, works too. The key is a DRF API token
(`rest_framework.authtoken`), checked by DRF's `TokenAuthentication` as on every
API request, so an inactive user or a deleted token is refused the same way.
Every HTTP request is authenticated afresh (the server is stateless: there is no
session to remember a user by). A refusal is a 401 in the API's error shape with a
`WWW-Authenticate: Bearer` challenge; a database outage a 503, as the API answers.

Browsers: a request whose Host is not in ALLOWED_HOSTS is refused (400), as Django
refuses it, and so is one carrying an Origin header for another host (403): a
DNS-rebinding page cannot reach /mcp, and the token never rides in a cookie.
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import urlsplit

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.http.request import split_domain_port, validate_host
from rest_framework.exceptions import AuthenticationFailed, NotAuthenticated

from agentsite.outage import REASON as OUTAGE_REASON
from agentsite.outage import RETRY_AFTER_SECONDS
from traces.api.authentication import TokenAuthentication

logger = logging.getLogger(__name__)

USER_KEY = "user"  # the ASGI scope's key for the caller, as Channels names it
SCHEMES = (b"bearer", b"token")


def scope_user(request: Any) -> Any:
    """The authenticated user of an MCP request (a Starlette Request over our scope)."""
    return request.scope[USER_KEY]


def bearer_key(scope: dict[str, Any]) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, key = value.partition(b" ")
            if scheme.lower() in SCHEMES and key.strip():
                return key.strip().decode("latin1")
    return None


@database_sync_to_async
def _user_for_key(key: str) -> Any:
    user, _token = TokenAuthentication().authenticate_credentials(key)
    return user


def _header(scope: dict[str, Any], wanted: bytes) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == wanted:
            return value.decode("latin1")
    return None


def _host_refusal(scope: dict[str, Any]) -> tuple[int, str, str] | None:
    host = _header(scope, b"host") or ""
    domain, _port = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return 400, f"invalid Host header {host!r}: not in ALLOWED_HOSTS", "invalid_host"
    origin = _header(scope, b"origin")
    if origin is not None:
        origin_domain = urlsplit(origin).hostname or ""
        if not validate_host(origin_domain, settings.ALLOWED_HOSTS):
            return 403, f"origin {origin!r} is not allowed", "invalid_origin"
    return None


async def _answer(send: Any, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]]) -> None:
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


class TokenAuth:
    """ASGI middleware in front of the MCP app: sets scope["user"] or answers the refusal."""

    challenge = (b"www-authenticate", b'Bearer realm="agentsite"')

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        refused = _host_refusal(scope)
        if refused is not None:
            status, reason, code = refused
            await _answer(send, status, {"error": reason, "code": code}, [])
            return
        key = bearer_key(scope)
        if key is None:
            error: Any = NotAuthenticated()
            await _answer(
                send, 401, {"error": str(error.detail), "code": error.default_code}, [self.challenge]
            )
            return
        try:
            user = await _user_for_key(key)
        except AuthenticationFailed as exc:
            await _answer(send, 401, {"error": str(exc.detail), "code": exc.default_code}, [self.challenge])
            return
        except (OperationalError, InterfaceError) as exc:
            logger.warning("MCP request refused: database unavailable (%s)", exc)
            retry = (b"retry-after", str(RETRY_AFTER_SECONDS).encode())
            await _answer(send, 503, {"error": OUTAGE_REASON, "code": "unavailable"}, [retry])
            return
        await self.app(dict(scope, **{USER_KEY: user}), receive, send)
