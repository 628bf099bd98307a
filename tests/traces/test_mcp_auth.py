"""Who may call /mcp (traces/mcp/auth.py:TokenAuth), as an ASGI app on the suite's
database: the REST API's token and refusals, Host and Origin against ALLOWED_HOSTS."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from rest_framework.authtoken.models import Token

from traces.mcp.auth import TokenAuth

pytestmark = pytest.mark.django_db(transaction=True)  # the token is read in another thread


def answer(headers: dict[str, str]) -> tuple[int, dict[str, Any], dict[bytes, bytes]]:
    """Call TokenAuth in front of an app that answers 200 with the user's name."""

    async def inner(scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = json.dumps({"user": scope["user"].get_username()}).encode()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "headers": [
            (k.lower().encode(), v.encode()) for k, v in {"Host": "localhost:8000", **headers}.items()
        ],
    }
    asyncio.run(TokenAuth(inner)(scope, receive, send))
    start, body = sent
    return start["status"], json.loads(body["body"]), dict(start["headers"])


def test_a_bearer_or_token_key_authenticates_as_its_user(integrator) -> None:
    key = Token.objects.create(user=integrator).key
    assert answer({"Authorization": f"Bearer {key}"})[:2] == (200, {"user": "integrator"})
    assert answer({"Authorization": f"Token {key}"})[:2] == (200, {"user": "integrator"})


def test_no_key_a_bad_key_or_an_inactive_user_is_the_apis_401(integrator) -> None:
    key = Token.objects.create(user=integrator).key
    status, body, headers = answer({})
    assert (status, body["code"]) == (401, "not_authenticated")
    assert headers[b"www-authenticate"].startswith(b"Bearer")
    assert answer({"Authorization": "Bearer nope"})[:2] == (
        401,
        {"error": "Invalid token.", "code": "authentication_failed"},
    )
    integrator.is_active = False
    integrator.save()
    assert answer({"Authorization": f"Bearer {key}"})[1]["error"] == "User inactive or deleted."


def test_a_foreign_host_or_origin_is_refused(integrator) -> None:
    key = Token.objects.create(user=integrator).key
    auth = {"Authorization": f"Bearer {key}"}
    assert answer({**auth, "Host": "evil.example"})[1]["code"] == "invalid_host"
    assert answer({**auth, "Origin": "https://evil.example"})[0] == 403
    assert answer({**auth, "Origin": "http://localhost:3000"})[0] == 200
