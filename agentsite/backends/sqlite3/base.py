"""SQLite whose writers take turns: the embedded default's database backend (issue 18).

SQLite lets one connection write at a time. A writer that finds the lock held
waits in SQLite's busy handler, which retries after sleeps that grow to 100 ms
and keeps no queue: a writer that has waited a while tries ten times a second,
and each newcomer that finds the lock free takes it first. In a burst of 64 runs
on four worker processes (bench/density.py, 25 Nov 2026), 56 of ~1,150 step
commits waited 0.2-1.1 s at `BEGIN IMMEDIATE` while the lock was held a few
milliseconds at a time: the waits, not the writes, made the live events' tail.

Here every write takes a turn before SQLite's lock: a transaction from its
`BEGIN` to its commit or rollback, a write statement outside a transaction
(django-q2's ORM broker) for that statement. A turn is a lock per process
(waiters are woken as it is released) and an exclusive `flock` on
`<database>.writer` across processes, tried every millisecond by the one thread
of each process that holds its process's lock (as Rails 8 does for SQLite's busy
handler). The kernel drops a dead process's flock. A write by something that
takes no turn (the sqlite3 shell, another program) still meets SQLite's busy
handler, as before; nothing here is needed for correctness.

A turn not had within the connection's busy timeout (OPTIONS["timeout"]) fails
as SQLite would: OperationalError "database is locked".
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any

from django.db.backends.sqlite3 import base

# Statements that write, as their first word; any other statement outside a
# transaction takes no turn (a write missed here only waits as SQLite would).
_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")
_POLL = 0.001


class WriterTurn:
    """The turn to write one database file: a process's lock, then the file's flock."""

    def __init__(self, path: str) -> None:
        self.path = f"{path}.writer"
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        # A forked child holds no turn: a fresh lock, and its own open file
        # description (a flock belongs to it; the parent's would be shared).
        self._thread_lock = threading.Lock()
        self._fd: int | None = None

    def acquire(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        if not self._thread_lock.acquire(timeout=timeout):
            raise sqlite3.OperationalError("database is locked")
        try:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            while True:
                try:
                    fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise sqlite3.OperationalError("database is locked") from None
                    time.sleep(_POLL)
        except BaseException:
            self._thread_lock.release()
            raise

    def release(self) -> None:
        try:
            if self._fd is not None:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self._thread_lock.release()


_turns: dict[str, WriterTurn] = {}
_turns_lock = threading.Lock()


def writer_turn(path: str) -> WriterTurn:
    """The process's one turn object for the database file at `path`."""
    key = os.path.realpath(path)
    with _turns_lock:
        turn = _turns.get(key)
        if turn is None:
            turn = _turns[key] = WriterTurn(key)
        return turn


class TurnCursor(base.SQLiteCursorWrapper):
    """Takes the turn around a write statement run outside a transaction."""

    turn: WriterTurn | None = None
    timeout: float = 5.0

    def execute(self, query: str, params: Any = None) -> Any:
        if self._takes_turn(query):
            return self._in_turn(super().execute, query, params)
        return super().execute(query, params)

    def executemany(self, query: str, param_list: Any) -> Any:
        if self._takes_turn(query):
            return self._in_turn(super().executemany, query, param_list)
        return super().executemany(query, param_list)

    def _takes_turn(self, query: str) -> bool:
        return self.turn is not None and not self.connection.in_transaction and _writes(query)

    def _in_turn(self, statement: Callable[[str, Any], Any], query: str, params: Any) -> Any:
        assert self.turn is not None  # _takes_turn
        self.turn.acquire(self.timeout)
        try:
            return statement(query, params)
        finally:
            self.turn.release()


def _writes(query: str) -> bool:
    return query.lstrip()[:7].upper().startswith(_WRITES)


class DatabaseWrapper(base.DatabaseWrapper):
    turn: WriterTurn | None = None
    _holds_turn = False

    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        conn = super().get_new_connection(conn_params)
        name = str(conn_params["database"])
        self.turn = None if self.is_in_memory_db() or name.startswith("file:") else writer_turn(name)
        self.turn_timeout = float(conn_params.get("timeout", 5.0))
        return conn

    def create_cursor(self, name: str | None = None) -> Any:
        cursor = self.connection.cursor(factory=TurnCursor)
        cursor.turn, cursor.timeout = self.turn, self.turn_timeout
        return cursor

    def _start_transaction_under_autocommit(self) -> None:
        # Django's atomic() starts a transaction on SQLite here (private, so unknown to django-stubs).
        if self.turn is None or self._holds_turn:
            return super()._start_transaction_under_autocommit()  # type: ignore[misc]
        with self.wrap_database_errors:
            self.turn.acquire(self.turn_timeout)
        self._holds_turn = True
        try:
            super()._start_transaction_under_autocommit()  # type: ignore[misc]
        except BaseException:
            self._release_turn()
            raise

    def commit(self) -> None:
        try:
            super().commit()
        finally:
            self._release_turn()

    def rollback(self) -> None:
        try:
            super().rollback()
        finally:
            self._release_turn()

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._release_turn()

    def _release_turn(self) -> None:
        if self.connection is not None and self.connection.in_transaction:
            return  # e.g. commit() refused inside an atomic block: the transaction goes on
        if self._holds_turn and self.turn is not None:
            self._holds_turn = False
            self.turn.release()
