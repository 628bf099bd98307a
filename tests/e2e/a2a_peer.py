"""An A2A agent that is not agentsite: built only from the a2a-sdk's server pieces
(DefaultRequestHandler, an AgentExecutor, the in-memory task store, the Starlette
routes). Served by daphne: `daphne tests.e2e.a2a_peer:application`.

It wants `Authorization: Bearer peer-key`. A task whose text says "question" asks
"Which colour?" (input-required) and completes with the answer; "fail" fails;
anything else completes with "echo[<skill>]: <text>".
"""

from __future__ import annotations

import asyncio
from typing import Any

from a2a.helpers.proto_helpers import get_message_text, new_task_from_user_message, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import a2a_pb2 as pb
from starlette.applications import Starlette
from starlette.responses import JSONResponse

KEY = "peer-key"
PORT_PLACEHOLDER = "http://127.0.0.1"


class PeerExecutor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        text = get_message_text(context.message)
        task = context.current_task
        answering = task is not None and task.status.state == pb.TaskState.TASK_STATE_INPUT_REQUIRED
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        await asyncio.sleep(0.3)
        if answering:
            await updater.add_artifact([pb.Part(text=f"you chose {text}")], name="answer")
            await updater.complete()
        elif "question" in text:
            await updater.requires_input(
                new_text_message("Which colour?", context_id=task.context_id, task_id=task.id)
            )
        elif "fail" in text:
            await updater.failed(
                new_text_message("the peer failed on purpose", context_id=task.context_id, task_id=task.id)
            )
        else:
            skill = (context.metadata or {}).get("skill", "none")
            await updater.add_artifact([pb.Part(text=f"echo[{skill}]: {text}")], name="answer")
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()


def card(base_url: str) -> pb.AgentCard:
    found = pb.AgentCard(
        name="peer",
        description="an A2A agent built with the SDK only",
        version="1.0.0",
        capabilities=pb.AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[pb.AgentSkill(id="echo", name="echo", description="says it back", tags=["test"])],
    )
    found.supported_interfaces.add(url=base_url + "/rpc", protocol_binding="JSONRPC", protocol_version="1.0")
    scheme = found.security_schemes["bearer"]
    scheme.http_auth_security_scheme.scheme = "bearer"
    found.security_requirements.add().schemes["bearer"].CopyFrom(pb.StringList())
    return found


def build(base_url: str) -> Any:
    agent_card = card(base_url)
    handler = DefaultRequestHandler(
        agent_executor=PeerExecutor(), task_store=InMemoryTaskStore(), agent_card=agent_card
    )
    routes = [*create_agent_card_routes(agent_card), *create_jsonrpc_routes(handler, "/rpc")]
    app = Starlette(routes=routes)

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] != "/.well-known/agent-card.json":
            auth = dict(scope["headers"]).get(b"authorization", b"")
            if auth != f"Bearer {KEY}".encode():
                await JSONResponse({"error": "bad key"}, status_code=401)(scope, receive, send)
                return
        await app(scope, receive, send)

    return guarded


class _Lazy:
    """The card needs the port daphne listens on (A2A_PEER_URL, set by the test)."""

    def __init__(self) -> None:
        self.app: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return
        if self.app is None:
            import os

            self.app = build(os.environ["A2A_PEER_URL"])
        await self.app(scope, receive, send)


application = _Lazy()
