"""A run's tool calls: the confirm gate (G5), hooks (G4), execution and errors as results (T2), spill (C3), loops (G6)."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterator
from typing import Any

from django.conf import settings
from django.db import transaction

import traces.runner.compaction as compaction
from traces import prompts
from traces.guards.confirm import (
    GateDecision,
    approval_payload,
    gate,
)
from traces.guards.loop_detection import LoopVerdict
from traces.models import Message, MessageKind, TraceStatus
from traces.runner.base import RunnerBase
from traces.runner.connections import connection_release
from traces.runner.extensions import Tool, extensions
from traces.runner.history import new_message
from traces.runner.parallel import Batch, may_share_a_batch
from traces.runner.state import RunState
from traces.runner.tool_api import SLOW_AFTER_SECONDS, ToolContext, ToolResult
from traces.runner.tool_call import ToolCall

# Inline tools that are quick and change nothing outside the run (the plan).
QUICK_INLINE_TOOLS = {"goal"}


class ToolCalls(RunnerBase):
    """AgentRunner's tool-call steps (a mixin; `self` is the AgentRunner)."""

    def _quick(self, run: RunState, call: dict[str, Any]) -> bool:
        tool = self._offered_tool(run, call)
        return tool is None or (tool.read_only and (not tool.inline or tool.name in QUICK_INLINE_TOOLS))

    def _execute_calls(
        self, run: RunState, calls: list[dict[str, Any]], message_sequence: int
    ) -> Iterator[Message]:
        """The reply's calls in order; consecutive read-only ones run at once (`_run_batch`)."""
        run.loop_verdict = None
        images: list[dict[str, Any]] = []
        batch: list[dict[str, Any]] = []
        for call in calls:
            decision = None
            if may_share_a_batch(self._offered_tool(run, call)):
                decision = self._gate(run, call, message_sequence) if run.gated else None
                if decision is None or decision.action == "execute":
                    batch.append(decision.call if decision else call)
                    continue
            if not (yield from self._run_batch(run, batch, images)):
                return
            batch = []
            if not (yield from self._one_call(run, call, message_sequence, images, decision)):
                return
        if not (yield from self._run_batch(run, batch, images)):
            return
        if images:  # after the step's last result: tool results must follow their calls unbroken
            yield self._images_message(run, images)
        if run.loop_verdict is not None:
            yield from self._on_loop(run, run.loop_verdict)

    def _offered_tool(self, run: RunState, call: dict[str, Any]) -> Tool | None:
        name = ToolCall.of(call).name
        return self.tool_registry.get(name) if name in run.offered else None

    def _one_call(
        self,
        run: RunState,
        call: dict[str, Any],
        message_sequence: int,
        images: list[dict[str, Any]],
        decision: GateDecision | None = None,
    ) -> Generator[Message, None, bool]:
        """One call through the gate, run alone; returns whether the step goes on."""
        if self._stopping(run):
            # Unanswered calls are healed when the trace is next loaded (R6).
            self._finish(run, TraceStatus.STOPPED)
            return False
        denial = None
        if decision is None and run.gated:
            decision = self._gate(run, call, message_sequence)
        if decision is not None:
            if decision.action == "wait":
                extensions.observe("waiting", run, "approval", ToolCall.of(call).name)
                self._finish(run, TraceStatus.WAITING)  # no worker is held while an expert decides
                return False
            call = decision.call
            if decision.action == "deny":
                note = decision.approval.decision_note if decision.approval else ""
                denial = ToolResult(
                    title="Denied",
                    output=f"An expert denied this call.{' Reason: ' + note if note else ''}",
                    is_error=True,
                )
        message = self._execute_call(run, call, forced=denial, images=images)
        if message is None:
            extensions.observe("waiting", run, "tool", ToolCall.of(call).name)
            self._finish(run, TraceStatus.WAITING)  # a tool waits for a human (ask_human, S3)
            return False
        yield message
        return True

    def _run_batch(
        self, run: RunState, calls: list[dict[str, Any]], images: list[dict[str, Any]]
    ) -> Generator[Message, None, bool]:
        """Read-only calls (passed by the gate) at once, at most AGENT_PARALLEL_TOOLS;
        their events, hooks and results in call order in this thread. A stop ends the
        step at the first unfinished call (the rest heal, R6). Returns whether the step goes on."""
        if len(calls) < 2:
            for call in calls:  # alone: exactly the sequential path
                if not (yield from self._one_call(run, call, 0, images, GateDecision("execute", call))):
                    return False
            return True
        if self._stopping(run):
            self._finish(run, TraceStatus.STOPPED)
            return False
        prepared = [self._start_call(run, call) for call in calls]
        bodies = [self._body(run, parsed, ctx, forced) for _, parsed, ctx, forced in prepared]
        batch = Batch(bodies)
        run.store.emit("tool_batch", {"tool_call_ids": [c.get("id") for c in calls], "size": len(calls)})
        try:
            with run.turn.waiting(again=False):
                slow = not batch.done_within(SLOW_AFTER_SECONDS)
            if slow:
                self._show_running(run)
            with run.store.keep_alive():
                for index, (call, parsed, ctx, _) in enumerate(prepared):
                    with run.turn.waiting(again=False):
                        result = batch.result(index, lambda: self._stopping(run))
                    if result is None:
                        for later, _, _, _ in prepared[index:]:
                            extensions.observe("tool_ended", run, later, None)
                        self._finish(run, TraceStatus.STOPPED)
                        return False
                    message = self._end_call(run, call, parsed, ctx, result, batch.seconds(index), images)
                    extensions.observe("tool_ended", run, call, message)
                    yield message
        finally:
            batch.close()
        return True

    def _start_call(
        self, run: RunState, call: dict[str, Any]
    ) -> tuple[dict[str, Any], ToolCall, ToolContext, ToolResult | None]:
        """A batched call's start in the run's thread: its event, context and the hook's verdict."""
        parsed = ToolCall.of(call)
        run.store.emit(
            "tool_call", {"tool_call_id": call.get("id"), "name": parsed.name, "arguments": parsed.arguments}
        )
        ctx = self._context(run, call)
        extensions.observe("tool_started", run, call, parsed.name)
        blocked = self.hooks.before_tool_call(run.trace, call) if self.hooks.has("before_tool_call") else None
        forced = None
        if blocked:
            forced = ToolResult(title="Blocked", output=f"This call was blocked: {blocked}", is_error=True)
        return call, parsed, ctx, forced

    def _body(
        self, run: RunState, parsed: ToolCall, ctx: ToolContext, forced: ToolResult | None
    ) -> Callable[[], ToolResult]:
        def body() -> ToolResult:
            if forced is not None:
                return forced
            return self.tool_registry.execute(
                parsed.name, parsed.arguments, ctx, offered=run.offered, timeout=settings.AGENT_TOOL_TIMEOUT
            )

        return body

    def _on_loop(self, run: RunState, verdict: LoopVerdict) -> Iterator[Message]:
        """G6: remind the model at warning level; end the run and flag it at critical."""
        run.store.emit(
            "loop_detected",
            {"level": verdict.level, "kind": verdict.kind, "count": verdict.count, "detail": verdict.detail},
        )
        if verdict.level == "critical":
            run.trace.needs_attention = True
            run.trace.attention_reason = f"loop detected ({verdict.kind}): {verdict.detail}"
            self._finish(run, TraceStatus.FAILED, error=run.trace.attention_reason)
            return
        yield self._note(
            run,
            prompts.LOOP_REMINDER.format(detail=verdict.detail),
            kind=MessageKind.LOOP_WARNING,
            description=f"loop warning: {verdict.kind}",
        )

    def _note(self, run: RunState, text: str, *, kind: str, description: str) -> Message:
        """A system message from the runtime itself on the main path (guards)."""
        note = new_message(
            run,
            role="system",
            content=text,
            kind=kind,
            description=description,
            goal_id=run.trace.current_goal_id,
        )
        self._add_message(run, note)
        run.store.commit()
        return note

    def _gate(self, run: RunState, call: dict[str, Any], message_sequence: int) -> GateDecision:
        name = ToolCall.of(call).name
        tool = self.tool_registry.get(name) if name in run.offered else None
        decision = gate(run.trace, call, tool, run.policy, message_sequence)
        approval = decision.approval
        if decision.by_run_approval is not None:
            run.store.emit(
                "confirm_response",
                {
                    "tool_call_id": call.get("id"),
                    "tool": name,
                    "status": "approved",
                    "approved": True,  # seed 002's boolean
                    "scope": "run",
                    "approval_id": decision.by_run_approval,
                },
            )
        if approval is None:
            return decision
        if decision.created:
            # The approval and its event land through the run's fence, or not at all.
            with transaction.atomic():
                approval.save(force_insert=True)
                run.store.emit("confirm_required", approval_payload(approval))
                run.store.commit()
        elif decision.action != "wait":
            payload = approval_payload(approval)
            run.store.emit("confirm_response", {**payload, "approved": payload["status"] == "approved"})
        return decision

    def _images_message(self, run: RunState, images: list[dict[str, Any]]) -> Message:
        """The images this step's tools returned (a browser screenshot), as a user message (L5)."""
        names = ", ".join(str(p.get("media", {}).get("name") or "image") for p in images)
        message = new_message(
            run,
            role="user",
            content=[{"type": "text", "text": f"[images returned by the tools above: {names}]"}, *images],
            kind=MessageKind.PLAIN,
            description=f"tool images: {names}"[:2000],
            goal_id=run.trace.current_goal_id,
        )
        self._add_message(run, message)
        run.store.commit()
        return message

    def _context(self, run: RunState, call: dict[str, Any]) -> ToolContext:
        return ToolContext(
            trace=run.trace,
            workspace=run.workspace,
            goal_tree=run.goal_tree,
            goal_id=run.trace.current_goal_id,
            uid=run.trace.uid,
            runner=self,
            tool_call_id=call.get("id"),
            store=run.store,
            config=run.config,
            sandbox_network=run.trace.run_settings.get("sandbox_network"),
            workspace_writable=run.placement.writable if run.placement else True,
            project=run.placement.project if run.placement else None,
        )

    def _execute_call(
        self,
        run: RunState,
        call: dict[str, Any],
        forced: ToolResult | None = None,
        images: list[dict[str, Any]] | None = None,
    ) -> Message | None:
        """Run one call and persist its result; None when the tool suspends the run (the call stays open)."""
        parsed = ToolCall.of(call)
        name, arguments = parsed.name, parsed.arguments
        run.store.emit("tool_call", {"tool_call_id": call.get("id"), "name": name, "arguments": arguments})
        ctx = self._context(run, call)
        extensions.observe("tool_started", run, call, name)
        message: Message | None = None
        try:
            message = self._run_call(run, call, parsed, ctx, forced, images)
        finally:
            extensions.observe("tool_ended", run, call, message)
        return message

    def _run_call(
        self,
        run: RunState,
        call: dict[str, Any],
        parsed: ToolCall,
        ctx: ToolContext,
        forced: ToolResult | None,
        images: list[dict[str, Any]] | None,
    ) -> Message | None:
        """Run the call (the tool, or the forced result) and buffer its result message."""
        started = time.perf_counter()
        if forced is None and not self._quick(run, call):
            # Commit the reply and this call's event before a slow or side-effecting tool
            # runs: watchers see the call at once (not with its result), and a crash
            # mid-tool leaves an open call to heal (R6). Quick read-only calls commit once,
            # with their results.
            run.store.commit()
        blocked = None
        if forced is None and self.hooks.has("before_tool_call"):
            blocked = self.hooks.before_tool_call(run.trace, call)
        if forced is not None:
            result = forced
        elif blocked:
            result = ToolResult(title="Blocked", output=f"This call was blocked: {blocked}", is_error=True)
        else:
            # a long tool must not look like a dead worker (W5); other runs work meanwhile
            with run.store.keep_alive(), run.turn.waiting(again=False):
                result = self.tool_registry.execute(
                    parsed.name,
                    parsed.arguments,
                    ctx,
                    offered=run.offered,
                    timeout=settings.AGENT_TOOL_TIMEOUT,
                    slow=lambda: self._show_running(run),
                )
            if result.metadata.get("suspend"):
                return None
        return self._end_call(run, call, parsed, ctx, result, time.perf_counter() - started, images)

    def _show_running(self, run: RunState) -> None:
        """A tool still running after SLOW_AFTER_SECONDS: its `tool_call` event (and any before it)
        leaves now, not with the result, so watchers see what the run is doing during a
        long command (as `round_start` leaves while the model thinks); a quick tool's
        event goes with its result, in one commit."""
        if run.store.has_pending_events:
            run.store.commit()
            connection_release()  # the tool's wait needs no connection

    def _end_call(
        self,
        run: RunState,
        call: dict[str, Any],
        parsed: ToolCall,
        ctx: ToolContext,
        result: ToolResult,
        seconds: float,
        images: list[dict[str, Any]] | None,
    ) -> Message:
        """A call's result, through the after hook, as its message: events, loop check, commit."""
        name, arguments = parsed.name, parsed.arguments
        if self.hooks.has("after_tool_call"):
            result = self.hooks.after_tool_call(run.trace, call, result)
        duration_ms = int(seconds * 1000)
        content = result.to_content()
        if images is not None:
            images.extend(result.images)
        verdict = run.loop_detector.observe(name, arguments, content)
        if verdict is not None and (run.loop_verdict is None or verdict.level == "critical"):
            run.loop_verdict = verdict
        # a shown-once result keeps its long-term memory for later requests (C3)
        memory = result.long_term_memory if result.include_output_only_once else None
        once = bool(memory)
        message = new_message(
            run,
            role="tool",
            content=content,
            tool_call_id=call.get("id"),
            name=name or None,
            goal_id=run.trace.current_goal_id or ctx.goal_id,
            duration_ms=duration_ms,
            kind=MessageKind.TOOL_ERROR if result.is_error else ("once" if once else ""),
            description=(memory or result.title or name)[:2000],
        )
        if len(content) > settings.AGENT_TOOL_SPILL_CHARS:
            if run.placement is None or run.placement.writable:
                message.content = compaction.spill(run.workspace, message.message_id, content)
            else:  # a read-only project keeps no spill files
                message.content = compaction.cut(content)
        run.store.emit(
            "tool_result",
            {
                "tool_call_id": call.get("id"),
                "name": name,
                "title": result.title,
                "is_error": result.is_error,
                "duration_ms": duration_ms,
                **({"url": result.metadata["url"]} if result.metadata.get("url") else {}),
                # where the call went when not to a built-in (an MCP server: "mcp:<server>")
                **({"source": result.metadata["source"]} if result.metadata.get("source") else {}),
            },
        )
        self._add_message(run, message)
        if once:
            run.once_pending.append((len(run.llm_messages) - 1, message.description))
        run.store.commit()
        return message

    # --- ending ------------------------------------------------------------------
