"""Reads of traces: main path, branches, listings."""

from __future__ import annotations

import gc
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from functools import cache, partial
from operator import itemgetter
from typing import Any, NamedTuple

from django.db import connection, models
from django.db.models import QuerySet
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init

from traces.errors import TraceNotFound
from traces.models import Message, Trace, TraceEvent, llm_dict

# The main path is the chain from the head up `parent_sequence` to the root, read
# in ONE query. It walks linear segments, not messages (see Message.segment_start):
# each step of the recursion jumps from a segment's newest message on the path
# (`entry`) to its first (`start`), then to that one's parent, so a 10,000-message
# path with three rewinds costs four steps and four index range scans.
# `parent_sequence < sequence` holds for every stored message (new messages always
# take last_sequence + 1), so sequences grow along a path and guard against cycles.
_MAIN_PATH_SEGMENTS = """
WITH RECURSIVE seg(entry, start) AS (
    SELECT m.sequence, COALESCE(m.segment_start, m.sequence)
    FROM traces_message m
    WHERE m.trace_id = %s AND m.sequence = %s
    UNION ALL
    SELECT p.sequence, COALESCE(p.segment_start, p.sequence)
    FROM seg
    JOIN traces_message s ON s.trace_id = %s AND s.sequence = seg.start
    JOIN traces_message p ON p.trace_id = %s AND p.sequence = s.parent_sequence
    WHERE s.parent_sequence < s.sequence
)
"""
# Then each segment's messages, by an index range scan per segment. PostgreSQL
# would flatten a plain join into one pass over the whole trace checked against
# every segment; the LATERAL subquery, kept a subquery by OFFSET 0, is read per
# segment. SQLite has no LATERAL and plans the join as range scans by itself.
# `sequence > after` keeps only the path's tail: sequences grow along a path.
# No ORDER BY: segments come newest first, each in order, and merging those few
# sorted runs in Python is cheaper than the server sorting full rows.
_MAIN_PATH_ROWS = {
    "postgresql": """
SELECT {columns} FROM seg CROSS JOIN LATERAL (
    SELECT * FROM traces_message
    WHERE trace_id = %s AND sequence BETWEEN seg.start AND seg.entry AND sequence > %s
    OFFSET 0
) m
""",
}
_MAIN_PATH_ROWS_JOIN = """
SELECT {columns} FROM seg
JOIN traces_message m ON m.trace_id = %s AND m.sequence BETWEEN seg.start AND seg.entry AND m.sequence > %s
"""

# Rows hold every Message field, in this order (see _message_columns).
_MESSAGE_ATTNAMES = tuple(field.attname for field in Message._meta.concrete_fields)
_SEQUENCE = _MESSAGE_ATTNAMES.index("sequence")

# Bench figures quoted below: bench/tricks.py, a 10,000-message main path (plus
# 1,000 side messages), ms per read, median of turns of 5 reads, collections
# included, on a noisy 2-CPU VM (SQLite 3.40 / PostgreSQL 15), 2026-11-23.


def trace_main_path(
    *, trace_id: str, head_sequence: int | None = None, after_sequence: int = 0
) -> list[Message]:
    """Messages from the root to `head_sequence` (default: the trace's head), in order;
    only those after `after_sequence` when it is given (a page of a long path)."""
    with _gc_paused():
        rows = _main_path_rows(trace_id, head_sequence, _message_columns(connection.vendor), after_sequence)
        return _messages_from_rows(rows, db=connection.alias)


class PathMessage(NamedTuple):
    """A main-path message as a run loads it: read-only, and only what the request
    history, the run plan (R2-R4) and healing (R6) read. The API and the portal
    show full `Message` rows from `trace_main_path`."""

    sequence: int
    role: str
    content: Any
    tool_calls: list[dict[str, Any]] | None
    tool_call_id: str | None
    name: str | None
    goal_id: str | None
    kind: str
    description: str
    created_at: datetime

    def to_llm_dict(self) -> dict[str, Any]:
        """The OpenAI-format dict sent to a model, as `Message.to_llm_dict`."""
        return llm_dict(self.role, self.content, self.tool_calls, self.tool_call_id, self.name)


_path_message = partial(tuple.__new__, PathMessage)  # PathMessage(*values) without the Python-level __new__


def trace_main_path_for_run(*, trace_id: str, head_sequence: int | None = None) -> list[PathMessage]:
    """The main path as `trace_main_path` reads it (the same one query), as PathMessages.

    A run loads its trace's whole main path once and then only appends, so this
    is what a run's start costs: ten columns instead of every field, decoded a
    column at a time, with no model instances built. Pays: 59 ms against 105 ms
    for `trace_main_path`'s Message instances (SQLite), 82 against 123 (PostgreSQL).
    """
    with _gc_paused():
        rows = _main_path_rows(trace_id, head_sequence, _path_columns(connection.vendor))
        if not rows:
            return []
        rows.sort(key=itemgetter(0))  # sequence
        columns = _decoded_columns(rows, PathMessage._fields)
        return list(map(_path_message, zip(*columns, strict=True)))


