"""Remote agents (S5): sub-traces run by another instance of this service.

A remote child is named `agent://<host:port>/<trace_id>` (seed "跨设备存储"). The
instance is reached over its REST API (`POST /api/traces`, `POST
/api/traces/{id}/run`, polling `GET /api/traces/{id}` until the run ends) with
the API key configured for it in `AGENT_REMOTE_AGENTS` (a JSON object: URL or
`host:port` -> token). Only configured instances are reachable, so a model
cannot point the service at arbitrary hosts. Every failure is a RemoteAgentError
with a reason the model can act on.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any

import httpx
from django.conf import settings

from traces.collaboration.subtraces import TERMINAL, ChildOutcome

SCHEME = "agent://"


class RemoteAgentError(Exception):
    """A remote call that failed; the message is what the model reads."""


@dataclass
class RemoteAgent:
    base_url: str  # "http://host:port", no trailing slash
    key: str

    @property
    def host(self) -> str:
        return urllib.parse.urlsplit(self.base_url).netloc

    def remote_id(self, trace_id: str) -> str:
        return f"{SCHEME}{self.host}/{trace_id}"


def is_remote_id(value: str | None) -> bool:
    return bool(value) and str(value).startswith(SCHEME)


def split_remote_id(value: str) -> tuple[str, str]:
    """`agent://host:port/trace_id` -> (host:port, trace_id)."""
    rest = value[len(SCHEME) :]
    host, _, trace_id = rest.partition("/")
    if not host or not trace_id:
        raise RemoteAgentError(f"{value!r} is not a remote trace id; expected agent://host:port/trace_id")
    return host, trace_id


def configured_agents() -> list[RemoteAgent]:
    agents = []
    for target, key in (getattr(settings, "AGENT_REMOTE_AGENTS", None) or {}).items():
        url = target if "://" in target else f"http://{target}"
        agents.append(RemoteAgent(url.rstrip("/"), str(key)))
    return agents


def remote_agent(target: str) -> RemoteAgent:
    """The configured remote for a URL or `host:port`; RemoteAgentError if none."""
    wanted = urllib.parse.urlsplit(target if "://" in target else f"http://{target}")
    for agent in configured_agents():
        if agent.host == wanted.netloc:
            return agent
    known = ", ".join(a.base_url for a in configured_agents()) or "none"
    raise RemoteAgentError(
        f"no remote agent is configured for {target!r} (configured: {known}); "
        "an operator adds it with its API key to AGENT_REMOTE_AGENTS"
    )


def run_remote(
    agent: RemoteAgent,
    *,
    task: str,
    messages: list[dict[str, Any]] | None = None,
    agent_type: str | None = None,
    continue_trace_id: str | None = None,
    timeout: float | None = None,
) -> ChildOutcome:
    """Start (or continue) a run on `agent`, wait for it to end, return what came of it."""
    body_messages = [*(messages or []), {"role": "user", "content": task}]
    if continue_trace_id:
        _request(agent, "POST", f"/api/traces/{_quote(continue_trace_id)}/run", {"messages": body_messages})
        trace_id = continue_trace_id
    else:
        payload: dict[str, Any] = {"messages": body_messages}
        if agent_type and agent_type != "default":
            payload["preset"] = agent_type
        started = _request(agent, "POST", "/api/traces", payload)
        trace_id = str(started.get("trace_id") or "")
        if not trace_id:
            raise RemoteAgentError(f"{agent.base_url} answered without a trace_id: {started}")
    trace = _wait(agent, trace_id, timeout or settings.AGENT_REMOTE_TIMEOUT)
    return ChildOutcome(
        agent.remote_id(trace_id),
        trace.get("status") or "unknown",
        summary=trace.get("result_summary"),
        error=trace.get("error_message"),
        stats={
            "message_count": 0,
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "total_tokens": int(trace.get("total_tokens") or 0),
            "total_cost": float(trace.get("total_cost") or 0.0),
            "unpriced_calls": int(trace.get("unpriced_calls") or 0),
            "duration_ms": 0,
        },
        remote=agent.base_url,
    )


def _wait(agent: RemoteAgent, trace_id: str, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        trace = _request(agent, "GET", f"/api/traces/{_quote(trace_id)}")
        if trace.get("status") in (*TERMINAL, "waiting"):
            return trace
        if time.monotonic() > deadline:
            raise RemoteAgentError(
                f"remote trace {agent.remote_id(trace_id)} is still {trace.get('status')} after {timeout:g} s; "
                f"call agent again with continue_from={agent.remote_id(trace_id)!r} to keep waiting for it"
            )
        time.sleep(settings.AGENT_REMOTE_POLL_SECONDS)


def _quote(trace_id: str) -> str:
    return urllib.parse.quote(trace_id, safe="@-")


def _request(
    agent: RemoteAgent, method: str, path: str, body: dict[str, Any] | None = None
) -> dict[str, Any]:
    """One call to `agent`'s API, its JSON answer; a redirect is not followed (only the
    configured instance is spoken to) and, like any answer but 2xx, is a RemoteAgentError."""
    try:
        response = httpx.request(
            method,
            agent.base_url + path,
            json=body,
            headers={"Authorization": f"Token {agent.key}"},
            timeout=settings.AGENT_REMOTE_REQUEST_TIMEOUT,
        )
    except (httpx.TransportError, httpx.InvalidURL) as exc:  # refused, reset, timed out, bad address
        raise RemoteAgentError(f"remote agent {agent.base_url} is unreachable ({exc})") from None
    if not response.is_success:
        detail = response.content[:500].decode(errors="replace")
        try:
            detail = json.loads(detail).get("error", detail)
        except (ValueError, AttributeError):
            pass
        raise RemoteAgentError(
            f"remote agent {agent.base_url} answered {response.status_code} to {method} {path}: {detail}"
        )
    try:
        return json.loads(response.content or b"{}")
    except ValueError:
        raise RemoteAgentError(
            f"remote agent {agent.base_url} answered {method} {path} with invalid JSON"
        ) from None
