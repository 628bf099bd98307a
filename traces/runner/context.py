"""A run's context: the periodic injection (R7) and both compaction levels plus the truncation fallback (C1-C5)."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

import traces.runner.compaction as compaction
import traces.runner.microcompact as microcompact
from traces.goal_tree import GoalTree
from traces.models import Message, MessageKind, Trace
from traces.runner.base import RunnerBase
from traces.runner.extensions import ContextHook, extensions
from traces.runner.history import new_message
from traces.runner.state import RunState
from traces.runner.strategies.reflexion import lessons_section

logger = logging.getLogger(__name__)


class ContextManagement(RunnerBase):
    """AgentRunner's context steps (a mixin; `self` is the AgentRunner)."""

    def _inject_context(self, run: RunState) -> Message | None:
        """R7: the plan, active collaborators and hook output as one system message."""
        text = build_context_injection(run.trace, run.goal_tree, self.context_hooks)
        if run.lessons:  # R11: Reflexion's lessons hold for the rest of the run
            text = "\n\n".join(part for part in (text, lessons_section(run.lessons)) if part)
        if not text:
            return None
        message = new_message(
            run,
            role="system",
            content=text,
            kind=MessageKind.CONTEXT,
            description="context injection: plan and collaborators",
            goal_id=run.trace.current_goal_id,
        )
        # Committed with the step (or by the model-call watch if the call is slow).
        self._add_message(run, message)
        return message

    def _request(self, run: RunState) -> list[dict[str, Any]]:
        """The messages for the next model call: the history, compacted when it is too big."""
        if run.microcompact_keep and run.token_total > run.microcompact_at:
            self._microcompact(run)
        if run.token_total <= run.threshold:
            return run.llm_messages
        messages, dropped, tokens = compaction.level_one(run.llm_messages, run.infos, run.goal_tree)
        if dropped and tuple(dropped) != run.dropped_signature:
            run.dropped_signature = tuple(dropped)
            self._compaction_event(
                run,
                {
                    "level": 1,
                    "dropped_sequences": dropped,
                    "tokens_before": run.token_total,
                    "tokens_after": tokens,
                },
            )
        if tokens <= run.threshold:
            return messages
        if self._compact(run):
            messages, _, tokens = compaction.level_one(run.llm_messages, run.infos, run.goal_tree)
            if tokens <= run.threshold:
                return messages
        return self._truncate(run, tokens)

    def _microcompact(self, run: RunState) -> None:
        """Seed 001 layer 2: older tool results become stubs in the in-memory history
        (microcompact.py); the summary, if one follows, reads the stubs too."""
        info = microcompact.microcompact(run)
        if info is None:
            return
        run.store.emit("compaction", with_compacted_count(info))  # committed with the step
        if self.hooks.has("on_compaction"):
            self.hooks.on_compaction(run.trace, info)

    def _truncate(self, run: RunState, tokens: int) -> list[dict[str, Any]]:
        """No summary helped: cut the request (never send one over the threshold)."""
        plan = run.goal_tree.to_prompt(include_summary=True)
        messages, dropped = compaction.truncate(run.llm_messages, run.infos, plan, run.threshold)
        if tuple(dropped) != run.truncated_signature:
            run.truncated_signature = tuple(dropped)
            self._compaction_event(
                run,
                {
                    "level": "truncate",
                    "dropped_sequences": dropped,
                    "tokens_before": tokens,
                    "tokens_after": sum(compaction.estimate_tokens(m) for m in messages),
                },
            )
        return messages

    def _compact(self, run: RunState) -> bool:
        """Level 2: reflect, summarise, and hang the summary off the first user message."""
        context = run.trace.context
        failures = int(context.get("compaction_failures", 0))
        if failures >= compaction.FAILURE_LIMIT or compaction.already_compacted(run.infos):
            return False
        first_user = next((i for i, m in enumerate(run.llm_messages) if m["role"] == "user"), None)
        carry = compaction.carried_start(run.llm_messages, run.infos)
        if first_user is None or carry <= first_user + 1:
            return False  # nothing between the task and the unanswered tail to compress
        run.store.commit()  # the reflection reads the committed main path
        compaction.reflect_before_compaction(run.store, self.llm_call)
        request = compaction.summary_request(
            run.llm_messages,
            run.infos,
            run.goal_tree.to_prompt(include_summary=True),
            int(compaction.context_limit(run.model.model) * 0.9),
        )
        outcome = compaction.write_summary(self.llm_call, run.model, request)
        if outcome.text is None:
            context["compaction_failures"] = failures + 1
            self._compaction_event(
                run,
                {
                    "level": 2,
                    "failed": outcome.error,
                    "failures": failures + 1,
                    "limit": compaction.FAILURE_LIMIT,
                },
            )
            return False
        context["compaction_failures"] = 0
        self._replace_with_summary(run, first_user, carry, outcome.text)
        return True

    def _replace_with_summary(self, run: RunState, first_user: int, carry: int, text: str) -> None:
        compressed = [i.sequence for i in run.infos[first_user + 1 : carry] if i.sequence is not None]
        tail = list(zip(run.llm_messages[carry:], run.infos[carry:], strict=True))
        tokens_before = run.token_total
        previous_head = run.trace.head_sequence
        run.llm_messages = run.llm_messages[: first_user + 1]
        run.microcompact_done = 0  # a new list: the carried tail has not been looked at
        run.infos = run.infos[: first_user + 1]
        run.token_total = sum(info.tokens for info in run.infos)
        first_sequence = run.infos[first_user].sequence
        summary = new_message(
            run,
            role="user",
            content=compaction.boundary(
                len(compressed), compressed[-1] if compressed else None, tokens_before
            )
            + f"\n\n{text}",
            parent_sequence=first_sequence,
            kind=MessageKind.SUMMARY,
            description=f"summary of {len(compressed)} messages",
            goal_id=run.trace.current_goal_id,
        )
        self._add_message(run, summary)
        # State is re-attached verbatim right after the hand-off, not summarised (seed 001
        # Auto-Compact's attachments): the plan, collaborators and hooks, as injected.
        attached = self._inject_context(run)
        for data, info in tail:
            if info.sequence is None:
                continue
            self._add_message(
                run,
                new_message(
                    run,
                    role=data["role"],
                    content=data.get("content"),
                    tool_calls=data.get("tool_calls"),
                    tool_call_id=data.get("tool_call_id"),
                    name=data.get("name"),
                    kind=MessageKind.CARRIED,
                    goal_id=info.goal_id,
                    description=f"carried over from message {info.sequence}",
                ),
            )
        self._compaction_event(
            run,
            {
                "level": 2,
                "summary_sequence": summary.sequence,
                "attached_sequence": attached.sequence if attached else None,
                "previous_head": previous_head,  # rewinding into the range finds the originals here
                "compressed_sequences": [compressed[0], compressed[-1]] if compressed else [],
                "compressed_count": len(compressed),
                "carried_sequences": [i.sequence for _, i in tail if i.sequence is not None],
                "tokens_before": tokens_before,
                "tokens_after": run.token_total,
            },
        )

    def _compaction_event(self, run: RunState, info: dict[str, Any]) -> None:
        run.store.emit("compaction", with_compacted_count(info))
        run.store.commit()
        if self.hooks.has("on_compaction"):
            self.hooks.on_compaction(run.trace, info)

    def _retire_shown_once(self, run: RunState) -> None:
        """C3: a result meant to be seen once is replaced by its long-term memory after the call."""
        for index, memory in run.once_pending:
            info = run.infos[index]
            data = {**run.llm_messages[index], "content": compaction.shown_once(memory)}
            run.llm_messages[index] = data
            tokens = compaction.estimate_tokens(data)
            run.token_total += tokens - info.tokens
            info.tokens = tokens
        run.once_pending = []


