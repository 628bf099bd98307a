"""Which traces a watch socket streams, and how far each one has got (W3).

Event ids count per trace, so a socket that streams a trace and (with
`children=1`) its sub-traces keeps one cursor per trace. Each cycle of the pump:

1. `heads_and_events`, one trip to a read thread: `watched_heads` reads the
   streamed traces' `last_event_id` and finds new descendants in one query: the
   root plus the children of every trace already streamed. Only a newly found
   level costs one more query (a new child's own children), so discovery has no
   N+1 however many events flow. Then `events_after` reads the events past the
   cursors of those whose head moved, in (trace, event id) order, in one query.
2. `WatchCursors.update` takes the new set of traces (their doorbell groups to
   join and leave); the events are sent and the cursors moved.

`Trace.last_event_id` is every trace's event-id counter, moved in the same
transaction that writes the rows (runner/store.py, events/__init__.py), so a
head above a cursor means committed events to read, and a head at the cursor
means none. Descendants are the local sub-traces (`Trace.parent_trace`) the user
may see (traces_visible_to), down to MAX_DEPTH levels and MAX_DESCENDANTS
traces; the subtree below a child the user may not see is not streamed.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from django.db.models import Q, QuerySet

from traces.events import event_dict
from traces.events.presence import mark_watched, streams_when_watched
from traces.models import Trace, TraceEvent
from traces.selectors import traces_visible_to

MAX_DEPTH = 5
MAX_DESCENDANTS = 200
MAX_CURSORS = 500
MAX_CURSORS_CHARS = 64 * 1024
MAX_TRACE_ID = 255  # Trace.trace_id's max_length
MAX_EVENT_ID = 2**63 - 1  # a BigIntegerField
# Events on a trace that announce a sub-trace: look for new children at once.
SPAWN_PREFIXES = ("sub_trace_", "subagent_")


@dataclass(frozen=True)
class WatchQuery:
    """The query string of a watch socket: `since`, `children`, `cursors`."""

    since: int | None  # None: not given
    children: bool
    cursors: dict[str, int]


def parse_watch_query(query_string: bytes) -> WatchQuery | None:
    """The socket's options; None when any is malformed (the socket closes with 4400)."""
    params = parse_qs(query_string.decode("latin1"))
    since: int | None = None
    if params.get("since"):
        since = _event_id(params["since"][0])
        if since is None:
            return None
    children = params.get("children", ["0"])[0]
    if children not in ("0", "1"):
        return None
    cursors = _parse_cursors(params["cursors"][0]) if params.get("cursors") else {}
    if cursors is None:
        return None
    return WatchQuery(since=since, children=children == "1", cursors=cursors)


def _event_id(text: str) -> int | None:
    try:
        value = int(text)
    except ValueError:
        return None
    return value if 0 <= value <= MAX_EVENT_ID else None


def _parse_cursors(text: str) -> dict[str, int] | None:
    """A JSON object of trace id -> last event id seen, within the size limits."""
    if len(text) > MAX_CURSORS_CHARS:
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or len(value) > MAX_CURSORS:
        return None
    for trace_id, cursor in value.items():
        # bool is an int to Python, not to the client
        if len(trace_id) > MAX_TRACE_ID or type(cursor) is not int or not 0 <= cursor <= MAX_EVENT_ID:
            return None
    return value


@dataclass(frozen=True)
class Head:
    """A streamed trace: how deep below the watched one, and its newest event id."""

    depth: int
    last_event_id: int


def watched_heads(user: Any, root_id: str, *, known: Mapping[str, int], children: bool) -> dict[str, Head]:
    """The traces to stream now, with their heads: the root and, with `children`, its
    visible descendants. `known` maps the traces streamed so far to their depth.

    One query in the steady state; one more for each level found new.
    """
    visible = traces_visible_to(user).order_by("created_at", "trace_id")
    if not children:
        return _tree(root_id, _head_rows(visible, Q(pk=root_id), 1))
    asked = {root_id} | {trace_id for trace_id, depth in known.items() if depth < MAX_DEPTH}
    found = _head_rows(visible, Q(pk=root_id) | Q(parent_trace_id__in=asked), MAX_DESCENDANTS + 1)
    while True:
        heads = _tree(root_id, found)
        todo = {trace_id for trace_id, head in heads.items() if head.depth < MAX_DEPTH} - asked
        room = MAX_DESCENDANTS + 1 - len(found)
        if not todo or room <= 0:
            return heads
        asked |= todo
        found |= _head_rows(visible, Q(parent_trace_id__in=todo), room)


