"""WS /api/traces/{id}/watch through the real ASGI stack (origin, session, token) with
Channels' communicator: replay after `since`, live events, refusals, reconnects (W3, W4)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.utils import timezone
from rest_framework.authtoken.models import Token

from agentsite.asgi import application
from tests.factories import make_trace, make_user
from tests.scripted_llm import Reply, ToolCall
from traces import events as event_bus
from traces.models import Trace, TraceEvent
from traces.runner import AgentRunner, RunConfig

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


# --- helpers -------------------------------------------------------------------


@database_sync_to_async
def user_with_token(username: str, *, staff: bool = False) -> tuple[Any, str]:
    user = make_user(username, staff=staff)
    return user, Token.objects.create(user=user).key


@database_sync_to_async
def trace_with_events(owner: Any, count: int) -> str:
    trace = make_trace(owner)
    append_events(trace.trace_id, count, ring=False)
    return trace.trace_id


def append_events(trace_id: str, count: int, *, ring: bool = True) -> list[int]:
    """Append `count` events the way a run's commit does; ring the doorbell after."""
    trace = Trace.objects.get(pk=trace_id)
    rows = []
    for _ in range(count):
        trace.last_event_id += 1
        rows.append(
            TraceEvent(
                trace_id=trace_id,
                event_id=trace.last_event_id,
                type="round_start",
                payload={"n": trace.last_event_id},
                created_at=timezone.now(),
            )
        )
    TraceEvent.objects.bulk_create(rows)
    Trace.objects.filter(pk=trace_id).update(last_event_id=trace.last_event_id)
    if ring:
        event_bus.publish(trace_id, [event_bus.event_dict(e) for e in rows])
    return [e.event_id for e in rows]


aappend_events = database_sync_to_async(append_events)


def watch(
    trace_id: str, *, token: str | None = None, query: str = "", **kwargs: Any
) -> WebsocketCommunicator:
    headers = list(kwargs.pop("headers", []))
    if token is not None:
        headers.append((b"authorization", f"Token {token}".encode()))
    path = f"/api/traces/{trace_id}/watch" + (f"?{query}" if query else "")
    return WebsocketCommunicator(application, path, headers=headers, **kwargs)


async def receive_ids(comm: WebsocketCommunicator, count: int, timeout: float = 3.0) -> list[int]:
    return [(await comm.receive_json_from(timeout=timeout))["event_id"] for _ in range(count)]


async def close_code(comm: WebsocketCommunicator) -> int:
    connected, _ = await comm.connect()
    assert connected  # the consumer accepts, then closes with a code the client can read
    message = await comm.receive_output(timeout=3)
    assert message["type"] == "websocket.close"
    return message["code"]


# --- replay and live -------------------------------------------------------------


async def test_replays_events_after_since_in_order_then_nothing_more():
    user, key = await user_with_token("integrator")
    trace_id = await trace_with_events(user, 5)
    comm = watch(trace_id, token=key, query="since=2")
    assert (await comm.connect())[0]
    first = await comm.receive_json_from(timeout=3)
    assert first["trace_id"] == trace_id and first["type"] == "round_start" and first["payload"] == {"n": 3}
    assert [first["event_id"], *await receive_ids(comm, 2)] == [3, 4, 5]
    assert await comm.receive_nothing(timeout=0.3)
    await comm.disconnect()


async def test_live_events_arrive_on_the_doorbell_without_waiting_for_the_poll(settings):
    settings.AGENT_WATCH_POLL_SECONDS = 30  # only the doorbell can deliver in time
    user, key = await user_with_token("integrator")
    trace_id = await trace_with_events(user, 1)
    comm = watch(trace_id, token=key)
    assert (await comm.connect())[0]
    assert await receive_ids(comm, 1) == [1]
    started = time.monotonic()
    await aappend_events(trace_id, 3)
    assert await receive_ids(comm, 3, timeout=2) == [2, 3, 4]
    assert time.monotonic() - started < 1.0
    await comm.disconnect()


async def test_without_a_doorbell_the_poll_delivers(settings):
    """The embedded default: the writer is another process, no ring reaches us."""
    settings.AGENT_WATCH_POLL_SECONDS = 0.1
    user, key = await user_with_token("integrator")
    trace_id = await trace_with_events(user, 0)
    comm = watch(trace_id, token=key)
    assert (await comm.connect())[0]
    await database_sync_to_async(append_events)(trace_id, 2, ring=False)
    assert await receive_ids(comm, 2, timeout=2) == [1, 2]
    await comm.disconnect()


async def test_reconnect_with_the_last_event_id_has_no_gap_and_no_duplicate(settings):
    settings.AGENT_WATCH_POLL_SECONDS = 0.1
    user, key = await user_with_token("integrator")
    trace_id = await trace_with_events(user, 3)
    seen: list[int] = []
    comm = watch(trace_id, token=key)
    assert (await comm.connect())[0]
    seen += await receive_ids(comm, 3)
    await comm.disconnect()
    await aappend_events(trace_id, 4)  # written while the client is away
    comm = watch(trace_id, token=key, query=f"since={seen[-1]}")
    assert (await comm.connect())[0]
    seen += await receive_ids(comm, 4)
    await aappend_events(trace_id, 2)
    seen += await receive_ids(comm, 2)
    assert await comm.receive_nothing(timeout=0.3)
    assert seen == list(range(1, 10))
    await comm.disconnect()


