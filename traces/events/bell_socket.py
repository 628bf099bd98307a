"""The cross-process doorbell on one machine: Unix datagram sockets in a directory.

Every process that serves watch sockets (daphne) binds one datagram socket,
`<pid>-<random>.sock`, in the doorbell directory (AGENT_DOORBELL_DIR, by default
`<SQLite file>.doorbells`) while it has watchers. A ringing process sends one
datagram to every socket there, non-blocking; a socket file nobody is bound to
(its process died) refuses the datagram and is removed. The directory is the
owner's only (0700), like the database next to it.

A full receive queue (Linux queues only net.unix.max_dgram_qlen datagrams, 10 by
default: a burst of runs fills it while daphne's loop is busy) cannot take the
ring, and which trace it named would wait for the watcher's poll (seconds). So
the sender owes that socket an "everything" ring: a daemon thread retries it
every few milliseconds until the queue has room (the receiver has read what was
queued), and the receiver then wakes all its watchers, which read the event
table. Several overflowed rings cost one such ring.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

logger = logging.getLogger(__name__)

SUFFIX = ".sock"
MAX_DATAGRAM = 4096  # a payload is a pid, an event id and a trace id (<= 255 chars)
# sun_path holds 108 bytes with the terminating NUL.
MAX_SOCKET_PATH = 107
# An owed "everything" ring is retried after each of these pauses, then given up
# (the watchers' poll is the safety net).
OWED_RETRY_SECONDS = (0.002, 0.005, 0.01, 0.02) + (0.05,) * 40


class SocketSender:
    """Sends a ring to every bound socket of the directory; never blocks, never raises.

    `everything` is the payload that wakes all of a receiver's watchers, owed to a
    socket whose queue was full."""

    def __init__(self, directory: Path, everything: str = "") -> None:
        self.directory = directory
        self.everything = everything.encode()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setblocking(False)
        self._lock = threading.Lock()
        self._owed: set[str] = set()
        self._settling = False

    def send(self, payload: str) -> None:
        data = payload.encode()
        try:
            entries = list(os.scandir(self.directory))
        except OSError:
            return  # no directory: nobody listens
        for entry in entries:
            if entry.name.endswith(SUFFIX) and self._send_one(data, entry.path) == "full":
                self._owe(entry.path)

    def _send_one(self, data: bytes, path: str) -> str:
        """ "sent", "full" (its queue has no room) or "gone" (nobody will read it)."""
        try:
            self.sock.sendto(data, path)
        except ConnectionRefusedError:
            _remove_stale(path)
        except BlockingIOError:
            return "full"
        except FileNotFoundError:
            pass  # it just closed
        except OSError as exc:
            logger.debug("doorbell socket %s not rung: %s", path, exc)
        else:
            return "sent"
        return "gone"

    def _owe(self, path: str) -> None:
        if not self.everything:
            return
        with self._lock:
            self._owed.add(path)
            if self._settling:
                return
            self._settling = True
        threading.Thread(target=self._settle, name="doorbell-owed", daemon=True).start()

    def _settle(self) -> None:
        """Pay the owed "everything" rings as the receivers' queues empty."""
        for pause in OWED_RETRY_SECONDS:
            time.sleep(pause)
            with self._lock:
                owed = list(self._owed)
            paid = {path for path in owed if self._send_one(self.everything, path) != "full"}
            with self._lock:
                self._owed -= paid
                if not self._owed:
                    self._settling = False
                    return
        with self._lock:
            logger.debug("doorbell: %d sockets stayed full; their watchers poll", len(self._owed))
            self._owed.clear()
            self._settling = False


def _remove_stale(path: str) -> None:
    """A socket file whose process is gone: nothing is bound to it any more."""
    try:
        os.unlink(path)
    except OSError:
        pass


class SocketReceiver:
    """This process's bound socket, read by the event loop (no thread)."""

    def __init__(self, directory: Path, on_message: Callable[[str], None]) -> None:
        self.directory = directory
        self.on_message = on_message
        self.name = f"{os.getpid()}-{secrets.token_hex(4)}{SUFFIX}"
        self.path = directory / self.name
        self.sock: socket.socket | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Bind and read on `loop`; False (logged) when the directory cannot hold a socket."""
        if len(os.fsencode(self.path)) > MAX_SOCKET_PATH:
            logger.warning(
                "doorbell directory %s is too long for a Unix socket path: watchers fall back to "
                "polling (set AGENT_DOORBELL_DIR to a shorter path)",
                self.directory,
            )
            return False
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            sock.bind(str(self.path))
        except OSError as exc:
            sock.close()
            logger.warning("doorbell socket %s not bound (watchers fall back to polling): %s", self.path, exc)
            return False
        sock.setblocking(False)
        self.sock, self.loop = sock, loop
        loop.add_reader(sock.fileno(), self._read)
        return True

    def _read(self) -> None:
        assert self.sock is not None
        while True:
            try:
                data = self.sock.recv(MAX_DATAGRAM)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                logger.warning("doorbell socket %s: %s", self.path, exc)
                return
            self.on_message(data.decode(errors="replace"))

    def close(self) -> None:
        if self.sock is None:
            return
        if self.loop is not None and not self.loop.is_closed():
            self.loop.remove_reader(self.sock.fileno())
        self.sock.close()
        self.sock = None
        _remove_stale(str(self.path))
