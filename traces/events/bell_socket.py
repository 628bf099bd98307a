"""The cross-process doorbell on one machine: Unix datagram sockets in a directory.

Every process that serves watch sockets (daphne) binds one datagram socket,
`<pid>-<random>.sock`, in the doorbell directory (AGENT_DOORBELL_DIR, by default
`<SQLite file>.doorbells`) while it has watchers. A ringing process sends one
datagram to every socket there, non-blocking: a full receive buffer drops the
ring (the receiver is busy reading anyway; its poll is the safety net), and a
socket file nobody is bound to (its process died) refuses the datagram and is
removed. The directory is the owner's only (0700), like the database next to it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
from collections.abc import Callable
from pathlib import Path

logger = logging.getLogger(__name__)

SUFFIX = ".sock"
MAX_DATAGRAM = 4096  # a payload is a pid, an event id and a trace id (<= 255 chars)
# sun_path holds 108 bytes with the terminating NUL.
MAX_SOCKET_PATH = 107


class SocketSender:
    """Sends a ring to every bound socket of the directory; never blocks, never raises."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setblocking(False)

    def send(self, payload: str) -> None:
        data = payload.encode()
        try:
            entries = list(os.scandir(self.directory))
        except OSError:
            return  # no directory: nobody listens
        for entry in entries:
            if not entry.name.endswith(SUFFIX):
                continue
            try:
                self.sock.sendto(data, entry.path)
            except ConnectionRefusedError:
                _remove_stale(entry.path)
            except (BlockingIOError, FileNotFoundError):
                pass  # its buffer is full, or it just closed
            except OSError as exc:
                logger.debug("doorbell socket %s not rung: %s", entry.path, exc)


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
