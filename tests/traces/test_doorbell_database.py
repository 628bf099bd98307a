"""AGENT_DOORBELL "database" beside a real Redis channel layer (traces/events/doorbell.py):
rings take the database's path (NOTIFY on PostgreSQL, Unix sockets on a SQLite file), and
a process's watch sockets are rung through its registry of watchers, not the layer.

Redis's data is wiped after the socket joined its group, so a ring sent through the layer
would reach nobody: only the registry can deliver within the test, and the poll is 30 s.
The cross-process run (a qcluster worker ringing daphne by NOTIFY with Redis configured) is
in tests/e2e/test_doorbell.py.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis as redis_client
from channels.testing import WebsocketCommunicator

from tests.e2e.stack import REDIS_SERVER
from tests.traces.test_doorbell_sender import Redis
from tests.traces.test_watch import aappend_events, receive_ids, trace_with_events, user_with_token, watch
from traces.events import bells, doorbell

pytestmark = [
    pytest.mark.asyncio,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not shutil.which("redis-server") and not Path(REDIS_SERVER).exists(),
        reason="no redis-server binary (apt-get install -y redis-server)",
    ),
]


@pytest.fixture
def redis_layer(tmp_path: Path, settings: Any) -> Iterator[Redis]:
    server = Redis(tmp_path)
    server.start()
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [server.url]}}
    }
    settings.AGENT_DOORBELL = "database"
    settings.AGENT_WATCH_POLL_SECONDS = 30  # only a ring delivers in time
    yield server
    server.kill()


async def watching_without_groups(server: Redis) -> tuple[str, WebsocketCommunicator]:
    """A watch socket of a trace with one event, past that event; then Redis loses every
    group membership, so a ring through the layer reaches nobody."""
    user, key = await user_with_token("integrator")
    trace_id = await trace_with_events(user, 1)
    comm = watch(trace_id, token=key)
    assert (await comm.connect())[0]
    assert await receive_ids(comm, 1) == [1]
    redis_client.Redis.from_url(server.url).flushall()
    return trace_id, comm


async def test_a_ring_of_this_process_reaches_its_watchers_without_the_layer(redis_layer: Redis):
    trace_id, comm = await watching_without_groups(redis_layer)
    await aappend_events(trace_id, 2)  # rings from a sync thread, as a request of daphne does
    assert await receive_ids(comm, 2, timeout=10) == [2, 3]
    await comm.disconnect()
    assert doorbell.group_for(trace_id) not in doorbell._watchers  # left the registry


async def test_a_ring_from_another_process_reaches_the_watchers_here(redis_layer: Redis):
    if bells.transport() != "socket":
        pytest.skip("the other process rings by NOTIFY here: tests/e2e/test_doorbell.py")
    trace_id, comm = await watching_without_groups(redis_layer)
    await aappend_events(trace_id, 1, ring=False)
    directory = bells.doorbell_dir()
    assert directory is not None
    other_pid = os.getpid() + 1  # a ring this process did not send: its own are ignored
    bells.SocketSender(directory).send(f"{other_pid} 2 {trace_id}")
    assert await receive_ids(comm, 1, timeout=10) == [2]
    await comm.disconnect()
