"""A run's step written atomically, fenced by its lease token: ONE statement on PostgreSQL.

On PostgreSQL a step's commit is a single round trip instead of five (BEGIN,
INSERT messages, INSERT events, UPDATE trace, COMMIT):

    WITH t AS (UPDATE traces_trace SET ... WHERE trace_id = %s AND run_token = %s
               RETURNING stop_requested),
         i0 AS (INSERT INTO traces_message (...) SELECT ... FROM jsonb_to_recordset(%s::jsonb) AS r(...)
                WHERE EXISTS (SELECT 1 FROM t)),
         i1 AS (INSERT INTO traces_traceevent ...),
         u0 AS (UPDATE traces_goal SET ... WHERE trace_id = %s AND goal_id = %s
                AND EXISTS (SELECT 1 FROM t))
    SELECT stop_requested FROM t

The fence is the trace UPDATE: it takes the row lock and re-checks `run_token`
(READ COMMITTED re-evaluates the condition on the newest row version), and every
other write runs only if it matched. One statement is one transaction, so a run
that lost its lease writes nothing at all, as with the ORM path's rollback. The
RETURNING clause doubles as the stop poll (R5): a commit tells the run whether
an expert asked it to stop, so a busy run needs no separate heartbeat query.

Other tables' rows a step writes ride along the same way (`RunStore.insert`: what the
model was sent, traces/runner/request_log.py), a content-addressed part that another
segment stored skipped by ON CONFLICT DO NOTHING (`keep_existing`); as their own
INSERTs in the commit's transaction they cost 4.8 against 2.5 ms a commit with a short
tool output (bench/tricks.py (e), 2026-11-24).

The inserted rows travel as one JSON document (`jsonb_to_recordset`, see
`_records`), so the statement's text depends only on which tables a step writes
(cached by `_statement`), not on how many rows; updated values go through each
field's `get_db_prep_save`. It runs through Django's own cursor: its query log,
execute wrappers and error translation apply.

Pays (bench/tricks.py, PostgreSQL 15 on a noisy 2-CPU VM, 2026-11-23; ms per
step commit of a tool call and its result, 3 events, the goal's figures and the
trace row, median of 50 turns of 20): 1.9 against 3.4 for the same writes as
separate statements in one transaction, fence first (`_write_in_transaction`),
with a 280-character tool output; 3.3 against 5.1 with 21,000 characters.
Binding server-side alone (a psycopg `Cursor` inside Django's `make_cursor`,
as this module did) gained nothing on the short step over five runs (faster in
two, slower in two) and 1-12 % on the long one (2.9 against 3.3 in that run).
What does pay is *preparing* the statement (`_prepared_cursor`, since 5 Dec 2026):
PostgreSQL then skips parsing, analysing and planning it, about half of its time
on a short step's commit (README, Benchmarks, Step overhead).

SQLite has no data-modifying CTEs: there the same writes run in one transaction
with the fence first (`_write_in_transaction`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Collection, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any, cast

import psycopg
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.models import Field, Model
from django.utils import timezone

from traces.models import Trace
from traces.storable import without_nul

# (model, natural key {field: value}, {field: new value})
Update = tuple[type[Model], dict[str, Any], dict[str, Any]]


def fenced_write(
    *,
    trace_id: str,
    token: int,
    trace_values: dict[str, Any],
    inserts: Sequence[tuple[type[Model], Sequence[Model]]],
    updates: Sequence[Update] = (),
    keep_existing: Collection[type[Model]] = (),
) -> bool | None:
    """Write everything if the trace still carries `token`; return its stop flag.

    `updates` are (model, key, values): the row whose fields equal `key` (a
    natural key, so a row inserted by an earlier commit of this run needs no
    primary key read back) gets `values`. Rows of a model in `keep_existing` that
    collide with a stored row on a unique constraint are skipped (ON CONFLICT DO
    NOTHING: a content-addressed row another segment of the trace already wrote).

    Returns None (and writes nothing) when the lease is lost. Inside an
    atomic block it runs in a savepoint, so a database error leaves the outer
    transaction usable, as `transaction.atomic()` would.
    """
    inserts = [(model, rows) for model, rows in inserts if rows]
    trace_values = {name: without_nul(value) for name, value in trace_values.items()}
    updates = [
        (model, key, {name: without_nul(v) for name, v in values.items()}) for model, key, values in updates
    ]
    if connection.vendor != "postgresql":
        return _write_in_transaction(trace_id, token, trace_values, inserts, updates, keep_existing)
    sql = _statement(
        tuple(trace_values),
        tuple((model, model in keep_existing) for model, _ in inserts),
        tuple((model, tuple(key), tuple(values)) for model, key, values in updates),
    )
    params: list[Any] = [prepared(Trace, name, value) for name, value in trace_values.items()]
    params += [trace_id, token]
    for model, rows in inserts:
        params.append(_records(model, rows))
    for model, key, values in updates:
        params += [prepared(model, name, value) for name, value in values.items()]
        params += [prepared(model, name, value) for name, value in key.items()]
    if connection.in_atomic_block:
        with transaction.atomic():
            return _execute(sql, params)
    return _execute(sql, params)


def _execute(sql: str, params: list[Any]) -> bool | None:
    prepare = settings.AGENT_DB_PREPARED_COMMITS and not connection.queries_logged
    with _prepared_cursor() if prepare else connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return None if row is None else bool(row[0])


class _PreparedCursor(psycopg.Cursor[Any]):
    """Binds on the server and prepares every statement it executes (a named
    statement per connection, kept by psycopg and reused from the second call on).

    Django turns psycopg's `prepare_threshold` off (None), and psycopg then
    prepares nothing, even when asked. It is set for this statement's execution
    only: while it is set, psycopg also counts every other query of the
    connection by its text (values included, up to 100 of them kept), which
    Django's client-bound queries have no use for."""

    def execute(
        self, query: Any, params: Any = None, *, prepare: bool | None = None, binary: bool | None = None
    ) -> Any:
        conn = self.connection
        threshold = conn.prepare_threshold
        if threshold is None:
            conn.prepare_threshold = _ONLY_WHEN_ASKED
        try:
            return super().execute(query, params, prepare=True, binary=binary)
        finally:
            conn.prepare_threshold = threshold


