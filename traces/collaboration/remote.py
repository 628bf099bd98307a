"""Remote agents (S5, X4): tasks run by any A2A agent, another agentsite included.

A remote child is named `agent://<host:port>/<task_id>` (seed "跨设备存储"). The
agent is reached over the A2A protocol (traces/collaboration/a2a_client.py) with
the API key configured for it: a RemoteAgentConfig row (the admin) or
AGENT_REMOTE_AGENTS (a JSON object: URL or `host:port` -> token). Only configured
agents are reachable, so a model cannot point the service at arbitrary hosts.
Every failure is a RemoteAgentError with a reason the model can act on.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Any

from a2a.types import a2a_pb2 as pb
from django.conf import settings

from agentsite.kept import Kept
from traces.collaboration import a2a_client
from traces.collaboration.subtraces import ChildOutcome
from traces.remote_agents import RemoteAgentConfig

SCHEME = "agent://"


class RemoteAgentError(Exception):
    """A remote call that failed; the message is what the model reads."""


@dataclass
class RemoteAgent:
    base_url: str  # "http://host:port", no trailing slash
    key: str
    name: str = ""

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
    """The admin's enabled remote agents (read at most once a second per process: every
    run's context names them; agentsite/kept.py), then AGENT_REMOTE_AGENTS's."""
    agents = list(_enabled_rows.get(None))
    for target, key in (getattr(settings, "AGENT_REMOTE_AGENTS", None) or {}).items():
        url = target if "://" in target else f"http://{target}"
        agents.append(RemoteAgent(url.rstrip("/"), str(key)))
    return agents


def _read_enabled(_: None) -> tuple[RemoteAgent, ...]:
    rows = RemoteAgentConfig.objects.filter(enabled=True)
    return tuple(RemoteAgent(row.url.rstrip("/"), row.api_key, row.name) for row in rows)


_enabled_rows: Kept[None, tuple[RemoteAgent, ...]] = Kept(
    "remote agents", _read_enabled, changed_by=("traces.RemoteAgentConfig",)
)


def remote_agent(target: str) -> RemoteAgent:
    """The configured remote for a URL or `host:port`; RemoteAgentError if none."""
    wanted = urllib.parse.urlsplit(target if "://" in target else f"http://{target}")
    for agent in configured_agents():
        if agent.host == wanted.netloc:
            return agent
    known = ", ".join(a.base_url for a in configured_agents()) or "none"
    raise RemoteAgentError(
        f"no remote agent is configured for {target!r} (configured: {known}); "
        "an operator adds it with its API key in the admin (Remote agents) or AGENT_REMOTE_AGENTS"
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
    """Send `task` (after the context `messages`) to `agent` as an A2A task, or continue
    its task `continue_trace_id`; wait until it ends or needs input; what came of it."""
    try:
        found = a2a_client.run_a2a_task(
            agent.base_url,
            agent.key,
            text=_with_context(task, messages),
            skill=agent_type if agent_type and agent_type != "default" else None,
            continue_task_id=continue_trace_id,
            timeout=timeout or settings.AGENT_REMOTE_TIMEOUT,
        )
    except a2a_client.A2ACallError as exc:
        raise RemoteAgentError(str(exc)) from None
    if isinstance(found, pb.Message):  # an agent may answer with a message and no task
        text = a2a_client.text_of_parts(found.parts)
        return ChildOutcome(
            agent.remote_id(found.task_id or found.message_id),
            "completed",
            summary=text,
            remote=agent.base_url,
        )
    return _outcome(agent, found)


STATUSES = {
    pb.TaskState.TASK_STATE_COMPLETED: "completed",
    pb.TaskState.TASK_STATE_FAILED: "failed",
    pb.TaskState.TASK_STATE_REJECTED: "failed",
    pb.TaskState.TASK_STATE_CANCELED: "stopped",
    pb.TaskState.TASK_STATE_INPUT_REQUIRED: "input-required",
    pb.TaskState.TASK_STATE_AUTH_REQUIRED: "auth-required",
}


def _outcome(agent: RemoteAgent, task: pb.Task) -> ChildOutcome:
    remote_id = agent.remote_id(task.id)
    state = task.status.state
    if state not in STATUSES:
        raise RemoteAgentError(
            f"remote task {remote_id} is still {pb.TaskState.Name(state)} after waiting; "
            f"call agent again with continue_from={remote_id!r} to keep waiting for it"
        )
    said = a2a_client.text_of_parts(task.status.message.parts)
    status = STATUSES[state]
    summary: str | None = a2a_client.answer_of(task) if status == "completed" else None
    if status == "input-required":
        summary = said or "(no question text)"  # the agent tool asks a human (tools/builtin/agent.py)
    elif status == "auth-required":
        summary = f"the remote agent waits for an authorization on its side ({said}); call again with continue_from={remote_id!r} later"
    return ChildOutcome(
        remote_id,
        status,
        summary=summary,
        error=said if status in ("failed", "stopped") else None,
        stats={
            "message_count": len(task.history),
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "total_tokens": 0,
            "total_cost": 0.0,
            "unpriced_calls": 0,
            "duration_ms": 0,
        },
        remote=agent.base_url,
    )


def _with_context(task: str, messages: list[dict[str, Any]] | None) -> str:
    if not messages:
        return task
    lines = [f"[{m.get('role', 'user')}] {m.get('content')}" for m in messages if m.get("content")]
    return "Context:\n" + "\n".join(lines) + "\n\nTask:\n" + task


def describe(agent: RemoteAgent) -> dict[str, Any]:
    """What the model may know of a remote agent: its card's name, description and skills
    when the card was fetched (no network here)."""
    card = a2a_client.cached_card(agent.base_url)
    if card is None:
        return {"url": agent.base_url, "name": agent.name}
    return {
        "url": agent.base_url,
        "name": card.name or agent.name,
        "description": card.description,
        "skills": [{"id": s.id, "description": s.description} for s in card.skills],
    }


def remote_agents_context_hook(trace: Any, goal_tree: Any) -> str | None:
    """R7 context hook: the remote agents the `agent` tool may call (agent_url), with the
    skills of those whose card was fetched (pass one as agent_type)."""
    if trace.parent_trace_id:
        return None  # sub-agents do not start agents
    agents = configured_agents()
    if not agents:
        return None
    lines = ["## Remote agents (agent tool, agent_url)", ""]
    for agent in agents:
        info = describe(agent)
        line = f"- {info['url']}" + (f" ({info['name']})" if info.get("name") else "")
        if info.get("skills"):
            line += ": skills (agent_type) " + ", ".join(s["id"] for s in info["skills"])
        lines.append(line)
    return "\n".join(lines)


@dataclass
class RemoteTrace:
    """A remote child as read through its agent (GetTask): status and conversation."""

    remote_id: str
    agent: str
    status: str
    messages: list[dict[str, str]]  # {"role": "user" | "agent", "content": text}
    message_count: int
    status_text: str = ""


def remote_children(parent: Any) -> list[str]:
    """The remote ids the parent's tool calls started (what the parent may read through)."""
    calls = (parent.context or {}).get("sub_trace_calls") or {}
    found = [i for call in calls.values() for i in call.get("sub_trace_ids") or [] if is_remote_id(i)]
    return list(dict.fromkeys(found))


def read_remote_trace(parent: Any, remote_id: str, *, history_length: int = 200) -> RemoteTrace:
    """Read the remote child `remote_id` of `parent` through its agent with the stored key.
    LookupError when it is not a child of `parent`; RemoteAgentError when it cannot be read."""
    if remote_id not in remote_children(parent):
        raise LookupError(f"{remote_id!r} is not a remote sub-trace of trace {parent.trace_id!r}")
    host, task_id = split_remote_id(remote_id)
    agent = remote_agent(host)
    try:
        task = a2a_client.get_a2a_task(agent.base_url, agent.key, task_id, history_length=history_length)
    except a2a_client.A2ACallError as exc:
        raise RemoteAgentError(str(exc)) from None
    messages = [
        {
            "role": "user" if m.role == pb.Role.ROLE_USER else "agent",
            "content": a2a_client.text_of_parts(m.parts),
        }
        for m in task.history
    ]
    state = task.status.state
    return RemoteTrace(
        remote_id=remote_id,
        agent=agent.name or agent.base_url,
        status=STATUSES.get(state, "running"),
        messages=messages,
        message_count=len(task.history),
        status_text=a2a_client.text_of_parts(task.status.message.parts),
    )
