"""The PostgreSQL doorbell (traces/events/bell_postgres.py) against a real server: a ring
goes out from the ringing thread when the connection is free, through the NOTIFY thread
otherwise, and none is lost to a connection that broke in between; the receiver hands
every ring on from the event loop and listens again after its connection dropped."""

from __future__ import annotations

import asyncio
import os
import select
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.db import connection

from traces.events.bell_postgres import CHANNEL, NotifyReceiver, NotifySender, connection_params

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="LISTEN/NOTIFY is PostgreSQL's"),
]


class Listener:
    def __init__(self) -> None:
        self.conn = psycopg.connect(**connection_params("test listen"))
        self.conn.execute(f"LISTEN {CHANNEL}")
        self.heard: list[str] = []

    def until(self, count: int, timeout: float = 10.0) -> list[str]:
        deadline = time.monotonic() + timeout
        while len(self.heard) < count and time.monotonic() < deadline:
            for notify in self.conn.notifies(timeout=0.2, stop_after=count - len(self.heard)):
                self.heard.append(notify.payload)
        return self.heard


@pytest.fixture
def listener() -> Iterator[Listener]:
    heard = Listener()
    yield heard
    heard.conn.close()


@pytest.fixture
def sender() -> Iterator[NotifySender]:
    made = NotifySender()
    yield made
    made._close()


def terminate_sessions(application_name: str) -> None:
    """End the server sessions of `application_name` (a dropped doorbell connection)."""
    with psycopg.connect(**connection_params("test admin")) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            [application_name],
        )


def connected(sender: NotifySender, listener: Listener) -> None:
    sender.send("t0", "first")  # no connection yet: the thread opens it and sends
    assert listener.until(1) == ["first"]
    with sender.using:  # the listener can hear the ring before the thread has read its answer
        assert sender.conn is not None and not sender.conn.closed
        assert sender.in_flight == 0


def test_with_the_connection_free_the_ringing_thread_sends_and_does_not_wait(sender, listener):
    connected(sender, listener)
    assert all(sender._send_now(f"ring {n}") for n in range(20))  # none waits for its answer
    assert listener.until(21)[1:] == [f"ring {n}" for n in range(20)]
    assert not sender.pending


def test_with_the_connection_taken_a_ring_waits_for_the_thread(sender, listener):
    connected(sender, listener)
    with sender.using:  # another thread's statement in flight
        sender.send("t1", "queued 1")
        sender.send("t1", "queued 2")  # the newest of a trace replaces the older
        sender.send("t2", "other trace")
        assert sender.pending == {"t1": "queued 2", "t2": "other trace"}
        time.sleep(0.2)
        assert listener.until(2, timeout=0.3) == ["first"]  # nothing left while the lock is held
    assert sorted(listener.until(3)[1:]) == ["other trace", "queued 2"]


def test_rings_reach_listeners_again_after_the_connection_broke(sender, listener):
    connected(sender, listener)
    terminate_sessions("agentsite doorbell notify")
    deadline = time.monotonic() + 10
    sent = 0
    while time.monotonic() < deadline and len(listener.heard) < 2:
        sender.send("t", f"after {sent}")  # never raises to the ringing thread
        sent += 1
        listener.until(2, timeout=0.1)
    assert len(listener.heard) == 2 and listener.heard[1].startswith("after ")