def _prepared_cursor() -> Any:
    """A cursor for the step's statement that PostgreSQL parses and plans once per
    connection: of the ~0.9 ms the server spends on a short step's commit, parsing,
    analysing, rewriting and planning the many-CTE statement take ~0.45 (the
    executor the rest; README, Benchmarks). Django's own cursors bind on the client
    and prepare nothing (it turns psycopg's `prepare_threshold` off for poolers);
    this one asks for preparing explicitly (`_PreparedCursor`). Opened and wrapped as `connection.cursor()`
    opens and wraps its cursors: health check, execute wrappers and error
    translation apply. Not while queries are logged (DEBUG, a test
    capturing them): Django's query log reads the statement as a client-bound cursor
    leaves it, with its values in place, and would log nothing for this one."""
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    connection.validate_thread_sharing()
    with connection.wrap_database_errors:
        # django-stubs type the argument as Django's wrapper; it is the driver's cursor.
        return connection.make_cursor(cast(Any, _PreparedCursor(connection.connection)))


_ONLY_WHEN_ASKED = 2**31 - 1  # a threshold no query reaches by being run again


def _write_in_transaction(
    trace_id: str,
    token: int,
    trace_values: dict[str, Any],
    inserts: Sequence[tuple[type[Model], Sequence[Model]]],
    updates: Sequence[Update],
    keep_existing: Collection[type[Model]],
) -> bool | None:
    """SQLite: the same writes in one transaction, fence first (no data-modifying CTEs
    there). Plain cached SQL and `executemany`: the ORM's compilers cost more than
    the writes on an in-process database. Statements and parameters are made before
    the transaction: it holds the database's one write lock, which every other
    writer of the machine waits for."""
    fence = (
        _fence_sql(tuple(trace_values)),
        [*(prepared(Trace, name, value) for name, value in trace_values.items()), trace_id, token],
    )
    db = connections[DEFAULT_DB_ALIAS]  # the connection itself: its proxy costs a lookup per use
    many = []
    for model, rows in inserts:
        shape = _param_shape(model)
        params = [
            [
                value if type(value) in same else f.get_db_prep_save(f.pre_save(obj, True), db)
                for f, attname, same in shape
                for value in (getattr(obj, attname),)
            ]
            for obj in rows
        ]
        many.append((_insert_sql(model, model in keep_existing), params))
    single = []
    for model, key, changes in updates:
        values = [prepared(model, name, value) for name, value in changes.items()]
        values += [prepared(model, name, value) for name, value in key.items()]
        single.append((_update_sql(model, tuple(key), tuple(changes)), values))
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(*fence)
        row = cursor.fetchone()
        if row is None:
            return None  # nothing written yet: the fence is the first statement
        for sql, param_list in many:
            cursor.executemany(sql, param_list)
        for sql, values in single:
            cursor.execute(sql, values)
        return bool(row[0])


