"""Calling any A2A agent (X4) with the a2a-sdk's client: the `agent` tool's remote path.

`run_a2a_task` fetches the agent's card (cached AGENT_A2A_CARD_TTL seconds per
URL), lets the SDK pick an interface both sides speak (JSON-RPC, else
HTTP+JSON), sends the task with `returnImmediately` and polls GetTask until the
task ends or needs input (no request is held open for a whole run), and maps the
task onto a ChildOutcome the agent tool records like any sub-agent's. The key
goes into the Authorization header only (traces/collaboration/remote.py has the
configured agents).

Continuing a task (`continue_from`): a task that is not finished gets the message
(an answer when it asked for input); a finished one cannot take more messages
(A2A), so a new task is sent in the same context: an agentsite peer starts it
from that context's conversation (traces/a2a_protocol/send.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
import uuid
from collections.abc import Coroutine
from typing import Any, TypeVar

import httpx
from a2a.client import A2ACardResolver, A2AClientError, ClientConfig, ClientFactory
from a2a.types import a2a_pb2 as pb
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import A2AError
from django.conf import settings

S = pb.TaskState
SETTLED = (
    S.TASK_STATE_COMPLETED,
    S.TASK_STATE_FAILED,
    S.TASK_STATE_CANCELED,
    S.TASK_STATE_REJECTED,
    S.TASK_STATE_INPUT_REQUIRED,
    S.TASK_STATE_AUTH_REQUIRED,
)
TERMINAL = (S.TASK_STATE_COMPLETED, S.TASK_STATE_FAILED, S.TASK_STATE_CANCELED, S.TASK_STATE_REJECTED)
T = TypeVar("T")

_cards: dict[str, tuple[float, pb.AgentCard]] = {}
_cards_lock = threading.Lock()


class A2ACallError(Exception):
    """A call that failed; the message is what the model reads."""


def cached_card(base_url: str) -> pb.AgentCard | None:
    """The card fetched for `base_url` within AGENT_A2A_CARD_TTL seconds, if any (no network)."""
    with _cards_lock:
        found = _cards.get(base_url)
    if found is None or time.monotonic() - found[0] > settings.AGENT_A2A_CARD_TTL:
        return None
    return found[1]


def skills_of(card: pb.AgentCard) -> list[str]:
    return [skill.id for skill in card.skills]


async def _card(http: httpx.AsyncClient, base_url: str) -> pb.AgentCard:
    card = cached_card(base_url)
    if card is not None:
        return card
    try:
        card = await A2ACardResolver(http, base_url).get_agent_card()
    except (A2AClientError, httpx.HTTPError) as exc:
        cause = exc if isinstance(exc, httpx.TransportError) else exc.__cause__
        if isinstance(cause, httpx.TransportError):
            raise A2ACallError(f"remote agent {base_url} is unreachable ({cause})") from None
        raise A2ACallError(f"no A2A agent card at {base_url}/.well-known/agent-card.json ({exc})") from None
    with _cards_lock:
        _cards[base_url] = (time.monotonic(), card)
    return card


def _message(text: str, *, task_id: str = "", context_id: str = "") -> pb.Message:
    return pb.Message(
        message_id=str(uuid.uuid4()),
        role=pb.Role.ROLE_USER,
        parts=[pb.Part(text=text)],
        task_id=task_id,
        context_id=context_id,
    )


async def _send(
    base_url: str,
    key: str,
    *,
    text: str,
    skill: str | None,
    continue_task_id: str | None,
    timeout: float,
) -> pb.Task | pb.Message:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    request_timeout = settings.AGENT_REMOTE_REQUEST_TIMEOUT
    async with httpx.AsyncClient(headers=headers, timeout=request_timeout, follow_redirects=False) as http:
        card = await _card(http, base_url)
        if skill and card.skills and skill not in skills_of(card):
            raise A2ACallError(
                f"{card.name or base_url} has no skill {skill!r}; its skills: {', '.join(skills_of(card))}"
            )
        client = _client(http, base_url, card)
        message = _message(text)
        if continue_task_id:
            earlier = await client.get_task(pb.GetTaskRequest(id=continue_task_id, history_length=0))
            if earlier.status.state in TERMINAL:
                message.context_id = earlier.context_id  # a new task in the same conversation
            else:
                message.task_id, message.context_id = earlier.id, earlier.context_id
        request = pb.SendMessageRequest(
            message=message, configuration=pb.SendMessageConfiguration(return_immediately=True)
        )
        if skill:
            request.metadata.update({"skill": skill})
        answered = [r async for r in client.send_message(request)]
        if not answered or answered[-1].HasField("message"):
            return answered[-1].message if answered else _message("")
        return await _settled(client, answered[-1].task, timeout)


def _client(http: httpx.AsyncClient, base_url: str, card: pb.AgentCard) -> Any:
    config = ClientConfig(
        streaming=False,
        httpx_client=http,
        supported_protocol_bindings=[TransportProtocol.JSONRPC.value, TransportProtocol.HTTP_JSON.value],
    )
    try:
        return ClientFactory(config).create(card)
    except ValueError as exc:
        raise A2ACallError(f"{base_url} offers no interface this client speaks ({exc})") from None


async def _get(base_url: str, key: str, task_id: str, history_length: int) -> pb.Task:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    request_timeout = settings.AGENT_REMOTE_REQUEST_TIMEOUT
    async with httpx.AsyncClient(headers=headers, timeout=request_timeout, follow_redirects=False) as http:
        client = _client(http, base_url, await _card(http, base_url))
        task: pb.Task = await client.get_task(pb.GetTaskRequest(id=task_id, history_length=history_length))
        return task


async def _settled(client: Any, task: pb.Task, timeout: float) -> pb.Task:
    deadline = time.monotonic() + timeout
    while task.status.state not in SETTLED:
        if time.monotonic() > deadline:
            return task
        await asyncio.sleep(settings.AGENT_REMOTE_POLL_SECONDS)
        task = await client.get_task(pb.GetTaskRequest(id=task.id))
    return task


def _in_own_loop(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run `coroutine` to its end from sync code, in a thread of its own (the caller's
    thread may already have an event loop)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def run_a2a_task(
    base_url: str,
    key: str,
    *,
    text: str,
    skill: str | None = None,
    continue_task_id: str | None = None,
    timeout: float,
) -> pb.Task | pb.Message:
    """Send `text` to the A2A agent at `base_url` and wait (at most `timeout` s) until
    its task ends or needs input. A2ACallError, naming what went wrong, otherwise."""
    try:
        return _in_own_loop(
            _send(base_url, key, text=text, skill=skill, continue_task_id=continue_task_id, timeout=timeout)
        )
    except A2ACallError:
        raise
    except A2AError as exc:  # the agent's own answer (task not found, unsupported, ...)
        raise A2ACallError(f"{base_url} answered {type(exc).__name__}: {exc}") from None
    except httpx.HTTPError as exc:
        raise A2ACallError(f"remote agent {base_url} is unreachable ({exc})") from None


def get_a2a_task(base_url: str, key: str, task_id: str, *, history_length: int = 200) -> pb.Task:
    """The task `task_id` of the A2A agent at `base_url`, with its last `history_length`
    messages (GetTask); A2ACallError, naming what went wrong, otherwise."""
    try:
        return _in_own_loop(_get(base_url, key, task_id, history_length))
    except A2ACallError:
        raise
    except A2AError as exc:
        raise A2ACallError(f"{base_url} answered {type(exc).__name__}: {exc}") from None
    except httpx.HTTPError as exc:
        raise A2ACallError(f"remote agent {base_url} is unreachable ({exc})") from None


def text_of_parts(parts: Any) -> str:
    return "\n".join(part.text for part in parts if part.WhichOneof("content") == "text").strip()


def answer_of(task: pb.Task) -> str:
    """A finished task's answer: its artifacts' text, else its last agent message."""
    texts = [text_of_parts(artifact.parts) for artifact in task.artifacts]
    if any(texts):
        return "\n\n".join(t for t in texts if t)
    agent = [m for m in task.history if m.role == pb.Role.ROLE_AGENT]
    if agent:
        return text_of_parts(agent[-1].parts)
    return text_of_parts(task.status.message.parts)
