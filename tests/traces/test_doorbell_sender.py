"""The worker's doorbell sender against a real Redis that goes away and comes back.

A ring whose send failed is owed and sent again (traces/events/doorbell.py:_Sender):
the last ring of a run made while Redis was unreachable still reaches a watcher
that waits on the doorbell alone. Redis keeps its data across the restart here
(append-only file), as a production Redis with persistence does, so the watcher's
group membership survives and only the ring itself is at stake.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels_redis.core import RedisChannelLayer
from django.conf import settings

from tests.e2e.stack import REDIS_SERVER, free_port, wait_for_port
from traces.events.doorbell import _Sender

pytestmark = pytest.mark.skipif(
    not shutil.which("redis-server") and not Path(REDIS_SERVER).exists(),
    reason="no redis-server binary (apt-get install -y redis-server)",
)


class Redis:
    def __init__(self, folder: Path) -> None:
        self.folder, self.port = folder, free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.folder)]
            + ["--appendonly", "yes", "--appendfsync", "always", "--save", ""],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port, self.process, "redis-server")

    def kill(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
            self.process = None


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[Redis]:
    server = Redis(tmp_path)
    server.start()
    yield server
    server.kill()


def test_a_ring_sent_while_redis_is_down_is_delivered_once_it_is_back(redis: Redis) -> None:
    watcher = RedisChannelLayer(hosts=[redis.url])
    channel: str = async_to_sync(watcher.new_channel)()
    async_to_sync(watcher.group_add)("trace.t1", channel)
    sender = _Sender()
    sender.layer = RedisChannelLayer(hosts=[redis.url])
    sender.send("trace.t1", {"type": "trace.doorbell", "trace_id": "t1", "last_event_id": 3})
    assert _received(watcher, channel)["last_event_id"] == 3  # Redis up: delivered at once

    redis.kill()
    sender.send("trace.t1", {"type": "trace.doorbell", "trace_id": "t1", "last_event_id": 5})
    sender.send("trace.t1", {"type": "trace.doorbell", "trace_id": "t1", "last_event_id": 7})
    _wait(lambda: sender.owed.get("trace.t1", {}).get("last_event_id") == 7)  # the newest is owed
    redis.start()  # same port, same data

    message = _received(watcher, channel)
    assert message["last_event_id"] == 7 and message["trace_id"] == "t1"
    _wait(lambda: not sender.owed)


def test_a_burst_of_rings_to_one_web_server_loses_none(redis: Redis) -> None:
    """channels_redis keeps one list per process for all its sockets and drops group
    messages over its capacity (100 by default): the service's layer options hold a burst
    of 300 rings to 300 sockets of one process that has not read any yet."""
    options = settings.REDIS_CHANNEL_LAYER_OPTIONS
    web = RedisChannelLayer(hosts=[redis.url], **options)  # one web server process
    worker = RedisChannelLayer(hosts=[redis.url], **options)

    async def burst() -> list[int]:
        channels = [await web.new_channel() for _ in range(300)]
        for n, channel in enumerate(channels):
            await web.group_add(f"trace.t{n}", channel)
        for n in range(len(channels)):
            await worker.group_send(
                f"trace.t{n}", {"type": "trace.doorbell", "trace_id": f"t{n}", "last_event_id": n}
            )
        return [(await asyncio.wait_for(web.receive(c), timeout=10))["last_event_id"] for c in channels]

    assert async_to_sync(burst)() == list(range(300))


def _received(layer: RedisChannelLayer, channel: str, timeout: float = 15.0) -> dict[str, Any]:
    async def receive() -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            try:
                return await asyncio.wait_for(
                    layer.receive(channel), timeout=max(0.1, deadline - time.monotonic())
                )
            except (ConnectionError, OSError):  # the watcher's own connection, across the restart
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)

    return async_to_sync(receive)()


def _wait(condition: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
