"""Doorbells across processes when the channel layer stays in one (W3, issue 18).

The in-memory channel layer of the embedded default reaches only consumers of
the process that rings, but runs commit in worker processes and watchers sit in
daphne. Without Redis a ring crosses processes through what is already there:

- on PostgreSQL, LISTEN/NOTIFY (traces/events/bell_postgres.py);
- on a SQLite file, Unix datagram sockets in a directory next to it, or in
  AGENT_DOORBELL_DIR (traces/events/bell_socket.py).

A ring is a payload `"<pid> <last event id> <trace id>"`; the trace id `*` wakes
every watcher of the receiving process (a socket owed rings it could not queue). Sending is fire and
forget (a non-blocking datagram, or a NOTIFY thread); a lost ring only delays
delivery until the watcher's poll. A process listens while it serves at least
one watch socket (`listen`), on that socket's event loop; it ignores its own
rings, which reached its watchers in process.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings
from django.db import connections
from django.db.backends.sqlite3.creation import DatabaseCreation as SQLiteCreation

from traces.events.bell_postgres import NotifyReceiver, NotifySender
from traces.events.bell_socket import SocketReceiver, SocketSender
from traces.process_local import PerProcess

logger = logging.getLogger(__name__)

# deliver(trace_id, last_event_id): wake this process's watchers of the trace;
# trace_id None wakes every watcher (rings may have been lost).
Deliver = Callable[[str | None, int], None]
EVERYTHING = 2**63 - 1
ALL_TRACES = "*"  # a ring's trace id meaning every trace (never a trace id: those are slugs)


class Receiver(Protocol):
    def start(self, loop: asyncio.AbstractEventLoop) -> bool: ...
    def close(self) -> None: ...


def transport() -> str | None:
    """ "postgres", "socket", or None: the channel layer crosses processes itself
    (Redis) and carries the rings (AGENT_DOORBELL "layer"), or nothing else can share
    the database (an in-memory SQLite)."""
    if not isinstance(get_channel_layer(), InMemoryChannelLayer) and settings.AGENT_DOORBELL != "database":
        return None
    vendor = connections["default"].vendor
    if vendor == "postgresql":
        return "postgres"
    if vendor == "sqlite" and doorbell_dir() is not None:
        return "socket"
    return None


def doorbell_dir() -> Path | None:
    """AGENT_DOORBELL_DIR, or `<SQLite file>.doorbells`; None for an in-memory database."""
    if settings.AGENT_DOORBELL_DIR:
        return Path(settings.AGENT_DOORBELL_DIR)
    database = connections["default"]
    if database.vendor != "sqlite" or SQLiteCreation.is_in_memory_db(database.settings_dict["NAME"]):
        return None
    return Path(f"{database.settings_dict['NAME']}.doorbells")


def encode(trace_id: str, last_event_id: int) -> str:
    return f"{os.getpid()} {last_event_id} {trace_id}"


def decode(payload: str) -> tuple[int, int, str] | None:
    """(pid, last event id, trace id), or None for a malformed payload."""
    parts = payload.split(" ", 2)
    if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit():
        return None
    return int(parts[0]), int(parts[1]), parts[2]


# --- ringing -----------------------------------------------------------------


def ring_other_processes(trace_id: str, last_event_id: int) -> None:
    """Ring the watchers of `trace_id` in every other process; returns at once."""
    sender = _this_process_sender()
    if isinstance(sender, NotifySender):
        sender.send(trace_id, encode(trace_id, last_event_id))
    elif sender is not None:
        sender.send(encode(trace_id, last_event_id))


def _make_sender() -> NotifySender | SocketSender | None:
    """The transport's sender for this process, if rings must cross processes."""
    kind = transport()
    directory = doorbell_dir()
    if kind == "postgres":
        return NotifySender()
    if kind == "socket" and directory is not None:
        return SocketSender(directory, everything=encode(ALL_TRACES, EVERYTHING))
    return None


_senders = PerProcess(_make_sender)  # made on first use in each process (a forked worker makes its own)


def _this_process_sender() -> NotifySender | SocketSender | None:
    return _senders.get()


# --- listening ---------------------------------------------------------------


class _Listening:
    def __init__(self, receiver: Receiver) -> None:
        self.receiver = receiver
        self.users = 0
        self.closing: asyncio.TimerHandle | None = None


_listening: dict[asyncio.AbstractEventLoop, _Listening] = {}


def listen(deliver: Deliver) -> Callable[[], None]:
    """Hear other processes' rings on the running loop until the returned function
    is called (once per watch socket). The receiver outlives its last watch socket
    by AGENT_DOORBELL_LINGER_SECONDS: sockets that come and go (a portal's pages, a
    client's reconnects, a burst of runs' watchers) reuse it instead of each
    reconnecting LISTEN, during which their rings would only come by the poll."""
    loop = asyncio.get_running_loop()
    for closed in [other for other in _listening if other.is_closed()]:
        _listening.pop(closed).receiver.close()
    entry = _listening.get(loop)
    if entry is None:
        receiver = _start_receiver(loop, deliver)
        if receiver is None:
            return lambda: None
        entry = _listening[loop] = _Listening(receiver)
    if entry.closing is not None:
        entry.closing.cancel()
        entry.closing = None
    entry.users += 1
    released = False

    def release() -> None:
        nonlocal released
        if released:
            return
        released = True
        entry.users -= 1
        if entry.users == 0 and _listening.get(loop) is entry:
            linger = settings.AGENT_DOORBELL_LINGER_SECONDS
            if linger > 0 and not loop.is_closed():
                entry.closing = loop.call_later(linger, _close_idle, loop, entry)
            else:
                _close_idle(loop, entry)

    return release


def _close_idle(loop: asyncio.AbstractEventLoop, entry: _Listening) -> None:
    entry.closing = None
    if entry.users == 0 and _listening.get(loop) is entry:
        del _listening[loop]
        entry.receiver.close()


def _start_receiver(loop: asyncio.AbstractEventLoop, deliver: Deliver) -> Receiver | None:
    def on_message(payload: str) -> None:
        ring = decode(payload)
        if ring is not None and ring[0] != os.getpid():
            deliver(None if ring[2] == ALL_TRACES else ring[2], ring[1])

    def on_connected() -> None:
        deliver(None, EVERYTHING)

    kind = transport()
    directory = doorbell_dir()
    receiver: Receiver
    if kind == "postgres":
        receiver = NotifyReceiver(on_message, on_connected)
    elif kind == "socket" and directory is not None:
        receiver = SocketReceiver(directory, on_message)
    else:
        return None
    return receiver if receiver.start(loop) else None
