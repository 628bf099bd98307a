"""The Unix socket doorbell between processes on one machine (traces/events/bell_socket.py),
with real sockets; the cross-process runs are in tests/e2e/test_doorbell.py."""

from __future__ import annotations

import asyncio
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from traces.events import bells
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


def _queue_limit() -> int:
    """How many datagrams a Unix socket queues (net.unix.max_dgram_qlen; Linux's default 10)."""
    try:
        return int(Path("/proc/sys/net/unix/max_dgram_qlen").read_text())
    except (OSError, ValueError):
        return 10


@pytest.mark.asyncio
async def test_rings_a_full_queue_could_not_take_are_owed_as_one_everything_ring(directory: Path):
    """A burst fills the receiver's queue while its loop is busy: the rings it could not
    take become one "everything" ring, sent once the receiver has read what was queued."""
    loop = asyncio.get_running_loop()
    heard: list[str] = []
    everything = asyncio.Event()

    def on_message(payload: str) -> None:
        heard.append(payload)
        if payload == "1 99 *":
            everything.set()

    receiver = SocketReceiver(directory, on_message)
    assert receiver.start(loop)
    sender = SocketSender(directory, everything="1 99 *")
    burst = _queue_limit() + 5
    try:
        # no await: the loop cannot read while the burst is sent, as when daphne is busy
        for event_id in range(burst):
            sender.send(f"1 {event_id} t-{event_id}")
        await asyncio.wait_for(everything.wait(), timeout=30)
    finally:
        receiver.close()
    queued = [p for p in heard if p != "1 99 *"]
    assert len(queued) < burst  # some rings found the queue full ...
    assert heard.count("1 99 *") == 1  # ... and are owed as one ring, after the queued ones
    assert heard.index("1 99 *") == len(queued)


def test_a_full_socket_whose_process_goes_away_is_not_owed_for_ever(directory: Path):
    directory.mkdir()
    full = directory / "4243-full.sock"
    reader = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    reader.bind(str(full))
    sender = SocketSender(directory, everything="1 99 *")
    for event_id in range(_queue_limit() + 5):
        sender.send(f"1 {event_id} t")
    assert sender._owed == {str(full)}
    reader.close()  # its process dies with the queue full: the socket refuses, the file goes
    for _ in range(3000):
        if not sender._settling:
            break
        time.sleep(0.01)
    assert not sender._settling and not sender._owed
    assert not full.exists()


def _receiver_here() -> object | None:
    """This loop's doorbell receiver (a socket on SQLite, a LISTEN task on PostgreSQL), if any."""
    entry = bells._listening.get(asyncio.get_running_loop())
    return entry.receiver if entry is not None else None


def _sockets(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.sock")) if bells.transport() == "socket" else []


@pytest.mark.asyncio
async def test_a_web_servers_receiver_outlives_its_last_watcher_by_the_linger(directory: Path, settings):
    settings.AGENT_DOORBELL_DIR = str(directory)
    settings.AGENT_DOORBELL_LINGER_SECONDS = 0.5
    first = bells.listen(lambda *_: None)
    receiver, bound = _receiver_here(), _sockets(directory)
    assert receiver is not None
    if bells.transport() == "socket":
        assert len(bound) == 1
    first()
    assert _receiver_here() is receiver and _sockets(directory) == bound  # lingering, not closed
    second = bells.listen(lambda *_: None)  # the next watcher reuses it
    await asyncio.sleep(1.0)  # past the first linger, which the second listener cancelled
    assert _receiver_here() is receiver and _sockets(directory) == bound
    second()
    deadline = time.monotonic() + 30
    while _receiver_here() is not None and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert _receiver_here() is None
    assert not list(directory.glob("*.sock"))


@pytest.mark.asyncio
async def test_without_a_linger_the_receiver_closes_with_its_last_watcher(directory: Path, settings):
    settings.AGENT_DOORBELL_DIR = str(directory)
    settings.AGENT_DOORBELL_LINGER_SECONDS = 0
    release = bells.listen(lambda *_: None)
    assert _receiver_here() is not None
    release()
    assert _receiver_here() is None
    assert not list(directory.glob("*.sock"))