def default_context_hooks() -> list[ContextHook]:
    """Hooks every runner gets unless given its own: the registered ones (the A2A inbox, S4),
    then those named in settings.AGENT_CONTEXT_HOOKS, in order. Every runner (a worker's run
    host, `run_agent`, a test's) is built through here, so the setting reaches them all."""
    return list(extensions.context_hooks) + context_hooks_from_settings()


def context_hooks_from_settings() -> list[ContextHook]:
    """The functions named in AGENT_CONTEXT_HOOKS (a bad path fails the `check` command first)."""
    return [import_string(path) for path in settings.AGENT_CONTEXT_HOOKS]


def build_context_injection(trace: Trace, goal_tree: GoalTree | None, hooks: list[ContextHook]) -> str:
    parts = []
    if goal_tree:
        parts.append(f"## Current Plan\n\n{goal_tree.to_prompt()}")
    collaborators = (trace.context or {}).get("collaborators") or []
    if collaborators:
        lines = ["## Active Collaborators"]
        for c in collaborators:
            summary = f": {c['summary']}" if c.get("summary") else ""
            lines.append(
                f"- {c.get('name', '?')} [{c.get('type', 'agent')}, {c.get('status', '?')}]{summary}"
            )
        parts.append("\n".join(lines))
    for hook in hooks:
        try:
            content = hook(trace, goal_tree)
        except Exception:
            logger.exception("context hook %r failed", hook)
            continue
        if content:
            parts.append(content)
    return "\n\n".join(parts)


def with_compacted_count(info: dict[str, Any]) -> dict[str, Any]:
    """A compaction event's payload with seed 002's `compacted_count` beside our figures:
    the messages summarised (level 2), stubbed (microcompact) or left out (truncate)."""
    for key in ("compressed_count", "stubbed_sequences", "dropped_sequences"):
        if key in info:
            value = info[key]
            return {**info, "compacted_count": value if isinstance(value, int) else len(value)}
    return info
