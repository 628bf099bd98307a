"""Edit and fork (X6): an expert edits a main-path message; the edited copy starts a new
branch beside the original, optionally re-run from there.

The branch is written like a rewind (R4) that a run would make, but outside a run: under
the trace's lease (a compare-and-swap on `run_token`, so a run that starts meanwhile makes
the edit a 409, and the edit makes a stale reservation fail), the goal tree rebuilt as of
the cut, a `rewind` event (the live page drops the cut-off messages) and a
`message_edited` event. R3 holds on the branch: an edited tool result brings the later
results of the same call round with it; an edited assistant message keeps its calls'
results when the calls are unchanged, and leaves them open when their arguments changed
(the trace then waits on them: a run executes them, through the confirm gate, G5).

A re-run is `traces.services.runs.trace_continue` in the same transaction, so the fork and
its run's reservation land together or not at all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from review.models import MessageEdit
from traces import events as event_bus
from traces.goal_tree import GoalTree
from traces.models import ACTIVE_STATUSES, Message, Trace, TraceStatus
from traces.runner import InvalidRun, RunConflict
from traces.runner.prepare import text_of
from traces.selectors import trace_main_path, trace_visible_or_404
from traces.services.runs import trace_continue
from traces.storable import without_nul

EDITABLE_ROLES = ("user", "assistant", "tool")
CONTENT_LIMIT = 200_000


class InvalidEdit(InvalidRun):
    """An edit that cannot be made (400, code `invalid_edit`)."""


@dataclass(frozen=True)
class Fork:
    """What an edit made: the audit row and the trace as it is afterwards."""

    edit: MessageEdit
    trace: Trace


def message_edit_fork(
    *,
    user: Any,
    trace_id: str,
    sequence: int,
    content: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    rerun: bool = False,
) -> Fork:
    """Fork trace `trace_id` at main-path message `sequence` with its edited copy.

    `content` replaces the text (user, assistant, tool); `tool_calls` is a list of
    `{"id": <call id>, "arguments": <object>}` replacing an assistant's calls' arguments.
    `rerun` runs the branch from the edit (a queued run, as `POST /run` makes).
    Raises TraceNotFound (404), RunConflict (409) while the trace runs, InvalidEdit (400).
    """
    trace = trace_visible_or_404(user=user, trace_id=trace_id)
    if trace.status in ACTIVE_STATUSES:
        raise RunConflict(f"trace {trace.trace_id!r} is running; stop it or wait before editing it")
    path = trace_main_path(trace_id=trace.trace_id, head_sequence=trace.head_sequence)
    index = next((i for i, m in enumerate(path) if m.sequence == sequence), None)
    if index is None:
        raise InvalidEdit(
            f"sequence: message {sequence} is not on the main path of trace {trace.trace_id} "
            "(edit a message of GET /api/traces/{id}/messages)"
        )
    original = path[index]
    before, after = _edited_fields(original, content, tool_calls)
    copies = _branch(path, index, after)
    open_calls = copies[-1].role == "assistant" and bool(copies[-1].tool_calls)
    if rerun and copies[-1].role == "assistant" and not open_calls:
        raise InvalidEdit("rerun: an edited final answer has nothing to re-run; fork without re-running")
    with transaction.atomic():
        head = _write_branch(trace, original, copies, waiting=open_calls)
        edit = MessageEdit.objects.create(
            trace=trace,
            editor=user,
            original_sequence=original.sequence,
            edited_sequence=copies[0].sequence,
            head_sequence=head,
            role=original.role,
            before=before,
            after=after,
            rerun=rerun,
        )
        event_bus.event_append(
            trace.trace_id,
            "message_edited",
            {
                "edit_id": edit.pk,
                "editor": user.get_username(),
                "original_sequence": original.sequence,
                "edited_sequence": edit.edited_sequence,
                "head_sequence": head,
                "rerun": rerun,
            },
        )
        if rerun:
            trace_continue(user=user, trace_id=trace.trace_id, messages=None)
    trace.refresh_from_db()
    return Fork(edit=edit, trace=trace)


def _edited_fields(
    original: Message, content: str | None, tool_calls: list[dict[str, Any]] | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(before, after) of the fields the edit changes; InvalidEdit when it changes nothing
    or changes what the message's role does not have."""
    if original.role not in EDITABLE_ROLES:
        raise InvalidEdit(
            f"sequence: a {original.role} message cannot be edited (only {', '.join(EDITABLE_ROLES)})"
        )
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}
    if content is not None:
        if not isinstance(content, str) or len(content) > CONTENT_LIMIT:
            raise InvalidEdit(f"content: a string of at most {CONTENT_LIMIT} characters")
        if original.role == "user" and not content.strip():
            raise InvalidEdit("content: a user message needs text")
        if content != text_of(original.content):
            before["content"], after["content"] = original.content, without_nul(content)
    if tool_calls is not None:
        if original.role != "assistant" or not original.tool_calls:
            raise InvalidEdit(f"tool_calls: message {original.sequence} makes no tool calls")
        edited = _edited_calls(original.tool_calls, tool_calls)
        if edited != original.tool_calls:
            before["tool_calls"], after["tool_calls"] = original.tool_calls, edited
    if not after:
        raise InvalidEdit("the edit changes nothing: give a different content or tool call arguments")
    return before, after


