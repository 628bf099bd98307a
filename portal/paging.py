"""A page of a path: the trace page shows a long path a page at a time (P2).

The path is known as a few ranges of sequences (traces.selectors.trace_path_ranges,
one query that reads no message), so a page is a slice of those ranges and only
its own messages are read: the first screen of a 10,000-message trace costs what
a 50-message trace costs. Pages count messages, newest first by default; a page
never starts with a tool result whose call is on the page before (it starts at
the call instead), so results stay folded under their call.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass

from traces.models import Message
from traces.selectors import trace_path_ranges

PAGE_SIZE = 50
# How far back a page may reach for the call of a leading tool result.
CALL_LOOKBACK = 16


@dataclass
class PathPage:
    messages: list[Message]
    total: int  # messages on the path
    first: int  # 1-based position of the page's first message on the path
    older: int | None  # `before=` for the previous page, None on the first
    newer: int | None  # `after=` for the next page, None on the newest
    sequences: list[int]  # every sequence on the path, oldest first

    @property
    def newest(self) -> bool:
        return self.newer is None

    @property
    def last(self) -> int:
        return self.first + len(self.messages) - 1


def path_sequences(trace_id: str, head: int) -> list[int]:
    if not head:
        return []
    ranges = trace_path_ranges(trace_id=trace_id, head_sequence=head)
    return [sequence for first, last in ranges for sequence in range(first, last + 1)]


def path_page(
    trace_id: str,
    head: int,
    *,
    before: int | None = None,
    after: int | None = None,
    at: int | None = None,
    size: int = PAGE_SIZE,
) -> PathPage:
    """The page of the path ending at `head` that ends before `before`, starts after
    `after`, or holds `at` (centred on it); else the newest page."""
    sequences = path_sequences(trace_id, head)
    total = len(sequences)
    end = total
    if at is not None:
        end = min(total, bisect_left(sequences, at) + size // 2)
    elif before is not None:
        end = bisect_left(sequences, before)
    elif after is not None:
        end = min(total, bisect_right(sequences, after) + size)
    start = max(0, end - size)
    reach = max(0, start - CALL_LOOKBACK)
    rows = list(
        Message.objects.filter(trace_id=trace_id, sequence__in=sequences[reach:end]).order_by("sequence")
    )
    shown = _from_the_call(rows, start - reach)
    start = end - len(shown) if shown else start
    return PathPage(
        messages=shown,
        total=total,
        first=start + 1,
        older=sequences[start] if start > 0 else None,
        newer=sequences[end - 1] if end < total else None,
        sequences=sequences,
    )


def _from_the_call(rows: list[Message], first: int) -> list[Message]:
    """`rows[first:]`, reaching back to the call when the page would start with its result
    (`rows` is a contiguous stretch of the path; the call may lie beyond it: then as is)."""
    index = first
    while 0 < index < len(rows) and rows[index].role == "tool":
        index -= 1
    if index < len(rows) and rows[index].role == "tool":
        index = first
    return rows[index:]
