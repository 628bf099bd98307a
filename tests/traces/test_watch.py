"""WS /api/traces/{id}/watch through the real ASGI stack (origin, session, token) with
Channels' communicator: replay after `since`, live events, refusals, reconnects, and
a trace's sub-traces on the same socket with `children=1` and `cursors` (W3, W4)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any
from urllib.parse import urlencode

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.authtoken.models import Token

from agentsite.asgi import application
from tests.factories import make_trace, make_user
from tests.scripted_llm import Reply, ToolCall
from traces import events as event_bus
from traces.events import consumers
from traces.events.cursors import MAX_DEPTH, watched_heads
from traces.events.doorbell import group_for
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


@database_sync_to_async
def child_with_events(parent_id: str, name: str, count: int, *, owner: Any = None) -> str:
    """A local sub-trace of `parent_id` (same owner unless given), with `count` events."""
    parent = Trace.objects.get(pk=parent_id)
    child = make_trace(owner or parent.owner, trace_id=f"{parent_id}@{name}", parent_trace=parent)
    append_events(child.trace_id, count, ring=False)
    return child.trace_id


def append_events(
    trace_id: str, count: int, *, ring: bool = True, event_type: str = "round_start"
) -> list[int]:
    """Append `count` events the way a run's commit does; ring the doorbell after."""
    trace = Trace.objects.get(pk=trace_id)
    rows = []
    for _ in range(count):
        trace.last_event_id += 1
        rows.append(
            TraceEvent(
                trace_id=trace_id,
                event_id=trace.last_event_id,
                type=event_type,
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


async def receive_per_trace(
    comm: WebsocketCommunicator, count: int, timeout: float = 3.0
) -> dict[str, list[int]]:
    """The next `count` frames' event ids, per trace, in the order they came."""
    per_trace: dict[str, list[int]] = {}
    for _ in range(count):
        event = await comm.receive_json_from(timeout=timeout)
        per_trace.setdefault(event["trace_id"], []).append(event["event_id"])
    return per_trace


def tree_query(*, since: int | None = None, cursors: dict[str, Any] | None = None) -> str:
    params: dict[str, Any] = {"children": 1}
    if since is not None:
        params["since"] = since
    if cursors is not None:
        params["cursors"] = json.dumps(cursors)
    return urlencode(params)


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


async def test_a_ring_during_the_first_read_of_the_heads_is_not_lost(settings, monkeypatch):
    """A worker commits and rings while the new socket's first read (heads and events) is
    in flight and saw the trace before that commit (nothing past the client's cursor, so
    no events are read): the ring still wakes the pump."""
    settings.AGENT_WATCH_POLL_SECONDS = 30  # only the doorbell can deliver in time
    user, key = await user_with_token("integrator")
    trace_id = await trace_with_events(user, 1)
    real = consumers.aheads_and_events
    calls = 0

    async def read_then_a_commit(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        read = await real(*args, **kwargs)
        if calls == 1:  # the worker's commit and ring, after our read
            await aappend_events(trace_id, 1)
            await asyncio.sleep(0.2)  # the ring is dispatched to the consumer meanwhile
        return read

    monkeypatch.setattr(consumers, "aheads_and_events", read_then_a_commit)
    comm = watch(trace_id, token=key, query="since=1")
    assert (await comm.connect())[0]
    assert await receive_ids(comm, 1, timeout=2) == [2]
    assert calls == 2
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


# --- sub-traces on the same socket (children=1, cursors) ---------------------------


async def test_children_streams_every_descendant_and_without_it_only_the_trace():
    user, key = await user_with_token("integrator")
    root = await trace_with_events(user, 2)
    explore = [await child_with_events(root, f"explore-00{n}-a", n) for n in (1, 2, 3)]
    grandchild = await child_with_events(explore[0], "delegate-x", 2)

    comm = watch(root, token=key, query=tree_query())
    assert (await comm.connect())[0]
    received = await receive_per_trace(comm, 2 + 1 + 2 + 3 + 2)
    assert received == {
        root: [1, 2],
        explore[0]: [1],
        explore[1]: [1, 2],
        explore[2]: [1, 2, 3],
        grandchild: [1, 2],
    }
    assert await comm.receive_nothing(timeout=0.3)
    await comm.disconnect()

    comm = watch(root, token=key, query="children=0")
    assert (await comm.connect())[0]
    assert await receive_per_trace(comm, 2) == {root: [1, 2]}
    assert await comm.receive_nothing(timeout=0.3)
    await comm.disconnect()


async def test_a_child_started_after_connect_streams_on_the_doorbells(settings):
    settings.AGENT_WATCH_POLL_SECONDS = 30  # only the doorbells can deliver in time
    user, key = await user_with_token("integrator")
    root = await trace_with_events(user, 1)
    comm = watch(root, token=key, query=tree_query())
    assert (await comm.connect())[0]
    assert await receive_per_trace(comm, 1) == {root: [1]}

    started = time.monotonic()
    child = await child_with_events(root, "explore-001-late", 2)  # no ring of its own
    await aappend_events(root, 1, event_type="sub_trace_started")  # the parent's ring
    assert await receive_per_trace(comm, 3, timeout=2) == {root: [2], child: [1, 2]}
    await aappend_events(child, 2)  # rings the child's group, which the socket joined
    assert await receive_per_trace(comm, 2, timeout=2) == {child: [3, 4]}
    assert time.monotonic() - started < 1.5
    await comm.disconnect()


async def test_a_child_started_without_any_ring_is_found_by_the_poll(settings):
    settings.AGENT_WATCH_POLL_SECONDS = 0.1
    user, key = await user_with_token("integrator")
    root = await trace_with_events(user, 0)
    comm = watch(root, token=key, query=tree_query())
    assert (await comm.connect())[0]
    child = await child_with_events(root, "human-001", 1)
    grandchild = await child_with_events(child, "delegate-1", 1)
    assert await receive_per_trace(comm, 2, timeout=2) == {child: [1], grandchild: [1]}
    await comm.disconnect()


async def test_reconnect_with_since_and_cursors_replays_exactly_what_was_missed(settings):
    settings.AGENT_WATCH_POLL_SECONDS = 0.1
    user, key = await user_with_token("integrator")
    root = await trace_with_events(user, 3)
    child = await child_with_events(root, "explore-001-a", 2)
    seen: dict[str, list[int]] = {}

    def note(received: dict[str, list[int]]) -> None:
        for trace_id, ids in received.items():
            seen.setdefault(trace_id, []).extend(ids)

    comm = watch(root, token=key, query=tree_query())
    assert (await comm.connect())[0]
    note(await receive_per_trace(comm, 5))
    await comm.disconnect()

    # Written while the client is away: more of both, and a child it never saw.
    await aappend_events(root, 2)
    await aappend_events(child, 3)
    other = await child_with_events(root, "explore-002-b", 2)
    cursors = {trace_id: ids[-1] for trace_id, ids in seen.items() if trace_id != root}
    comm = watch(root, token=key, query=tree_query(since=seen[root][-1], cursors=cursors))
    assert (await comm.connect())[0]
    missed = await receive_per_trace(comm, 2 + 3 + 2)
    assert missed == {root: [4, 5], child: [3, 4, 5], other: [1, 2]}
    note(missed)
    await aappend_events(child, 1)
    note(await receive_per_trace(comm, 1))
    assert await comm.receive_nothing(timeout=0.3)
    assert seen == {root: [1, 2, 3, 4, 5], child: [1, 2, 3, 4, 5, 6], other: [1, 2]}
    await comm.disconnect()


async def test_cursors_may_carry_the_watched_trace_when_since_is_absent():
    user, key = await user_with_token("integrator")
    root = await trace_with_events(user, 3)
    child = await child_with_events(root, "explore-001-a", 2)
    comm = watch(root, token=key, query=tree_query(cursors={root: 2, child: 1}))
    assert (await comm.connect())[0]
    assert await receive_per_trace(comm, 2) == {root: [3], child: [2]}
    assert await comm.receive_nothing(timeout=0.3)
    await comm.disconnect()


async def test_bad_children_or_cursors_are_closed_with_4400():
    user, key = await user_with_token("integrator")
    root = await trace_with_events(user, 1)
    bad = [
        "children=yes",
        "children=1&cursors=not-json",
        "children=1&cursors=" + json.dumps([1]),
        "children=1&cursors=" + json.dumps({"a": -1}),
        "children=1&cursors=" + json.dumps({"a": 1.5}),
        "children=1&cursors=" + json.dumps({"a": "1"}),
        "children=1&cursors=" + json.dumps({"a": True}),
        "children=1&cursors=" + json.dumps({"a": 2**63}),
        "children=1&cursors=" + json.dumps({"x" * 256: 1}),
        tree_query(cursors={f"t{n}": n for n in range(501)}),
        tree_query(cursors={"a": 1, "pad": 0, "x": "y" * 70_000}),
        "children=1&cursors=" + "[" * 30_000,
    ]
    for query in bad:
        assert await close_code(watch(root, token=key, query=query)) == 4400, query


async def test_a_child_the_user_may_not_see_is_not_streamed():
    owner, key = await user_with_token("integrator")
    stranger, _ = await user_with_token("stranger")
    _, expert_key = await user_with_token("expert", staff=True)
    root = await trace_with_events(owner, 1)
    mine = await child_with_events(root, "explore-001-a", 1)
    theirs = await child_with_events(root, "human-001", 2, owner=stranger)
    await child_with_events(theirs, "delegate-below-theirs", 1, owner=owner)

    comm = watch(root, token=key, query=tree_query())
    assert (await comm.connect())[0]
    assert await receive_per_trace(comm, 2) == {root: [1], mine: [1]}
    assert await comm.receive_nothing(timeout=0.5)
    await comm.disconnect()

    comm = watch(root, token=expert_key, query=tree_query())  # experts see all
    assert (await comm.connect())[0]
    assert sorted(len(ids) for ids in (await receive_per_trace(comm, 5)).values()) == [1, 1, 1, 2]
    await comm.disconnect()


async def test_finding_children_costs_one_query_per_new_level_and_then_one():
    user, _ = await user_with_token("integrator")
    root = await trace_with_events(user, 0)
    chain = [root]
    for depth in range(1, MAX_DEPTH + 3):
        chain.append(await child_with_events(chain[-1], f"d{depth}", depth))
    for n in range(3):
        await child_with_events(root, f"explore-00{n}", 1)

    def heads_and_queries(known: dict[str, int]) -> tuple[dict[str, Any], int]:
        with CaptureQueriesContext(connection) as queries:
            heads = watched_heads(user, root, known=known, children=True)
        return heads, len(queries)

    heads, first = await database_sync_to_async(heads_and_queries)({})
    assert set(heads) == {*chain[: MAX_DEPTH + 1], *(f"{root}@explore-00{n}" for n in range(3))}
    assert heads[chain[2]].depth == 2 and heads[chain[2]].last_event_id == 2
    assert first == 1 + (MAX_DEPTH - 1)  # the root with its children, then one per level below
    known = {trace_id: head.depth for trace_id, head in heads.items()}
    again, steady = await database_sync_to_async(heads_and_queries)(known)
    assert again == heads and steady == 1


async def test_the_socket_leaves_every_trace_group_on_disconnect():
    user, key = await user_with_token("integrator")
    root = await trace_with_events(user, 1)
    child = await child_with_events(root, "explore-001-a", 1)
    comm = watch(root, token=key, query=tree_query())
    assert (await comm.connect())[0]
    await receive_per_trace(comm, 2)
    groups = get_channel_layer().groups  # the in-memory layer's members per group
    assert groups.get(group_for(root)) and groups.get(group_for(child))
    await comm.disconnect()
    assert not groups.get(group_for(root)) and not groups.get(group_for(child))