def test_many_threads_ringing_at_once_lose_no_trace(sender, listener):
    connected(sender, listener)

    def ring(n: int) -> Any:
        for k in range(25):
            sender.send(f"trace {n}", f"trace {n} ring {k}")

    threads = [threading.Thread(target=ring, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        listener.until(len(listener.heard) + 1, timeout=0.3)
        if all(f"trace {n} ring 24" in listener.heard for n in range(8)):
            break
    # Each trace's last ring arrives (earlier ones may be coalesced away while queued).
    assert all(f"trace {n} ring 24" in listener.heard for n in range(8))


def notify(*payloads: str) -> None:
    with psycopg.connect(**connection_params("test notify")) as conn:
        for payload in payloads:
            conn.execute("SELECT pg_notify(%s, %s)", [CHANNEL, payload])


def listen_sessions() -> int:
    with psycopg.connect(**connection_params("test admin")) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", ["agentsite doorbell listen"]
        ).fetchone()
    return int(row[0]) if row else 0


async def until(condition: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


@pytest.mark.asyncio
async def test_the_receiver_hands_on_every_ring_and_listens_again_after_its_connection_dropped():
    heard: list[str] = []
    connects: list[float] = []
    receiver = NotifyReceiver(heard.append, lambda: connects.append(time.monotonic()))
    receiver.start(asyncio.get_running_loop())
    try:
        await until(lambda: len(connects) == 1)
        await asyncio.to_thread(notify, *(f"ring {n}" for n in range(50)))
        await until(lambda: len(heard) == 50)
        assert heard == [f"ring {n}" for n in range(50)]  # in order, none twice

        terminate_sessions("agentsite doorbell listen")
        # Reconnected and said so (watchers then re-read what the gap's rings announced).
        await until(lambda: len(connects) == 2)
        await asyncio.to_thread(notify, "after the drop")
        await until(lambda: heard[-1:] == ["after the drop"])
    finally:
        receiver.close()
    await until(lambda: listen_sessions() == 0)  # closing ends its session
    await asyncio.to_thread(notify, "after close")
    await asyncio.sleep(0.2)
    assert "after close" not in heard


def socket_descriptors() -> set[int]:
    found = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                found.add(int(name))
        except OSError:
            pass  # closed meanwhile
    return found


@pytest.mark.asyncio
@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="finds the LISTEN socket in /proc")
async def test_a_lost_listen_connection_leaves_its_reused_descriptor_to_the_new_owner():
    """libpq closes the socket of a connection it finds lost, so a connection the loop
    accepts in the same iteration can get its descriptor number: daphne's next HTTP
    request did, and the receiver's second `remove_reader` of that number, once its task
    resumed, unregistered the request's reader, which then hung unread. Here the number
    is taken, as accept() would take it, by the callback that runs right after the
    receiver's in the iteration where the loss is seen."""
    loop = asyncio.get_running_loop()
    before = socket_descriptors()
    connects: list[int] = []
    receiver = NotifyReceiver(lambda payload: None, lambda: connects.append(1))
    receiver.start(loop)
    probe, probe_peer = socket.socketpair()
    taken: list[socket.socket] = []
    new_owner_read: asyncio.Future[bytes] = loop.create_future()
    try:
        await until(lambda: connects)
        (listen_fd,) = socket_descriptors() - before - {probe.fileno(), probe_peer.fileno()}

        def take_the_freed_number() -> None:
            try:
                os.fstat(listen_fd)
                return  # still the LISTEN socket
            except OSError:
                pass
            loop.remove_reader(probe.fileno())
            new, peer = socket.socketpair()  # accept() hands out the lowest free number
            if new.fileno() != listen_fd:  # a lower one was free: take the number anyway
                os.dup2(new.fileno(), listen_fd)
                new.close()
                new = socket.socket(fileno=listen_fd)
            taken.extend([new, peer])
            loop.add_reader(
                listen_fd, lambda: new_owner_read.done() or new_owner_read.set_result(taken[0].recv(16))
            )
            peer.send(b"a request")

        loop.add_reader(probe.fileno(), take_the_freed_number)
        # With the loop held, the LISTEN socket becomes readable (the server's FATAL and
        # end of stream) before the probe does: one wake-up reports both, the receiver's first.
        terminate_sessions("agentsite doorbell listen")
        assert select.select([listen_fd], [], [], 10)[0]
        time.sleep(0.1)
        probe_peer.send(b"wake")
        assert await asyncio.wait_for(new_owner_read, 10) == b"a request"
        await until(lambda: len(connects) == 2)  # and the receiver listens again
    finally:
        if taken:
            loop.remove_reader(listen_fd)
        loop.remove_reader(probe.fileno())
        receiver.close()
        for sock in [probe, probe_peer, *taken]:
            sock.close()