async def test_a_replay_longer_than_one_batch_is_complete(settings):
    settings.AGENT_WATCH_POLL_SECONDS = 30
    user, key = await user_with_token("integrator")
    trace_id = await trace_with_events(user, 1203)
    comm = watch(trace_id, token=key, query="since=1")
    assert (await comm.connect())[0]
    assert await receive_ids(comm, 1202) == list(range(2, 1204))
    await comm.disconnect()


async def test_a_real_run_streams_every_event_to_final(llm, workspace_root, settings):
    settings.AGENT_WATCH_POLL_SECONDS = 30
    llm.script("utility", ["Listing"])
    llm.script(
        "scripted", [Reply(tool_calls=[ToolCall("list_files", {"path": "."})]), Reply(text="all done")]
    )
    user, key = await user_with_token("integrator")
    trace = await database_sync_to_async(make_trace)(user, status="completed")
    comm = watch(trace.trace_id, token=key)
    assert (await comm.connect())[0]

    def run() -> None:
        config = RunConfig(trace_id=trace.trace_id, stream=False)
        AgentRunner().run_result([{"role": "user", "content": "list the files"}], config)

    await database_sync_to_async(run)()
    received = []
    while not received or received[-1]["type"] != "final":
        received.append(await comm.receive_json_from(timeout=3))
    assert [e["event_id"] for e in received] == list(range(1, len(received) + 1))
    types = [e["type"] for e in received]
    assert {"run_started", "round_start", "message", "tool_call", "tool_result"} <= set(types)
    assert received[-1]["payload"]["result"] == "all done"
    await comm.disconnect()


# --- who may watch ---------------------------------------------------------------


async def test_anonymous_is_closed_with_4401():
    user, _ = await user_with_token("integrator")
    trace_id = await trace_with_events(user, 1)
    assert await close_code(watch(trace_id)) == 4401


async def test_a_bad_token_is_anonymous():
    user, _ = await user_with_token("integrator")
    trace_id = await trace_with_events(user, 1)
    assert await close_code(watch(trace_id, token="not-a-key")) == 4401


async def test_someone_elses_or_an_unknown_trace_is_closed_with_4404():
    owner, _ = await user_with_token("integrator")
    _, stranger_key = await user_with_token("stranger")
    trace_id = await trace_with_events(owner, 1)
    assert await close_code(watch(trace_id, token=stranger_key)) == 4404
    assert await close_code(watch("no-such-trace", token=stranger_key)) == 4404


async def test_a_bad_since_is_closed_with_4400():
    user, key = await user_with_token("integrator")
    trace_id = await trace_with_events(user, 1)
    assert await close_code(watch(trace_id, token=key, query="since=abc")) == 4400
    assert await close_code(watch(trace_id, token=key, query="since=-1")) == 4400


async def test_an_expert_watches_any_trace_and_a_token_may_come_in_the_query():
    owner, _ = await user_with_token("integrator")
    _, expert_key = await user_with_token("expert", staff=True)
    trace_id = await trace_with_events(owner, 2)
    comm = watch(trace_id, query=f"token={expert_key}")
    assert (await comm.connect())[0]
    assert await receive_ids(comm, 2) == [1, 2]
    await comm.disconnect()


async def test_the_portal_session_authenticates_a_browser_from_an_allowed_origin():
    from django.test import Client

    user, _ = await user_with_token("integrator")
    trace_id = await trace_with_events(user, 1)
    client = Client()
    await database_sync_to_async(client.force_login)(user)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    browser = [(b"cookie", cookie), (b"origin", b"http://localhost:8000")]
    comm = watch(trace_id, headers=browser)
    assert (await comm.connect())[0]
    assert await receive_ids(comm, 1) == [1]
    await comm.disconnect()


async def test_a_foreign_origin_is_refused_at_the_handshake():
    user, key = await user_with_token("integrator")
    trace_id = await trace_with_events(user, 1)
    comm = watch(trace_id, token=key, headers=[(b"origin", b"https://evil.example")])
    connected, _ = await comm.connect()
    assert not connected
    await comm.disconnect()


async def test_disconnect_stops_the_pump():
    user, key = await user_with_token("integrator")
    trace_id = await trace_with_events(user, 1)
    comm = watch(trace_id, token=key)
    assert (await comm.connect())[0]
    await receive_ids(comm, 1)
    before = [t for t in asyncio.all_tasks() if t.get_coro().__qualname__ == "TraceWatchConsumer._pump"]
    assert len(before) == 1
    await comm.disconnect()
    await asyncio.sleep(0.05)
    assert not [t for t in before if not t.done()]
