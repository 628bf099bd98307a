"""Signed webhooks: a JSON POST per notification, retried with backoff (tenacity).

Each request is signed with `AGENT_NOTIFY_WEBHOOK_SECRET`:

    X-Agentsite-Timestamp: <unix seconds>
    X-Agentsite-Signature: sha256=<hex HMAC-SHA256(secret, f"{timestamp}.{body}")>
    X-Agentsite-Delivery:  <payload id, the same for every attempt>

A receiver recomputes the HMAC over the timestamp header, a dot and the raw body,
compares in constant time, and refuses timestamps more than a few minutes from its
clock (a replay); `verify_signature` does all three. Connection errors, 5xx and 429
are retried with exponential backoff up to `AGENT_NOTIFY_RETRIES` times, each attempt
signed afresh; then the task logs that it gave up. Delivery is at least once: a
receiver dedupes by the delivery id. Logs name a webhook by scheme and host only
(a path or query may hold a token) and never show the secret.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from typing import Any
from urllib.parse import urlsplit

import httpx
import tenacity
from django.conf import settings

from memory.presets import UnknownPreset, get_preset

logger = logging.getLogger(__name__)

SIGNATURE_TOLERANCE = 300  # seconds a receiver lets a timestamp be away from its clock


def webhook_targets(agent_type: str | None) -> dict[str, str]:
    """digest -> URL: the deployment's webhooks, then the preset's `extra["notify_webhooks"]`."""
    urls = list(settings.AGENT_NOTIFY_WEBHOOK_URLS)
    try:
        extra = get_preset(agent_type or "default").extra or {}
    except UnknownPreset:
        extra = {}
    named = extra.get("notify_webhooks") or []
    for url in [named] if isinstance(named, str) else named:
        if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https"):
            logger.warning("preset %s: a notify_webhooks entry is not an http(s) URL; skipped", agent_type)
        elif not settings.AGENT_NOTIFY_WEBHOOK_SECRET:
            logger.warning("preset %s names webhooks but AGENT_NOTIFY_WEBHOOK_SECRET is unset", agent_type)
        else:
            urls.append(url)
    return {_digest(url): url for url in urls}


def _digest(url: str) -> str:
    return hashlib.sha256(url.encode()).hexdigest()[:16]


def _shown(url: str) -> str:
    """A URL as logs show it: scheme and host, never its path or query (tokens)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}/…"


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """The `X-Agentsite-Signature` value of `body` sent at `timestamp`."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


def verify_signature(
    *,
    secret: str,
    timestamp: str,
    body: bytes,
    signature_header: str,
    tolerance: float = SIGNATURE_TOLERANCE,
    now: float | None = None,
) -> bool:
    """What a receiver checks: the HMAC matches and the timestamp is fresh (no replay)."""
    try:
        sent = int(timestamp)
    except (TypeError, ValueError):
        return False
    if abs((time.time() if now is None else now) - sent) > tolerance:
        return False
    return hmac.compare_digest(signature(secret, timestamp, body), signature_header or "")


class _ReceiverBusy(Exception):
    """A 5xx or 429 answer: worth another attempt."""

    def __init__(self, status_code: int) -> None:
        super().__init__(f"HTTP {status_code}")
        self.status_code = status_code


def deliver_webhook(payload: dict[str, Any], digest: str) -> bool:
    """django-q2 task: POST `payload`, signed, to the webhook `digest` names; True when accepted.

    Retries connection errors, 5xx and 429 with exponential backoff; a refusal (other
    4xx) or running out of attempts is logged, never raised (nothing would retry better).
    """
    url = webhook_targets(payload.get("agent_type")).get(digest)
    if url is None:
        logger.warning("notification %s: its webhook is no longer configured; not sent", payload["id"])
        return False
    body = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()
    attempts = settings.AGENT_NOTIFY_RETRIES + 1
    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(attempts),
        wait=tenacity.wait_exponential(
            multiplier=settings.AGENT_NOTIFY_BACKOFF, max=settings.AGENT_NOTIFY_BACKOFF_MAX
        ),
        retry=tenacity.retry_if_exception_type((httpx.TransportError, _ReceiverBusy)),
        before_sleep=lambda state: logger.info(
            "notification %s to %s: %s; attempt %d of %d",
            payload["id"],
            _shown(url),
            _describe(state.outcome.exception() if state.outcome else None),
            state.attempt_number + 1,
            attempts,
        ),
        reraise=True,
    )
    try:
        with httpx.Client(timeout=settings.AGENT_NOTIFY_TIMEOUT, follow_redirects=False) as client:
            response = retrying(_post, client, url, body, payload["id"])
    except (httpx.HTTPError, _ReceiverBusy) as exc:
        logger.warning(
            "notification %s to %s given up after %d attempts: %s",
            payload["id"],
            _shown(url),
            attempts,
            _describe(exc),
        )
        return False
    if response.status_code >= 300:
        logger.warning(
            "notification %s refused by %s: HTTP %d", payload["id"], _shown(url), response.status_code
        )
        return False
    return True


def _post(client: httpx.Client, url: str, body: bytes, delivery_id: str) -> httpx.Response:
    timestamp = str(int(time.time()))  # signed afresh per attempt: a late retry is not a replay
    response = client.post(
        url,
        content=body,
        headers={
            "Content-Type": "application/json",
            "User-Agent": "agentsite-notifications",
            "X-Agentsite-Delivery": delivery_id,
            "X-Agentsite-Timestamp": timestamp,
            "X-Agentsite-Signature": signature(settings.AGENT_NOTIFY_WEBHOOK_SECRET, timestamp, body),
        },
    )
    if response.status_code >= 500 or response.status_code == 429:
        raise _ReceiverBusy(response.status_code)
    return response


def _describe(exc: BaseException | None) -> str:
    # An httpx error's text can hold the URL; its type and our status line cannot.
    if isinstance(exc, _ReceiverBusy):
        return str(exc)
    return type(exc).__name__ if exc is not None else "?"
