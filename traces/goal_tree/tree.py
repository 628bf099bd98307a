"""GoalTree: the agent's hierarchical plan, held in memory during a run.

Goals are rows of `Goal`; the tree loads them in one query, changes them in
memory and writes back only what changed: a run's step commit takes
`pending_writes` (new goals as inserts, changed ones as updates by their natural
key) into its fenced statement, so a run that lost its lease writes no goal;
`flush` writes the same through the ORM for callers outside a run. The model sees display ids
("1", "1.2") derived from tree position; storage uses stable internal ids that
are never reused within a trace, so messages of abandoned branches keep pointing
at the goal they belonged to.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from django.db.models import Q
from django.utils import timezone

from traces.goal_tree import render
from traces.goal_tree.stats import EMPTY_STATS, add_stats
from traces.models import CLOSED_GOAL_STATUSES, Goal, GoalStatus, Trace, TraceEvent
from traces.storable import without_nul

CLOSED = CLOSED_GOAL_STATUSES
STATS_FLUSH_SECONDS = 1.0
# What a run changes on a goal; `flush` writes these back.
FLUSHED_FIELDS = (
    "status",
    "summary",
    "left_open",
    "self_stats",
    "cumulative_stats",
    "sub_trace_ids",
    "sub_trace_metadata",
    "agent_call_mode",
    "type",
)
Emit = Callable[[str, dict[str, Any]], None]


class GoalError(ValueError):
    """A goal operation the model asked for that cannot be done."""


class GoalTree:
    def __init__(self, trace: Trace, goals: list[Goal], emit: Emit | None = None) -> None:
        self.trace = trace
        self.goals: dict[str, Goal] = {g.goal_id: g for g in goals}
        self.emit: Emit = emit or (lambda _type, _payload: None)
        self._new: list[Goal] = []  # added since the last flush: inserted with their values then
        self._dirty: set[str] = set()  # status or structure changed: written at the next flush
        self._stats_dirty: set[str] = set()  # only figures changed: written at most every second
        self._stats_flushed_at = time.monotonic()

    @classmethod
    def load(cls, trace: Trace, emit: Emit | None = None) -> GoalTree:
        return cls(trace, list(Goal.objects.filter(trace=trace).order_by("position")), emit)

    # --- reading -------------------------------------------------------------

    @property
    def current_id(self) -> str | None:
        return self.trace.current_goal_id

    @property
    def current(self) -> Goal | None:
        return self.goals.get(self.trace.current_goal_id or "")

    def __bool__(self) -> bool:
        return bool(self.goals)

    def children(self, parent_id: str | None) -> list[Goal]:
        return sorted(
            (g for g in self.goals.values() if g.parent_id == parent_id),
            key=lambda g: g.position,
        )

    def walk(self, parent_id: str | None = None, prefix: str = "") -> Iterator[tuple[str, Goal]]:
        """Goals in document order with their display ids."""
        for index, goal in enumerate(self.children(parent_id), start=1):
            display = f"{prefix}{index}"
            yield display, goal
            yield from self.walk(goal.goal_id, f"{display}.")

    def display_ids(self) -> dict[str, str]:
        return {goal.goal_id: display for display, goal in self.walk()}

    def resolve(self, ref: str | None) -> Goal:
        """A goal by its display id ("1.2"); empty means the current goal."""
        if not ref:
            if self.current is None:
                raise GoalError("there is no current goal; name one by its id, e.g. '1'")
            return self.current
        ref = str(ref).strip().rstrip(".")
        for display, goal in self.walk():
            if display == ref:
                return goal
        raise GoalError(
            f"no goal {ref!r}; existing goals: {', '.join(self.display_ids().values()) or 'none'}"
        )

    def ancestors(self, goal: Goal) -> Iterator[Goal]:
        parent = self.goals.get(goal.parent_id or "")
        while parent is not None:
            yield parent
            parent = self.goals.get(parent.parent_id or "")

    # --- changing ------------------------------------------------------------

    def _next_internal_id(self) -> str:
        counter = int(self.trace.context.get("goal_counter", 0)) + 1
        existing = [int(g) for g in self.goals if g.isdigit()]
        counter = max([counter, *(n + 1 for n in existing)])
        self.trace.context["goal_counter"] = counter
        return str(counter)

    def add(
        self,
        description: str,
        *,
        reason: str = "",
        parent: Goal | None = None,
        after: Goal | None = None,
        goal_type: str = "normal",
    ) -> Goal:
        description, reason = without_nul(description.strip()), without_nul(reason)  # PostgreSQL takes no NUL
        if not description:
            raise GoalError("a goal needs a description")
        parent_id = after.parent_id if after is not None else (parent.goal_id if parent else None)
        siblings = self.children(parent_id)
        if after is not None:
            later = [s.position for s in siblings if s.position > after.position]
            position = (after.position + later[0]) / 2 if later else after.position + 1.0
        else:
            position = (siblings[-1].position + 1.0) if siblings else 1.0
        goal = Goal(
            trace=self.trace,
            goal_id=self._next_internal_id(),
            description=description,
            reason=reason,
            parent_id=parent_id,
            position=position,
            type=goal_type,
            self_stats=dict(EMPTY_STATS),
            cumulative_stats=dict(EMPTY_STATS),
            created_at=timezone.now(),
        )
        self.goals[goal.goal_id] = goal
        self._new.append(goal)
        self.emit("goal_added", {"goal": self.goal_dict(goal)})
        return goal

    def focus(self, goal: Goal) -> Goal:
        if goal.status in CLOSED:
            raise GoalError(f"goal {self.display_ids()[goal.goal_id]} is already {goal.status}")
        self.trace.current_goal_id = goal.goal_id
        if goal.status == GoalStatus.PENDING:
            self._set_status(goal, GoalStatus.IN_PROGRESS)
        return goal

    def complete(self, goal: Goal, summary: str, *, at_sequence: int | None = None) -> Goal | None:
        """Mark `goal` done; focus moves to the next open goal. Returns it.

        `at_sequence`: the message that closed it (a plan step's answer), recorded
        with the event so a rewind to exactly that message keeps it closed."""
        return self._close(goal, GoalStatus.COMPLETED, summary, at_sequence)

    def abandon(self, goal: Goal, reason: str, *, at_sequence: int | None = None) -> Goal | None:
        return self._close(goal, GoalStatus.ABANDONED, reason, at_sequence)

    def _close(self, goal: Goal, status: str, summary: str, at_sequence: int | None) -> Goal | None:
        if goal.status in CLOSED:
            raise GoalError(f"goal {self.display_ids()[goal.goal_id]} is already {goal.status}")
        goal.summary = summary
        self._set_status(goal, status, at_sequence)
        if self.trace.current_goal_id != goal.goal_id:
            return self.current
        self.trace.current_goal_id = None
        following = self._next_open_after(goal)
        if following is not None:
            self.focus(following)
        return following

    def _next_open_after(self, goal: Goal) -> Goal | None:
        order = [g for _, g in self.walk()]
        start = order.index(goal)
        for candidate in order[start + 1 :] + order[:start]:
            if candidate.status not in CLOSED and goal not in list(self.ancestors(candidate)):
                return candidate
        return None

    def _set_status(self, goal: Goal, status: str, at_sequence: int | None = None) -> None:
        goal.status = status
        self._dirty.add(goal.goal_id)
        payload: dict[str, Any] = {"goal_id": goal.goal_id, "status": status, "summary": goal.summary}
        if at_sequence is not None:
            payload["at_sequence"] = at_sequence
        self.emit("goal_updated", payload)

    def leave_open(self, run_status: str) -> list[Goal]:
        """A run ended with `run_status`: mark the goals still open (stored, emitted).

        Their status stays what the agent left (see docs/ARCHITECTURE.md, "Goals
        a run leaves open"): a later run of the trace takes them up again
        (`reopen`). Returns the goals marked.
        """
        marked = [g for _, g in self.walk() if g.status not in CLOSED and g.left_open != run_status]
        for goal in marked:
            goal.left_open = run_status
            self._updated_left_open(goal)
        return marked

    def reopen(self) -> None:
        """A new run of the trace: the goals the last one left open are open again."""
        for _, goal in self.walk():
            if goal.left_open:
                goal.left_open = ""
                self._updated_left_open(goal)

    def _updated_left_open(self, goal: Goal) -> None:
        self._dirty.add(goal.goal_id)
        self.emit(
            "goal_updated",
            {
                "goal_id": goal.goal_id,
                "status": goal.status,
                "summary": goal.summary,
                "left_open": goal.left_open or None,
            },
        )

    def ensure_root(self, description: str) -> Goal:
        """R9: a plan-less run gets one root goal, focused."""
        goal = self.add(description[:500] or "Complete the task", reason="auto root goal")
        self.focus(goal)
        return goal

    def record_stats(
        self,
        goal_id: str | None,
        *,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        cost: float | None = None,
        unpriced: bool = False,
        duration_ms: int = 0,
    ) -> None:
        """Add one message's figures to its goal (self) and the goal's ancestors (cumulative).

        `unpriced`: the message is a model call with no known price; it is
        counted (`unpriced_calls`) so the goal's cost does not pass for complete.
        """
        goal = self.goals.get(goal_id or "")
        if goal is None:
            return
        delta = {
            "message_count": 1,
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "total_cost": cost or 0.0,
            "unpriced_calls": int(unpriced),
            "duration_ms": duration_ms,
        }
        goal.self_stats = add_stats(goal.self_stats, delta)
        for node in [goal, *self.ancestors(goal)]:
            node.cumulative_stats = add_stats(node.cumulative_stats, delta)
            self._stats_dirty.add(node.goal_id)

    def add_cumulative(self, goal_id: str, delta: dict[str, Any]) -> None:
        """Fold a sub-trace's totals into a goal and its ancestors (cumulative only)."""
        goal = self.goals.get(goal_id)
        if goal is None:
            return
        for node in [goal, *self.ancestors(goal)]:
            node.cumulative_stats = add_stats(node.cumulative_stats, delta)
            self._stats_dirty.add(node.goal_id)

    def mark_dirty(self, goal: Goal) -> None:
        self._dirty.add(goal.goal_id)

    def flush(self, *, all_stats: bool = False) -> None:
        """Write new and changed goals through the ORM (outside a run's commits)."""
        new, writes, due = self.pending_writes(all_stats=all_stats)
        Goal.objects.bulk_create(new)
        for goal, values in writes:
            Goal.objects.filter(trace=self.trace, goal_id=goal.goal_id).update(**values)
        self.mark_flushed(stats=due)

    def pending_writes(
        self, *, all_stats: bool = False
    ) -> tuple[list[Goal], list[tuple[Goal, dict[str, Any]]], bool]:
        """Goals to insert, (goal, values) to update, and whether figures are due.

        A new goal is inserted with its current values, never also updated in
        the same write. Status and structure changes are written at once;
        changes of the figures alone (every message adds to them) at most every
        STATS_FLUSH_SECONDS, or when `all_stats` (a run's end). Call
        `mark_flushed` once they are written.
        """
        new = [goal for goal in self._new if goal.goal_id in self.goals]
        inserted = {goal.goal_id for goal in new}
        due = all_stats or time.monotonic() - self._stats_flushed_at >= STATS_FLUSH_SECONDS
        changed = self._dirty | self._stats_dirty if due else self._dirty
        writes = []
        for goal_id in sorted(changed - inserted):
            goal = self.goals.get(goal_id)
            if goal is not None:
                writes.append((goal, {f: getattr(goal, f) for f in FLUSHED_FIELDS}))
        return new, writes, due

    def mark_flushed(self, *, stats: bool) -> None:
        self._new.clear()
        self._dirty.clear()
        if stats:
            self._stats_dirty.clear()
            self._stats_flushed_at = time.monotonic()

    # --- rewind --------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        return {
            "current_id": self.current_id,
            "goals": [self.goal_dict(g) for _, g in self.walk()],
        }

    def rebuild_at(self, cutoff: datetime, cut_sequence: int | None = None) -> list[str]:
        """R4: keep goals created at or before `cutoff`, drop later ones.

        Kept goals get back their status as of `cutoff` (their goal events, plus
        those recorded as closed by the cut message `cut_sequence` itself), and
        in_progress ones go back to pending (written by the next commit)
        and the focus is cleared. Returns the dropped internal ids. The caller
        holds a transaction that ends with the run's fenced commit, so a run that
        lost its lease deletes nothing either.
        """
        dropped = [gid for gid, g in self.goals.items() if g.created_at > cutoff]
        if dropped:
            Goal.objects.filter(trace=self.trace, goal_id__in=dropped).delete()
            for gid in dropped:
                self.goals.pop(gid)
        self._restore_statuses(cutoff, cut_sequence)
        for goal in self.goals.values():
            if goal.status == GoalStatus.IN_PROGRESS:
                goal.status = GoalStatus.PENDING
                self._dirty.add(goal.goal_id)
        self.trace.current_goal_id = None
        return dropped

    def _restore_statuses(self, cutoff: datetime, cut_sequence: int | None) -> None:
        """Kept goals get back the status and summary their events gave them by `cutoff`
        (a plan step done after the cut is open again). A step's closing is recorded just
        after its answer, with that answer's sequence: a cut at the answer keeps it closed.
        Goals with no event keep theirs."""
        by_cut = Q(created_at__lte=cutoff)
        if cut_sequence is not None:
            by_cut |= Q(type="goal_updated", payload__at_sequence=cut_sequence)
        events = TraceEvent.objects.filter(
            by_cut, trace_id=self.trace.trace_id, type__in=("goal_added", "goal_updated")
        ).order_by("event_id")
        as_of: dict[str, tuple[str, str | None]] = {}
        for payload in events.values_list("payload", flat=True):
            goal = payload.get("goal", payload)
            if goal.get("status"):
                as_of[str(goal.get("id", goal.get("goal_id")))] = (goal["status"], goal.get("summary"))
        for goal_id, (status, summary) in as_of.items():
            goal = self.goals.get(goal_id)
            if goal is not None and (goal.status, goal.summary) != (status, summary):
                goal.status, goal.summary = status, summary
                self._dirty.add(goal_id)

    # --- views ---------------------------------------------------------------

    def goal_dict(self, goal: Goal) -> dict[str, Any]:
        """The goal as the API, events and the portal show it (`render.py:goal_dict`)."""
        return render.goal_dict(self, goal)

    def to_prompt(self, include_summary: bool = False) -> str:
        """The plan as the model reads it (`render.py:plan_prompt`)."""
        return render.plan_prompt(self, include_summary=include_summary)
