"""Compaction hand-off (seed 001 Auto-Compact): the summary opens with the boundary marker
(tokens before, the last message compacted) and the plan is re-attached verbatim right after it."""

from __future__ import annotations

import pytest

from tests.scripted_llm import Reply, ToolCall
from tests.traces.test_compaction import SKILLS, big_output, scripted, small_context, user  # noqa: F401
from traces.models import Message, TraceEvent
from traces.runner import RunConfig
from traces.runner.compaction import SUMMARY_MARKER

pytestmark = pytest.mark.django_db


def test_the_summary_carries_the_boundary_and_the_plan_follows_it_verbatim(runner, llm, small_context):  # noqa: F811
    plan = [Reply(tool_calls=[ToolCall("goal", {"action": "add", "description": "Print the digits"})])]
    llm.script(
        "scripted", [scripted(plan + [Reply(tool_calls=[big_output(i, 300)]) for i in range(12)])] * 40
    )

    result = runner.run_result(user("print big digits twelve times"), RunConfig(stream=False, skills=SKILLS))

    assert result.status == "completed"
    event = TraceEvent.objects.filter(trace_id=result.trace_id, type="compaction", payload__level=2).first()
    assert event is not None
    summary = Message.objects.get(trace_id=result.trace_id, sequence=event.payload["summary_sequence"])
    last = event.payload["compressed_sequences"][-1]
    count, tokens = event.payload["compressed_count"], event.payload["tokens_before"]
    assert summary.content.startswith(
        f"{SUMMARY_MARKER} Session continuation, a hand-off and not a fresh start: {count} messages "
        f"up to message #{last} ({tokens:,} tokens before compaction) were compacted."
    )
    attached = Message.objects.get(trace_id=result.trace_id, sequence=event.payload["attached_sequence"])
    assert (attached.parent_sequence, attached.kind, attached.role) == (summary.sequence, "context", "system")
    assert "## Current Plan" in attached.content and "Print the digits" in attached.content

    after = next(
        r
        for r in llm.requests_for("scripted")
        if any(m.get("content") == summary.content for m in r.messages)
    )
    contents = [m.get("content") for m in after.messages]
    at = contents.index(summary.content)
    assert contents[at + 1] == attached.content  # the model reads the plan right after the hand-off