@lru_cache(maxsize=64)
def _fence_sql(trace_columns: tuple[str, ...]) -> str:
    sets = ", ".join(f"{quoted_column(Trace, name)} = %s" for name in trace_columns)
    return (
        f"UPDATE {connection.ops.quote_name(Trace._meta.db_table)} SET {sets} "
        f"WHERE {quoted_column(Trace, 'trace_id')} = %s AND {quoted_column(Trace, 'run_token')} = %s "
        f"RETURNING {quoted_column(Trace, 'stop_requested')}"
    )


@lru_cache(maxsize=32)
def _param_shape(model: type[Model]) -> tuple[tuple[Field, str, frozenset[type]], ...]:
    """(field, attname, the value types it stores as they are) of each inserted field.

    On SQLite a str in a text column, an int in an integer one, a bool in a boolean one (and
    None in any) is its own parameter: `get_db_prep_save` would return it unchanged,
    at a few microseconds a field. Everything else, and every field whose `pre_save`
    sets the value (`auto_now`), goes through `get_db_prep_save` as the ORM's does.
    """
    shape = []
    for field in _insert_fields(model):
        same = (
            _prepared_shape(model, field.name)[1] if type(field).pre_save is Field.pre_save else frozenset()
        )
        shape.append((field, field.attname, same))
    return tuple(shape)


_STORED_AS_IS: dict[str, frozenset[type]] = {
    "CharField": frozenset({str, type(None)}),
    "TextField": frozenset({str, type(None)}),
    "IntegerField": frozenset({int, type(None)}),
    "BigIntegerField": frozenset({int, type(None)}),
    "PositiveIntegerField": frozenset({int, type(None)}),
    "BooleanField": frozenset({bool, type(None)}),
}


@lru_cache(maxsize=32)
def _insert_sql(model: type[Model], keep_existing: bool) -> str:
    fields = _insert_fields(model)
    names = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    marks = ", ".join(["%s"] * len(fields))
    return f"INSERT INTO {connection.ops.quote_name(model._meta.db_table)} ({names}) VALUES ({marks})" + (
        " ON CONFLICT DO NOTHING" if keep_existing else ""
    )


@lru_cache(maxsize=64)
def _update_sql(model: type[Model], key: tuple[str, ...], names: tuple[str, ...]) -> str:
    sets = ", ".join(f"{quoted_column(model, name)} = %s" for name in names)
    where = " AND ".join(f"{quoted_column(model, name)} = %s" for name in key)
    return f"UPDATE {connection.ops.quote_name(model._meta.db_table)} SET {sets} WHERE {where}"