def _edited_calls(calls: list[dict[str, Any]], changes: Any) -> list[dict[str, Any]]:
    """The calls with the arguments `changes` gives them (by call id)."""
    if not isinstance(changes, list) or not all(isinstance(c, dict) for c in changes):
        raise InvalidEdit('tool_calls: a list of {"id": ..., "arguments": {...}}')
    by_id = {c.get("id"): c for c in calls}
    new_arguments: dict[str, str] = {}
    for change in changes:
        call_id, arguments = change.get("id"), change.get("arguments")
        if call_id not in by_id:
            known = ", ".join(str(i) for i in by_id)
            raise InvalidEdit(f"tool_calls: no call {call_id!r} in this message (its calls: {known})")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                raise InvalidEdit(f"tool_calls: the arguments of {call_id} are not JSON") from None
        if not isinstance(arguments, dict):
            raise InvalidEdit(f"tool_calls: the arguments of {call_id} must be a JSON object")
        new_arguments[call_id] = json.dumps(without_nul(arguments))
    edited = []
    for call in calls:
        function = dict(call.get("function") or {})
        if call.get("id") in new_arguments:
            same = _json_or_none(function.get("arguments")) == json.loads(new_arguments[call["id"]])
            if not same:
                function["arguments"] = new_arguments[call["id"]]
        edited.append({**call, "function": function})
    return edited


def _json_or_none(text: Any) -> Any:
    try:
        return json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return None


def _branch(path: list[Message], index: int, after: dict[str, Any]) -> list[Message]:
    """The new branch's messages (unsaved, unnumbered): the edited copy, then what R3
    keeps paired with it (the round's later tool results; an unchanged call's results)."""
    original = path[index]
    copies = [_copy(original, after)]
    if original.role == "tool":
        round_ids = _round_call_ids(path, index)
        following = path[index + 1 :]
        copies += [_copy(m, {}) for m in _leading_results(following, round_ids)]
    elif original.role == "assistant" and original.tool_calls and "tool_calls" not in after:
        ids = {c.get("id") for c in original.tool_calls}
        copies += [_copy(m, {}) for m in _leading_results(path[index + 1 :], ids)]
    return copies


def _round_call_ids(path: list[Message], index: int) -> set[Any]:
    """The call ids of the assistant message whose results include path[index]."""
    anchor = index
    while anchor >= 0 and path[anchor].role == "tool":
        anchor -= 1
    calls = path[anchor].tool_calls if anchor >= 0 else None
    return {c.get("id") for c in calls or []}


def _leading_results(messages: list[Message], ids: set[Any]) -> list[Message]:
    results = []
    for message in messages:
        if message.role != "tool" or message.tool_call_id not in ids:
            break
        results.append(message)
    return results


def _copy(message: Message, changes: dict[str, Any]) -> Message:
    content = changes.get("content", message.content)
    return Message(
        role=message.role,
        content=content,
        tool_calls=changes.get("tool_calls", message.tool_calls),
        tool_call_id=message.tool_call_id,
        name=message.name,
        goal_id=message.goal_id,
        kind=message.kind,
        description=text_of(content)[:200] if changes else message.description,
    )


def _write_branch(trace: Trace, original: Message, copies: list[Message], *, waiting: bool) -> int:
    """Take the lease, rebuild the goals as of the cut, insert the branch, move the head.

    Caller holds a transaction. Returns the new head's sequence.
    """
    now = timezone.now()
    first = trace.last_sequence + 1
    taken = (
        Trace.objects.filter(pk=trace.pk, run_token=trace.run_token)
        .exclude(status__in=ACTIVE_STATUSES)
        .update(run_token=F("run_token") + 1, updated_at=now)
    )
    if not taken:
        raise RunConflict(f"trace {trace.trace_id!r} was started by another request a moment ago; try again")
    cut = original.parent_sequence
    goals = GoalTree.load(trace)
    snapshot = goals.snapshot()
    cut_message = Message.objects.filter(trace=trace, sequence=cut).first() if cut else None
    # Nothing before the edited message: every goal came after the cut.
    cutoff = cut_message.created_at if cut_message else original.created_at - timedelta(microseconds=1)
    dropped = goals.rebuild_at(cutoff, cut)
    goals.flush(all_stats=True)
    parent = cut
    for offset, message in enumerate(copies):
        sequence = first + offset
        message.trace = trace
        message.sequence = sequence
        message.message_id = Message.make_id(trace.trace_id, sequence)
        message.parent_sequence = parent
        message.segment_start = first
        message.created_at = now
        if message.goal_id is not None and message.goal_id not in goals.goals:
            message.goal_id = None
        parent = sequence
    Message.objects.bulk_create(copies)
    head = copies[-1].sequence
    previous_head = trace.head_sequence
    Trace.objects.filter(pk=trace.pk).update(
        head_sequence=head,
        last_sequence=head,
        total_messages=F("total_messages") + len(copies),
        current_goal_id=None,
        status=TraceStatus.WAITING if waiting else TraceStatus.STOPPED,
        error_message=None,
        completed_at=None if waiting else now,
    )
    event_bus.event_append(
        trace.trace_id,
        "rewind",
        {
            "after_sequence": cut,
            "cut_sequence": cut,
            "previous_head": previous_head,
            "goal_tree_snapshot": snapshot,
            "edit": True,
        },
    )
    event_bus.event_append(trace.trace_id, "goal_tree_rebuilt", {"dropped_goal_ids": dropped})
    trace.refresh_from_db()
    return head
