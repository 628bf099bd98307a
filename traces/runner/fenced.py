"""A run's step written to PostgreSQL in ONE fenced statement.

On PostgreSQL a step's commit is a single round trip instead of five (BEGIN,
INSERT messages, INSERT events, UPDATE trace, COMMIT):

    WITH t AS (UPDATE traces_trace SET ... WHERE trace_id = %s AND run_token = %s
               RETURNING stop_requested),
         i0 AS (INSERT INTO traces_message (...) SELECT * FROM unnest(%s::varchar[], ...)
                WHERE EXISTS (SELECT 1 FROM t)),
         i1 AS (INSERT INTO traces_traceevent ...),
         u0 AS (UPDATE traces_goal SET ... WHERE id = %s AND EXISTS (SELECT 1 FROM t))
    SELECT stop_requested FROM t

The fence is the trace UPDATE: it takes the row lock and re-checks `run_token`
(READ COMMITTED re-evaluates the condition on the newest row version), and every
other write runs only if it matched. One statement is one transaction, so a run
that lost its lease writes nothing at all, as with the ORM path's rollback. The
RETURNING clause doubles as the stop poll (R5): a commit tells the run whether
an expert asked it to stop, so a busy run needs no separate heartbeat query.

Values go through each field's `get_db_prep_save`, as the ORM's own inserts do,
and are bound server-side (no client-side quoting of the arrays).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import psycopg
from django.db import connection, transaction
from django.db.models import Field, Model

from traces.models import Trace


def fenced_write(
    *,
    trace_id: str,
    token: int,
    trace_values: dict[str, Any],
    inserts: Sequence[tuple[type[Model], list[Model]]],
    updates: Sequence[tuple[Model, dict[str, Any]]] = (),
) -> bool | None:
    """Write everything if the trace still carries `token`; return its stop flag.

    Returns None (and writes nothing) when the lease is lost. Inside an
    atomic block it runs in a savepoint, so a database error leaves the outer
    transaction usable, as `transaction.atomic()` would.
    """
    inserts = [(model, rows) for model, rows in inserts if rows]
    sql = _statement(
        tuple(trace_values),
        tuple(model for model, _ in inserts),
        tuple((type(obj), tuple(values)) for obj, values in updates),
    )
    params: list[Any] = [_prep(Trace, name, value) for name, value in trace_values.items()]
    params += [trace_id, token]
    for model, rows in inserts:
        params += _columns(model, rows)
    for obj, values in updates:
        params += [_prep(type(obj), name, value) for name, value in values.items()]
        params.append(obj.pk)
    if connection.in_atomic_block:
        with transaction.atomic():
            return _execute(sql, params)
    return _execute(sql, params)


def _execute(sql: str, params: list[Any]) -> bool | None:
    connection.ensure_connection()
    started = time.monotonic()
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if connection.queries_logged:  # DEBUG, or a test counting queries
        connection.queries_log.append({"sql": sql, "time": f"{time.monotonic() - started:.3f}"})
    return None if row is None else bool(row[0])


@lru_cache(maxsize=256)
def _statement(
    trace_columns: tuple[str, ...],
    insert_models: tuple[type[Model], ...],
    update_shapes: tuple[tuple[type[Model], tuple[str, ...]], ...],
) -> str:
    ops = connection.ops
    sets = ", ".join(f"{_column(Trace, name)} = %s" for name in trace_columns)
    parts = [
        f"t AS (UPDATE {ops.quote_name(Trace._meta.db_table)} SET {sets} "
        f"WHERE {_column(Trace, 'trace_id')} = %s AND {_column(Trace, 'run_token')} = %s "
        f"RETURNING {_column(Trace, 'stop_requested')})"
    ]
    for index, model in enumerate(insert_models):
        fields = _insert_fields(model)
        names = ", ".join(ops.quote_name(f.column) for f in fields)
        arrays = ", ".join(f"%b::{_array_type(f)}" for f in fields)  # binary: no quoting
        parts.append(
            f"i{index} AS (INSERT INTO {ops.quote_name(model._meta.db_table)} ({names}) "
            f"SELECT * FROM unnest({arrays}) WHERE EXISTS (SELECT 1 FROM t))"
        )
    for index, (model, names) in enumerate(update_shapes):
        sets = ", ".join(f"{_column(model, name)} = %s" for name in names)
        parts.append(
            f"u{index} AS (UPDATE {ops.quote_name(model._meta.db_table)} SET {sets} "
            f"WHERE {ops.quote_name(model._meta.pk.column)} = %s AND EXISTS (SELECT 1 FROM t))"
        )
    return f"WITH {', '.join(parts)} SELECT stop_requested FROM t"


def _column(model: type[Model], name: str) -> str:
    return connection.ops.quote_name(model._meta.get_field(name).column)


@lru_cache(maxsize=32)
def _insert_fields(model: type[Model]) -> tuple[Field, ...]:
    """The columns an ORM insert writes: every concrete field but an auto primary key."""
    return tuple(
        f for f in model._meta.concrete_fields if not (f.primary_key and getattr(f, "db_returning", False))
    )


def _array_type(field: Field) -> str:
    # Without the length (varchar(270) -> varchar[]), as Django's own UNNEST insert.
    return field.db_type(connection).split("(")[0] + "[]"


def _columns(model: type[Model], rows: list[Model]) -> list[list[Any]]:
    return [
        [field.get_db_prep_save(field.pre_save(row, True), connection) for row in rows]
        for field in _insert_fields(model)
    ]


def _prep(model: type[Model], name: str, value: Any) -> Any:
    return model._meta.get_field(name).get_db_prep_save(value, connection)
