"""Phase 1 of a run: turn (messages, config) into a claimed trace and its main path.

One entry point serves every mode (R2), decided by `trace_id` and
`after_sequence` against the trace's head: new, continue, rewind, regenerate.
Everything that can be refused is checked before anything is changed.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone

from traces.models import Message, MessageKind, Trace, TraceEvent, TraceStatus
from traces.runner.config import InvalidRun, RunConfig, RunConflict, TraceNotFound
from traces.selectors import PathMessage, trace_main_path_for_run
from traces.storable import without_nul

ROLES = ("system", "user", "assistant", "tool")


def validate_messages(messages: Any) -> list[dict[str, Any]]:
    """Check input messages are OpenAI-format dicts; raise InvalidRun naming the fault."""
    if messages is None:
        return []
    if not isinstance(messages, list):
        raise InvalidRun("messages must be a list of {role, content} objects")
    clean = []
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise InvalidRun(f"{where} must be an object with role and content")
        role = message.get("role")
        if role not in ROLES:
            raise InvalidRun(f"{where}.role must be one of {', '.join(ROLES)} (got {role!r})")
        content = message.get("content")
        if content is not None and not isinstance(content, (str, list)):
            raise InvalidRun(f"{where}.content must be a string or a list of content parts")
        if role in ("user", "system") and not content:
            raise InvalidRun(f"{where} ({role}) has no content")
        if role == "tool" and not message.get("tool_call_id"):
            raise InvalidRun(f"{where} (tool) needs a tool_call_id")
        if (
            role == "assistant"
            and message.get("tool_calls") is not None
            and not isinstance(message.get("tool_calls"), list)
        ):
            raise InvalidRun(f"{where}.tool_calls must be a list")
        clean.append(
            {
                k: without_nul(v)  # stored as U+FFFD: PostgreSQL refuses NUL in text
                for k, v in message.items()
                if k in ("role", "content", "tool_calls", "tool_call_id", "name")
            }
        )
    return clean


def text_of(content: Any) -> str:
    """The text of a message content (string or multimodal parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def new_trace_id() -> str:
    return str(uuid.uuid4())


@dataclass
class RunPlan:
    """What a run on an existing trace will do, decided before anything is written."""

    path: list[PathMessage]
    cut_index: int | None = None  # rewind: keep path[: cut_index + 1]
    requested_after: int | None = None
    pending_calls: list[dict[str, Any]] = field(default_factory=list)
    missing_calls: list[dict[str, Any]] = field(default_factory=list)

    @property
    def is_rewind(self) -> bool:
        return self.cut_index is not None and self.cut_index < len(self.path) - 1

    @property
    def kept(self) -> list[PathMessage]:
        return self.path if self.cut_index is None else self.path[: self.cut_index + 1]


def safe_cut(path: list[PathMessage], index: int) -> int:
    """R3: never cut between an assistant's tool_calls and their results."""
    anchor = index
    while anchor >= 0 and path[anchor].role == "tool":
        anchor -= 1
    calls = path[anchor].tool_calls if anchor >= 0 and path[anchor].role == "assistant" else None
    if not calls:
        return index
    ids = {c.get("id") for c in calls}
    end = max(index, anchor)
    while end + 1 < len(path) and path[end + 1].role == "tool" and path[end + 1].tool_call_id in ids:
        end += 1
    return end


def open_tool_calls(path: list[PathMessage]) -> list[dict[str, Any]]:
    """Tool calls of the path's last assistant message that have no result after it."""
    index = len(path) - 1
    while index >= 0 and path[index].role == "tool":
        index -= 1
    calls = path[index].tool_calls if index >= 0 and path[index].role == "assistant" else None
    if not calls:
        return []
    answered = {m.tool_call_id for m in path[index + 1 :]}
    return [c for c in calls if c.get("id") not in answered]


def plan_existing(
    trace: Trace,
    path: list[PathMessage],
    messages: list[dict[str, Any]],
    config: RunConfig,
    previous_status: str,
) -> RunPlan:
    """Decide continue / rewind / regenerate and check the request can run."""
    plan = RunPlan(path=path)
    after = config.after_sequence
    if after is not None and after != trace.head_sequence:
        if after < 1:
            raise InvalidRun("after_sequence must be a message sequence >= 1")
        positions = {m.sequence: i for i, m in enumerate(path)}
        if after not in positions:
            expanded = path_through_summaries(trace, path, after)
            if expanded is not None:  # C2: a rewind into a compressed range brings the originals back
                plan.path = path = expanded
                positions = {m.sequence: i for i, m in enumerate(path)}
        if after not in positions:
            known = Message.objects.filter(trace=trace, sequence=after).exists()
            where = "is on a side branch, not on the main path" if known else "does not exist"
            raise InvalidRun(
                f"after_sequence {after} {where} of trace {trace.trace_id} "
                f"(main path: {len(path)} messages, head {trace.head_sequence}); "
                "pick a sequence from GET /api/traces/{id}/messages?mode=main_path"
            )
        plan.cut_index = safe_cut(path, positions[after])
        plan.requested_after = after
    kept = plan.kept
    open_calls = open_tool_calls(kept)
    waiting = previous_status == TraceStatus.WAITING and not plan.is_rewind and config.auto_execute_tools
    if open_calls and waiting:
        if messages:
            names = ", ".join((c.get("function") or {}).get("name", "?") for c in open_calls)
            raise RunConflict(
                f"trace {trace.trace_id} is waiting on tool calls ({names}) for an expert's decision; "
                "approve or deny them first, stop the trace, or rewind with after_sequence"
            )
        plan.pending_calls = open_calls  # approved or denied calls resume (G5)
    else:
        plan.missing_calls = open_calls
    last_role = kept[-1].role if kept else None
    if not messages and not open_calls and last_role == "assistant":
        raise InvalidRun(
            f"nothing to run: message {kept[-1].sequence} is the assistant's final reply. "
            "Send a new message to continue, or rewind with an after_sequence before it to regenerate."
        )
    if not kept and not messages:
        raise InvalidRun("the trace has no messages; send at least one user message")
    return plan


def path_through_summaries(trace: Trace, path: list[PathMessage], after: int) -> list[PathMessage] | None:
    """The original path that a compaction summary on `path` replaced, if it holds `after`.

    Each summary's `compaction` event records the head it was written at; the
    path to that head is the uncompressed history (summaries in it are expanded
    in turn, for nested compactions).
    """

    pending, seen = [path], set()
    while pending:
        candidate = pending.pop()
        for message in candidate:
            if message.kind != MessageKind.SUMMARY or message.sequence in seen:
                continue
            seen.add(message.sequence)
            event = TraceEvent.objects.filter(
                trace=trace, type="compaction", payload__summary_sequence=message.sequence
            ).first()
            head = (event.payload or {}).get("previous_head") if event else None
            if not head:
                continue
            original = trace_main_path_for_run(trace_id=trace.trace_id, head_sequence=head)
            if any(m.sequence == after for m in original):
                return original
            pending.append(original)
    return None


def new_trace(messages: list[dict[str, Any]], config: RunConfig, *, model: str, owner: str) -> Trace:
    """An unsaved Trace for a new run, already holding its lease (token 1)."""
    if config.after_sequence is not None:
        raise InvalidRun("after_sequence needs a trace_id: it names a message of an existing trace")
    first_user = next((m for m in messages if m["role"] == "user"), None)
    if first_user is None:
        raise InvalidRun("a new run needs at least one user message")
    now = timezone.now()
    return Trace(
        trace_id=config.new_trace_id or new_trace_id(),
        name=(config.name or "")[:200],
        mode="agent",
        task=text_of(first_user.get("content")),
        agent_type=config.agent_type,
        parent_trace_id=config.parent_trace_id,
        parent_goal_id=config.parent_goal_id,
        status=TraceStatus.RUNNING,
        owner_id=config.owner_id,
        uid=config.uid,
        model=model,
        llm_params=dict(config.llm_params),
        context=dict(config.context),
        created_at=now,
        updated_at=now,
        run_owner=owner,
        run_token=1,
        heartbeat_at=now,
    )


def load_trace(trace_id: str) -> Trace:
    trace = Trace.objects.filter(pk=trace_id).first()
    if trace is None:
        raise TraceNotFound(f"trace {trace_id!r} does not exist")
    return trace
