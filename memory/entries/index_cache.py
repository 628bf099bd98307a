"""A scope's memory index and recall's candidates, kept per process for a second (issue 18).

Every model call of a run sends its scope's index (`requests.py`), and in a burst of
runs of one owner each call asked the database for the same page of entries (3.7 %
of a worker cluster's CPU in a 64-run burst, py-spy); each run's first call also read
recall's candidates, the same entries again. A process now reads a scope's entries at
most once a second (agentsite/kept.py: a save or delete in this process drops what it
holds at once, another process's write shows within the second, a read inside a
transaction is not kept), so a run sees its own save on its next call.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentsite.kept import Kept
from memory.entries.index import MAX_LINES, MemoryIndex, memory_index
from memory.entries.recall import MAX_CANDIDATES, Candidate, candidates
from memory.entries.selectors import Scope, memory_entries_in_scope


@dataclass(frozen=True)
class ScopeEntries:
    index: MemoryIndex | None  # None when the scope has no entries
    candidates: list[Candidate]  # recall's, newest first


def _read(scope: Scope) -> ScopeEntries:
    entries = memory_entries_in_scope(scope)
    listed = list(entries[: max(MAX_LINES, MAX_CANDIDATES)])
    # Fewer than a page: that is all of them, no COUNT needed.
    total = len(listed) if len(listed) < MAX_LINES else entries.count()
    return ScopeEntries(memory_index(listed[:MAX_LINES], total=total), candidates(listed[:MAX_CANDIDATES]))


_kept: Kept[Scope, ScopeEntries] = Kept("memory entries", _read, changed_by=("memory.MemoryEntry",))


def scope_index(scope: Scope) -> MemoryIndex | None:
    """The index of `scope`'s entries; None when it has none."""
    return _kept.get(scope).index


def scope_candidates(scope: Scope) -> list[Candidate]:
    """Recall's candidates among `scope`'s entries."""
    return _kept.get(scope).candidates