def _head_rows(visible: QuerySet[Trace], where: Q, limit: int) -> dict[str, tuple[str | None, int]]:
    rows = visible.filter(where).values_list("trace_id", "parent_trace_id", "last_event_id")[:limit]
    return {trace_id: (parent_id, last_event_id) for trace_id, parent_id, last_event_id in rows}


def _tree(root_id: str, found: Mapping[str, tuple[str | None, int]]) -> dict[str, Head]:
    """The found traces reachable from the root through found parents, with their depth."""
    if root_id not in found:
        return {}
    children_of: defaultdict[str, list[str]] = defaultdict(list)
    for trace_id, (parent_id, _) in found.items():
        if parent_id is not None:
            children_of[parent_id].append(trace_id)
    heads = {root_id: Head(0, found[root_id][1])}
    level = [root_id]
    for depth in range(1, MAX_DEPTH + 1):
        level = [child for parent in level for child in children_of[parent] if child not in heads]
        heads.update((child, Head(depth, found[child][1])) for child in level)
    return heads


def heads_and_events(
    user: Any,
    root_id: str,
    *,
    known: Mapping[str, int],
    children: bool,
    cursors: Mapping[str, int],
    limit: int,
    mark: bool = False,
) -> tuple[dict[str, Head], list[dict[str, Any]]]:
    """A pump cycle's one read (one trip to a read thread, traces/events/reads.py):
    `watched_heads`, then up to `limit` events of those heads past their cursor in
    `cursors`. A trace found new is read before the socket joins its doorbell group:
    the consumer reads again after the join, so a commit in between is not missed.

    `mark` (the consumer's turn to, under `AGENT_STREAM=watched`): the streamed
    traces are marked watched (traces/events/presence.py), and so is any found new."""
    heads = watched_heads(user, root_id, known=known, children=children)
    if mark or (streams_when_watched() and heads.keys() - known.keys()):
        mark_watched(heads)
    return heads, events_after(_behind(heads, cursors), limit)


def _behind(heads: Mapping[str, Head], cursors: Mapping[str, int]) -> dict[str, int]:
    """The traces of `heads` with events past their cursor, and their cursors."""
    return {
        trace_id: cursors.get(trace_id, 0)
        for trace_id, head in heads.items()
        if head.last_event_id > cursors.get(trace_id, 0)
    }


def events_after(cursors: Mapping[str, int], limit: int) -> list[dict[str, Any]]:
    """Up to `limit` events of the given traces after each one's cursor, per trace in order."""
    if not cursors:
        return []
    where = Q()
    for trace_id, cursor in cursors.items():
        where |= Q(trace_id=trace_id, event_id__gt=cursor)
    events = TraceEvent.objects.filter(where).order_by("trace_id", "event_id")[:limit]
    return [event_dict(e) for e in events]


class WatchCursors:
    """The traces one socket streams and the last event id it sent of each.

    Only the consumer's event loop touches it; the reads above run in threads and
    take plain values.
    """

    def __init__(self, root_id: str, query: WatchQuery) -> None:
        self.root_id = root_id
        self.children = query.children
        # Cursors the client gave for traces not found yet are kept for when they are.
        self.cursors: dict[str, int] = dict(query.cursors) if query.children else {}
        if query.since is not None or root_id not in self.cursors:
            self.cursors[root_id] = query.since or 0
        self.streamed: dict[str, Head] = {}

    def depths(self) -> dict[str, int]:
        return {trace_id: head.depth for trace_id, head in self.streamed.items()}

    def update(self, heads: dict[str, Head]) -> tuple[list[str], list[str]]:
        """Stream `heads` from now on; returns the traces (joined, left)."""
        joined = [trace_id for trace_id in heads if trace_id not in self.streamed]
        left = [trace_id for trace_id in self.streamed if trace_id not in heads]
        self.streamed = heads
        return joined, left

    def cursor(self, trace_id: str) -> int:
        return self.cursors.get(trace_id, 0)

    def advance(self, event: dict[str, Any]) -> None:
        """`event` was sent."""
        self.cursors[event["trace_id"]] = event["event_id"]

    def rings(self, trace_id: str, last_event_id: int) -> bool:
        """Whether a doorbell for `trace_id` up to `last_event_id` has something for us.
        Before the first read of the heads has answered, any ring does: that read may have
        seen the trace before the commit that rang."""
        if not self.streamed:
            return True
        return trace_id in self.streamed and last_event_id > self.cursor(trace_id)

    @staticmethod
    def announces_children(events: Iterable[dict[str, Any]]) -> bool:
        return any(event["type"].startswith(SPAWN_PREFIXES) for event in events)