class _CollectorPause:
    """No cyclic garbage collection while a path's rows are decoded.

    Decoding 10,000 messages allocates ~50,000 containers, so the collector runs
    dozens of times and moves them towards the oldest generation, whose full
    passes cover a worker's whole heap (Django, litellm: several hundred
    thousand objects). What is built here holds no reference cycles; the
    collector runs as usual once the block ends (Mercurial's `util.nogc`).
    Pays: with the collector on, `trace_main_path_for_run` takes 92 ms instead
    of 59 (SQLite), 122 instead of 82 (PostgreSQL); `trace_main_path` 167
    instead of 105, 209 instead of 123.

    `gc.disable` is process-wide, so pauses are counted under a lock: while
    threads overlap here (a run's load beside an API read), the last to leave
    resumes the collector, and only if it was on when the first came in.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders = 0
        self._resume = False

    @contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if self._holders == 0:
                self._resume = gc.isenabled()
                gc.disable()
            self._holders += 1
        try:
            yield
        finally:
            with self._lock:
                self._holders -= 1
                if self._holders == 0 and self._resume:
                    gc.enable()


_gc_paused = _CollectorPause()


def _main_path_rows(
    trace_id: str, head_sequence: int | None, columns: str, after_sequence: int = 0
) -> list[tuple[Any, ...]]:
    """`columns` of the main path's messages after `after_sequence`, unordered (see _MAIN_PATH_ROWS)."""
    if head_sequence is None:
        head_sequence = Trace.objects.filter(pk=trace_id).values_list("head_sequence", flat=True).first() or 0
    if not head_sequence:
        return []
    params: list[str | int] = [trace_id, head_sequence, trace_id, trace_id, trace_id, after_sequence]
    with connection.cursor() as cursor:
        cursor.execute(_main_path_sql(connection.vendor, columns), params)
        return cursor.fetchall()


@cache
def _main_path_sql(vendor: str, columns: str) -> str:
    """The main-path query on `vendor`, selecting `columns` of each message `m`."""
    rows = _MAIN_PATH_ROWS.get(vendor, _MAIN_PATH_ROWS_JOIN)
    return _MAIN_PATH_SEGMENTS + rows.format(columns=columns)


@cache
def _message_columns(vendor: str) -> str:
    """Every Message column, in field order, as `_messages_from_rows` decodes them."""
    return ", ".join(_message_column(field, vendor) for field in Message._meta.concrete_fields)


@cache
def _path_columns(vendor: str) -> str:
    """PathMessage's columns, in its field order."""
    fields = {field.name: field for field in Message._meta.concrete_fields}
    return ", ".join(_message_column(fields[name], vendor) for name in PathMessage._fields)


# Message field kinds whose values the drivers return as the ORM gives them (no
# from_db_value, no backend converter), used as they come. JSONField and
# DateTimeField columns are decoded in bulk (_BULK_DECODERS). Any other kind (a
# BooleanField is 0/1 on SQLite; a DecimalField, a UUIDField) needs a decoder
# here before Message may have one: `_decoders` refuses it.
_AS_RETURNED = frozenset({"CharField", "TextField", "IntegerField", "BigIntegerField", "FloatField"})


def _message_column(field: models.Field, vendor: str) -> str:
    if field.get_internal_type() != "DateTimeField":
        return f"m.{field.column}"
    # As naive UTC text: the drivers' own conversions (Django's timestamptz loader,
    # its sqlite3 "datetime" converter) run Python code for every value and cost
    # several times more than datetime.fromisoformat.
    if vendor == "postgresql":
        return f"(m.{field.column} AT TIME ZONE 'UTC')::text"
    return f"CAST(m.{field.column} AS TEXT)"  # SQLite stores naive UTC text


def _json_values(values: Sequence[str | None]) -> list[Any]:
    """JSON texts (NULL: None) decoded as JSONField does, by one json.loads for them all."""
    return json.loads("[" + ",".join(["null" if v is None else v for v in values]) + "]")


def _utc_datetimes(values: Sequence[str]) -> list[datetime]:
    """Naive UTC timestamps as text to aware datetimes, as the ORM gives them
    (USE_TZ, and the connection's time zone is settings.TIME_ZONE, UTC)."""
    return [datetime.fromisoformat(v + "+00:00") for v in values]


_BULK_DECODERS: dict[str, Callable[[Sequence[Any]], list[Any]]] = {
    "JSONField": _json_values,
    "DateTimeField": _utc_datetimes,
}


def _decoder(field: models.Field) -> Callable[[Sequence[Any]], list[Any]] | None:
    """The bulk decoder of a Message field's column, None if used as returned;
    TypeError for a field kind the main-path readers do not know."""
    kind = (field.target_field if isinstance(field, models.ForeignKey) else field).get_internal_type()
    if kind in _BULK_DECODERS:
        return _BULK_DECODERS[kind]
    if kind in _AS_RETURNED:
        return None
    raise TypeError(
        f"Message.{field.name}: the main-path readers cannot decode a {kind}; "
        "give it a decoder in traces/selectors.py (_BULK_DECODERS or _AS_RETURNED)"
    )


