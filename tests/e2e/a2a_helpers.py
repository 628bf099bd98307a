"""The a2a-sdk's own client against a live agentsite (tests/e2e/test_a2a_*.py)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from a2a.client import Client, ClientConfig, create_client
from a2a.types import a2a_pb2 as pb

from tests.e2e.stack import Stack

BINDINGS = ["JSONRPC", "HTTP+JSON"]


def base_url(stack: Stack) -> str:
    return f"http://127.0.0.1:{stack.port}"


@asynccontextmanager
async def sdk_client(
    stack: Stack, binding: str, *, token: str | None = None, streaming: bool = False
) -> AsyncIterator[Client]:
    """A client of the SDK for `stack`'s card, speaking `binding`, with an API token."""
    headers = {"Authorization": f"Bearer {token or stack.token}"}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        config = ClientConfig(
            streaming=streaming,
            httpx_client=http,
            supported_protocol_bindings=[binding],
            use_client_preference=True,
        )
        client = await create_client(base_url(stack), client_config=config)
        try:
            yield client
        finally:
            await client.close()


def user_message(
    text: str, *, task_id: str = "", context_id: str = "", metadata: dict[str, Any] | None = None
) -> pb.Message:
    message = pb.Message(
        message_id=str(uuid.uuid4()),
        role=pb.Role.ROLE_USER,
        parts=[pb.Part(text=text)],
        task_id=task_id,
        context_id=context_id,
    )
    if metadata:
        message.metadata.update(metadata)
    return message


def request(text: str, *, return_immediately: bool = False, **fields: Any) -> pb.SendMessageRequest:
    return pb.SendMessageRequest(
        message=user_message(text, **fields),
        configuration=pb.SendMessageConfiguration(return_immediately=return_immediately),
    )


async def send(client: Client, req: pb.SendMessageRequest) -> pb.Task:
    """SendMessage (non-streaming client): the task it answered."""
    responses = [r async for r in client.send_message(req)]
    assert len(responses) == 1 and responses[0].HasField("task"), responses
    return responses[0].task


def state(task: pb.Task) -> str:
    return pb.TaskState.Name(task.status.state)


def status_text(task: pb.Task) -> str:
    return " ".join(p.text for p in task.status.message.parts)


def answer(task: pb.Task) -> str:
    for artifact in task.artifacts:
        if artifact.artifact_id == "answer":
            return artifact.parts[0].text
    return ""


def kind(response: pb.StreamResponse) -> str:
    return response.WhichOneof("payload") or ""