@lru_cache(maxsize=256)
def _statement(
    trace_columns: tuple[str, ...],
    insert_shapes: tuple[tuple[type[Model], bool], ...],
    update_shapes: tuple[tuple[type[Model], tuple[str, ...], tuple[str, ...]], ...],
) -> str:
    ops = connection.ops
    parts = [f"t AS ({_fence_sql(trace_columns)})"]
    for index, (model, keep_existing) in enumerate(insert_shapes):
        fields = _insert_fields(model)
        names = ", ".join(ops.quote_name(f.column) for f in fields)
        record = ", ".join(f"{ops.quote_name(f.column)} {f.db_type(connection)}" for f in fields)
        parts.append(
            f"i{index} AS (INSERT INTO {ops.quote_name(model._meta.db_table)} ({names}) "
            f"SELECT {names} FROM jsonb_to_recordset(%s::jsonb) AS r({record}) "
            "WHERE EXISTS (SELECT 1 FROM t)" + (" ON CONFLICT DO NOTHING)" if keep_existing else ")")
        )
    for index, (model, key, changed) in enumerate(update_shapes):
        parts.append(f"u{index} AS ({_update_sql(model, key, changed)} AND EXISTS (SELECT 1 FROM t))")
    return f"WITH {', '.join(parts)} SELECT {quoted_column(Trace, 'stop_requested')} FROM t"


def quoted_column(model: type[Model], name: str) -> str:
    """`model`'s column `name`, quoted for this database (a raw statement's column)."""
    return connection.ops.quote_name(_field(model, name).column)


def _field(model: type[Model], name: str) -> Field:
    field = model._meta.get_field(name)
    if not isinstance(field, Field):  # a reverse relation or a generic foreign key
        raise TypeError(f"{model.__name__}.{name} is not a column")
    return field


@lru_cache(maxsize=32)
def _insert_fields(model: type[Model]) -> tuple[Field, ...]:
    """The columns an ORM insert writes: every concrete field but an auto primary key."""
    return tuple(
        f for f in model._meta.concrete_fields if not (f.primary_key and getattr(f, "db_returning", False))
    )


def _records(model: type[Model], rows: Sequence[Model]) -> str:
    """The rows as one JSON array of objects keyed by column, for jsonb_to_recordset.

    One json.dumps in C instead of an array per column dumped in Python; JSON
    fields nest as they are (no double encoding), None becomes SQL NULL, as the
    ORM stores it.
    """
    shape = _record_shape(model)
    return json.dumps(
        [{column: convert(getattr(row, attname)) for column, attname, convert in shape} for row in rows],
        ensure_ascii=False,
        allow_nan=False,
    )


@lru_cache(maxsize=32)
def _record_shape(model: type[Model]) -> tuple[tuple[str, str, Callable[[Any], Any]], ...]:
    """(column, attname, to JSON) of each inserted field; TypeError naming a field
    whose kind has no JSON form here that jsonb_to_recordset reads back as the
    ORM would have stored it (tests/traces/test_fenced.py checks every model the
    runner inserts)."""
    shape = []
    for field in _insert_fields(model):
        kind = field.get_internal_type()
        convert: Callable[[Any], Any]
        if kind == "DateTimeField":
            convert = _iso
        elif kind == "FloatField":
            convert = _finite
        elif kind == "JSONField" or kind in _PLAIN:
            convert = _same
        else:
            raise TypeError(f"{model.__name__}.{field.name}: no JSON form for a {kind}")
        shape.append((field.column, field.attname, convert))
    return tuple(shape)


_PLAIN = {
    "CharField",
    "TextField",
    "IntegerField",
    "BigIntegerField",
    "BooleanField",
    "ForeignKey",
}


def _same(value: Any) -> Any:
    return value


def _finite(value: float | None) -> float | None:
    # JSON has no NaN or infinity; stored as unknown (NULL), as SQLite stores a NaN.
    return value if value is None or math.isfinite(value) else None


def _iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    if timezone.is_naive(value):
        raise ValueError(f"naive datetime {value!r} while time zone support is active")
    return value.isoformat()


def prepared(model: type[Model], name: str, value: Any) -> Any:
    """`value` as `model`'s field `name` writes it (a raw statement's parameter)."""
    field, same = _prepared_shape(model, name)
    if type(value) in same:
        return value
    return field.get_db_prep_save(value, connections[DEFAULT_DB_ALIAS])


@lru_cache(maxsize=256)
def _prepared_shape(model: type[Model], name: str) -> tuple[Field, frozenset[type]]:
    field = _field(model, name)
    target = field.target_field if field.is_relation else field  # type: ignore[attr-defined]
    same = (
        _STORED_AS_IS.get(target.get_internal_type(), frozenset())
        if connection.vendor == "sqlite"
        else frozenset()
    )
    return field, same