@cache
def _decoders(names: tuple[str, ...]) -> tuple[tuple[int, Callable[[Sequence[Any]], list[Any]]], ...]:
    """(position, bulk decoder) of each of the Message fields `names` not used as returned."""
    fields = {field.attname: field for field in Message._meta.concrete_fields}
    decoders = ((index, _decoder(fields[name])) for index, name in enumerate(names))
    return tuple((index, decode) for index, decode in decoders if decode is not None)


def _decoded_columns(rows: list[tuple[Any, ...]], names: tuple[str, ...]) -> list[Sequence[Any]]:
    """The rows' columns (fields `names`), each decoded in one pass as the ORM would."""
    columns: list[Sequence[Any]] = list(zip(*rows, strict=True))
    for index, decode in _decoders(names):
        columns[index] = decode(columns[index])
    return columns


def _message_values(rows: list[tuple[Any, ...]]) -> Iterator[dict[str, Any]]:
    """Each row's field values by attname, the JSON and datetime columns decoded in bulk."""
    if not rows:
        return
    for values in zip(*_decoded_columns(rows, _MESSAGE_ATTNAMES), strict=True):
        yield dict(zip(_MESSAGE_ATTNAMES, values, strict=True))


def _messages_from_rows(rows: list[tuple[Any, ...]], *, db: str) -> list[Message]:
    """Message instances, in sequence order, as the ORM loads them from `db` (saving one UPDATEs).

    Fills each instance's __dict__ and state directly, which is what Model.from_db
    does through Model.__init__. Pays: 105 ms against 176 through Model.from_db
    (SQLite), 123 against 196 (PostgreSQL), the bulk decoding the same.
    """
    rows.sort(key=itemgetter(_SEQUENCE))
    if pre_init.has_listeners(Message) or post_init.has_listeners(Message):
        # Someone listens to instance creation: let Model.__init__ send the signals.
        return [
            Message.from_db(db, list(_MESSAGE_ATTNAMES), list(values.values()))
            for values in _message_values(rows)
        ]
    messages = []
    for values in _message_values(rows):
        message = Message.__new__(Message)
        values["_state"] = state = ModelState()
        state.adding = False
        state.db = db
        message.__dict__ = values
        messages.append(message)
    return messages


def trace_path_ranges(*, trace_id: str, head_sequence: int) -> list[tuple[int, int]]:
    """The path from the root to `head_sequence` as ranges of sequences (first, last),
    oldest first: each linear segment the path crosses, without reading a message.
    A page of a long path is then a slice of these ranges (the portal's pages)."""
    sql = _MAIN_PATH_SEGMENTS + "SELECT start, entry FROM seg"
    with connection.cursor() as cursor:
        cursor.execute(sql, [trace_id, head_sequence, trace_id, trace_id])
        return sorted((int(start), int(entry)) for start, entry in cursor.fetchall())


def trace_goal_messages(*, trace_id: str, goal_id: str, head_sequence: int | None) -> QuerySet[Message]:
    """The messages recorded under one goal, by sequence (seed 004 `get_messages_by_goal`):
    those on the path to `head_sequence`, or every one, side branches included, when it is None."""
    messages = Message.objects.filter(trace_id=trace_id, goal_id=goal_id).order_by("sequence")
    if head_sequence is None:
        return messages
    on_path = models.Q(pk__in=[])
    for first, last in trace_path_ranges(trace_id=trace_id, head_sequence=head_sequence):
        on_path |= models.Q(sequence__range=(first, last))
    return messages.filter(on_path)


def trace_messages(*, trace_id: str) -> QuerySet[Message]:
    """Every message of the trace, branches included, by sequence."""
    return Message.objects.filter(trace_id=trace_id).order_by("sequence")


def trace_events(*, trace_id: str, since: int = 0) -> QuerySet[TraceEvent]:
    return TraceEvent.objects.filter(trace_id=trace_id, event_id__gt=since).order_by("event_id")


def traces_visible_to(user: Any) -> QuerySet[Trace]:
    """The traces `user` may see and steer: staff see all, others their own (W4)."""
    if not getattr(user, "is_authenticated", False):
        return Trace.objects.none()
    if user.is_staff:
        return Trace.objects.all()
    return Trace.objects.filter(owner_id=user.pk)


def trace_visible_or_404(*, user: Any, trace_id: str, select_related: Sequence[str] = ()) -> Trace:
    """The trace `trace_id` if `user` may see it (`traces_visible_to`), its
    `select_related` relations joined; TraceNotFound (404) otherwise: someone
    else's trace is "not found" too, never "forbidden"."""
    visible = traces_visible_to(user).filter(pk=trace_id)
    if select_related:
        visible = visible.select_related(*select_related)
    trace = visible.first()
    if trace is None:
        raise TraceNotFound(f"trace {trace_id!r} does not exist")
    return trace
