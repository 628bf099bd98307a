"""A run thread's database connection: given back while the run waits (issue 18).

Django opens one connection per thread. A worker process holding many runs
(traces/runhost.py) would hold as many connections, although a run spends nearly
all its time waiting on the model or a tool. On PostgreSQL with Django's psycopg
pool (DATABASES OPTIONS "pool", AGENT_DB_POOL_SIZE), closing the thread's
connection returns it to the process's pool, so a run holds one only while it
reads or commits. Without a pool (SQLite, or PostgreSQL with persistent
connections) the thread keeps its connection: closing would mean reconnecting.
"""

from __future__ import annotations

import os
from typing import Any

from django.db import connection

# Pools a forked process inherited: kept referenced, never closed nor collected,
# because their sockets are the parent's (closing one would end the parent's
# session on the server).
_inherited: list[dict[str, Any]] = []


def pooled() -> bool:
    """Whether this process's default database hands connections out of a pool."""
    return bool(connection.settings_dict.get("OPTIONS", {}).get("pool"))


def connection_release() -> None:
    """Give this thread's connection back to the pool before a long wait.

    Precondition: no transaction is open in this thread (a run waits between
    commits); inside one this does nothing. The next query takes a connection again.
    """
    if not pooled() or connection.connection is None or connection.in_atomic_block:
        return
    connection.close()


def _forget_inherited_pools() -> None:
    """In a forked child: let the next query open this process's own pool."""
    try:
        from django.db.backends.postgresql.base import DatabaseWrapper
    except Exception:  # psycopg not installed: no pool can exist
        return
    pools: dict[str, Any] = getattr(DatabaseWrapper, "_connection_pools", {})
    if pools:
        _inherited.append(dict(pools))
        pools.clear()


os.register_at_fork(after_in_child=_forget_inherited_pools)
