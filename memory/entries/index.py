"""The memory index (M8): one line per entry, what every model call of a run sees.

Names, descriptions, keywords and dates only (bodies come on demand through
`read_memory`), newest first, capped at 200 lines or 25 KB, whichever comes first;
a last line says how many entries were left out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from memory.models import MemoryEntry

MAX_LINES = 200
MAX_BYTES = 25 * 1024
MAX_LINE_CHARS = 1000
HEADER = (
    "Memory index: your own notes from earlier runs (type/name — description [keywords], saved). "
    "Read a body with read_memory(ref=<id or name>); save or correct one with write_memory."
)


@dataclass(frozen=True)
class MemoryIndex:
    text: str
    shown: list[int]  # ids listed
    left_out: int


def index_line(entry: MemoryEntry) -> str:
    keywords = f" [{', '.join(entry.keywords)}]" if entry.keywords else ""
    description = f" — {entry.description}" if entry.description else ""
    project = f" (project {entry.project})" if entry.project else ""
    line = f"- #{entry.pk} {entry.type}/{entry.name}{project}{description}{keywords} (saved {entry.saved_at:%Y-%m-%d})"
    return line if len(line) <= MAX_LINE_CHARS else line[: MAX_LINE_CHARS - 1] + "…"


def memory_index(entries: Iterable[MemoryEntry], *, total: int) -> MemoryIndex | None:
    """The index of `entries` (newest first) within the caps; None when there are none.

    `total` is how many entries the scope has, so the note counts those not read too.
    """
    lines = [HEADER]
    size = len(HEADER.encode())
    shown: list[int] = []
    for entry in entries:
        line = index_line(entry)
        # Room is kept for the note: the whole message stays within both caps.
        if len(lines) + 2 > MAX_LINES or size + len(line.encode()) + 1 + _NOTE_ROOM > MAX_BYTES:
            break
        lines.append(line)
        size += len(line.encode()) + 1
        shown.append(entry.pk)
    if not shown:
        return None
    left_out = total - len(shown)
    if left_out > 0:
        lines.append(
            f"({left_out} older entr{'y' if left_out == 1 else 'ies'} left out of this index "
            f"(caps: {MAX_LINES} lines, {MAX_BYTES // 1024} KB); read_memory finds them by name.)"
        )
    return MemoryIndex(text="\n".join(lines), shown=shown, left_out=left_out)


_NOTE_ROOM = 160
