"""The Unix socket doorbell between processes on one machine (traces/events/bell_socket.py),
with real sockets; the cross-process runs are in tests/e2e/test_doorbell.py."""

from __future__ import annotations

import asyncio
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from traces.events.bell_socket import SocketReceiver, SocketSender
from traces.events.bells import decode, encode


@pytest.fixture
def directory() -> Iterator[Path]:
    # Short: a Unix socket path holds at most 107 bytes.
    with tempfile.TemporaryDirectory(prefix="bells-", dir="/tmp") as path:
        yield Path(path) / "doorbells"


def test_a_ring_names_the_sending_process_the_event_and_the_trace():
    pid, last_event_id, trace_id = decode(encode("trace with spaces", 42)) or (0, 0, "")
    assert (last_event_id, trace_id) == (42, "trace with spaces")
    assert pid > 0
    assert decode("not a ring") is None
    assert decode("1 x trace") is None


@pytest.mark.asyncio
async def test_every_bound_socket_of_the_directory_hears_a_ring(directory: Path):
    loop = asyncio.get_running_loop()
    heard: dict[str, list[str]] = {"a": [], "b": []}
    got_both = asyncio.Event()

    def hear(name: str):
        def on_message(payload: str) -> None:
            heard[name].append(payload)
            if all(heard.values()):
                got_both.set()

        return on_message

    receivers = [SocketReceiver(directory, hear(name)) for name in heard]
    assert all(receiver.start(loop) for receiver in receivers)
    assert len(list(directory.glob("*.sock"))) == 2
    try:
        SocketSender(directory).send("1 7 t-1")
        await asyncio.wait_for(got_both.wait(), timeout=30)
    finally:
        for receiver in receivers:
            receiver.close()
    assert heard == {"a": ["1 7 t-1"], "b": ["1 7 t-1"]}
    assert not list(directory.glob("*.sock"))


def test_a_socket_nobody_is_bound_to_is_removed_by_the_next_ring(directory: Path):
    directory.mkdir()
    dead = directory / "4242-dead.sock"
    left_behind = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    left_behind.bind(str(dead))
    left_behind.close()
    unrelated = directory / "notes.txt"
    unrelated.write_text("not a socket")
    SocketSender(directory).send("1 1 t")
    assert not dead.exists()
    assert unrelated.exists()


def test_ringing_without_a_directory_does_nothing(directory: Path):
    SocketSender(directory).send("1 1 t")
    assert not directory.exists()


@pytest.mark.asyncio
async def test_a_directory_too_long_for_a_socket_path_is_refused(directory: Path):
    receiver = SocketReceiver(directory / ("x" * 120), lambda payload: None)
    assert not receiver.start(asyncio.get_running_loop())
    assert not directory.exists()
