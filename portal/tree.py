"""The message tree as the trace page shows it: linear segments, not messages (P2).

A trace's messages form a tree whose long stretches are linear (Message.segment_start
marks them). The page lists one row per segment ("#12-#9,876, 9,865 messages")
nested where the tree forks, so a 10,000-message trace with a few rewinds and
reflections is a dozen rows, read by one aggregate query plus one for the first
message of each segment. The branches (every tip of the tree) come from the same
rows. Rows link to the page of the path that holds them.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

from django.db.models import Count, Max, Min
from django.db.models.functions import Coalesce

from portal.templatetags.portal import gist
from traces.models import Message

MAX_ROWS = 200  # segments listed; the rest are counted


@dataclass
class Segment:
    first: int
    last: int
    count: int
    parent: int | None = None
    role: str = ""
    kind: str = ""
    gist: str = ""
    depth: int = 0
    on_path: bool = False
    children: list[Segment] = field(default_factory=list)

    @property
    def is_tip(self) -> bool:
        return not any(child.parent == self.last for child in self.children)


@dataclass
class Tree:
    rows: list[Segment]
    tips: list[Segment]  # branch ends, the viewed one first, then newest first
    hidden: int  # segments beyond MAX_ROWS


def message_tree(trace_id: str, path: list[int], viewing: int, head: int) -> Tree:
    """The segments of the trace's tree in display order, those on `path` (the
    viewed path's sequences) flat at depth 0, side branches indented under the
    message they fork from. `viewing` and the trace's `head` end branches even
    where a segment goes on past them (a reflection hangs from the head)."""
    # where a branch leaves a segment: the heads, and each place the path jumps
    on_path = set(path)
    ends = {viewing, head} | {sequence for sequence in path if sequence + 1 not in on_path}
    segments = _split(_segments(trace_id), ends)
    if not segments:
        return Tree([], [], 0)
    firsts = [s.first for s in segments]
    roots: list[Segment] = []
    for segment in segments:
        segment.on_path = segment.first in on_path
        owner = _segment_of(segments, firsts, segment.parent)
        (owner.children if owner is not None else roots).append(segment)
    rows: list[Segment] = []
    stack = [(root, 0) for root in reversed(roots)]
    while stack:
        segment, depth = stack.pop()
        segment.depth = depth
        rows.append(segment)
        # Below a segment: the branches that fork from it, indented, oldest first;
        # then, at its depth, the one it continues into (the path's; off the path, an
        # only child).
        kids = segment.children
        alone = kids[0] if len(kids) == 1 and not segment.on_path else None
        main = next((k for k in kids if k.on_path), alone)
        if main is not None:
            stack.append((main, depth))
        stack.extend((kid, depth + 1) for kid in sorted(kids, key=lambda s: -s.first) if kid is not main)
    tips = [s for s in segments if s.is_tip or s.last in (viewing, head)]
    tips.sort(key=lambda s: (s.first <= viewing <= s.last, s.last), reverse=True)
    _describe(trace_id, rows[:MAX_ROWS])
    return Tree(rows[:MAX_ROWS], tips, max(0, len(rows) - MAX_ROWS))


def _segments(trace_id: str) -> list[Segment]:
    rows = (
        Message.objects.filter(trace_id=trace_id)
        .annotate(seg=Coalesce("segment_start", "sequence"))
        .values("seg")
        .annotate(first=Min("sequence"), last=Max("sequence"), count=Count("sequence"))
        .order_by("first")
    )
    segments = [Segment(first=r["first"], last=r["last"], count=r["count"]) for r in rows]
    parents = dict(
        Message.objects.filter(trace_id=trace_id, sequence__in=[s.first for s in segments]).values_list(
            "sequence", "parent_sequence"
        )
    )
    for segment in segments:
        segment.parent = parents.get(segment.first)
    return segments


def _split(segments: list[Segment], ends: set[int]) -> list[Segment]:
    """Segments cut after each of `ends` that lies inside one: the rest is a branch from it."""
    result: list[Segment] = []
    for segment in segments:
        for end in sorted(e for e in ends if segment.first <= e < segment.last):
            result.append(
                Segment(first=segment.first, last=end, count=end - segment.first + 1, parent=segment.parent)
            )
            segment = Segment(first=end + 1, last=segment.last, count=segment.last - end, parent=end)
        result.append(segment)
    return result


def _segment_of(segments: list[Segment], firsts: list[int], sequence: int | None) -> Segment | None:
    if sequence is None:
        return None
    index = bisect_right(firsts, sequence) - 1
    if index < 0 or segments[index].last < sequence:
        return None
    return segments[index]


def _describe(trace_id: str, rows: list[Segment]) -> None:
    """Role, kind and gist of each row's first message (one query)."""
    firsts = {s.first: s for s in rows}
    for sequence, role, kind, content, description in Message.objects.filter(
        trace_id=trace_id, sequence__in=list(firsts)
    ).values_list("sequence", "role", "kind", "content", "description"):
        segment = firsts[sequence]
        segment.role, segment.kind = role, kind
        segment.gist = gist(content if content else description, 70)
