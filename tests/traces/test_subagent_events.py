"""Sub-agent progress on the parent (seed 002 「运行时事件流」) and the seed's payload names."""

from __future__ import annotations

from typing import Any

import pytest

from tests.scripted_llm import Reply, ToolCall
from tests.traces.test_subagents import children_wait_for_locks, last_user_text  # noqa: F401
from traces.models import Trace, TraceEvent
from traces.runner import AgentRunner, RunConfig
from traces.runner.context import with_compacted_count

pytestmark = pytest.mark.django_db

SUBAGENT = (
    "subagent_started",
    "subagent_progress",
    "subagent_checkpoint",
    "subagent_completed",
    "subagent_error",
)


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def subagent_events(trace_id: str) -> list[TraceEvent]:
    return list(TraceEvent.objects.filter(trace_id=trace_id, type__in=SUBAGENT).order_by("event_id"))


def test_a_delegate_reports_each_round_a_checkpoint_every_n_and_its_end(runner, llm, settings):
    settings.AGENT_SUBAGENT_CHECKPOINT_ROUNDS = 2
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("agent", {"task": "count the files"})]),
            Reply(tool_calls=[ToolCall("list_files", {})]),  # child round 1
            Reply(tool_calls=[ToolCall("list_files", {"path": "."})]),  # child round 2
            Reply(text="3 files"),  # child round 3
            Reply(text="done"),
        ],
    )

    result = runner.run_result(user("delegate"), RunConfig())

    child = Trace.objects.get(parent_trace_id=result.trace_id)
    events = subagent_events(result.trace_id)
    assert [e.type for e in events] == [
        "subagent_started",
        "subagent_progress",
        "subagent_progress",
        "subagent_checkpoint",
        "subagent_progress",
        "subagent_completed",
    ]
    assert all(e.payload["sub_trace_id"] == child.trace_id for e in events)
    progress = [e.payload for e in events if e.type == "subagent_progress"]
    assert [p["round"] for p in progress] == [1, 2, 3]
    assert {p["max_rounds"] for p in progress} == {child.run_settings["max_iterations"]}
    assert progress[2]["messages"] > progress[0]["messages"]
    assert events[3].payload["round"] == 2
    assert events[-1].payload["summary"] == "3 files" and events[-1].payload["status"] == "completed"
    # each report was committed while the child ran, before the parent heard the end
    ended = TraceEvent.objects.get(trace_id=result.trace_id, type="sub_trace_completed")
    assert all(e.created_at <= ended.created_at for e in events[:-1])


def test_a_failed_delegate_is_a_subagent_error(runner, llm):
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("agent", {"task": "do it"})]),
            Reply(status=400, error="bad request for the child"),
            Reply(status=400, error="bad request for the child"),  # the plain call after the stream's failure
            Reply(text="it failed"),
        ],
    )

    result = runner.run_result(user("delegate"), RunConfig())

    error = TraceEvent.objects.get(trace_id=result.trace_id, type="subagent_error").payload
    assert error["status"] == "failed" and "bad request for the child" in error["error"]
    assert not TraceEvent.objects.filter(trace_id=result.trace_id, type="subagent_completed").exists()


@pytest.mark.django_db(transaction=True)
def test_explore_children_in_their_own_threads_report_through_the_parent(
    llm,
    workspace_root,
    children_wait_for_locks,  # noqa: F811
):
    def child_or_parent(body: dict[str, Any]) -> Reply:
        return Reply(text=f"finding about {last_user_text(body)}")

    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("agent", {"task": ["look at a", "look at b"]})]),
            child_or_parent,
            child_or_parent,
            "merged",
        ],
    )

    result = AgentRunner().run_result(user("explore"), RunConfig())

    children = set(Trace.objects.filter(parent_trace_id=result.trace_id).values_list("trace_id", flat=True))
    events = subagent_events(result.trace_id)
    by_type: dict[str, set[str]] = {}
    for event in events:
        by_type.setdefault(event.type, set()).add(event.payload["sub_trace_id"])
    assert by_type == {
        "subagent_started": children,
        "subagent_progress": children,
        "subagent_completed": children,
    }


def test_round_start_carries_the_seed_names(runner, llm):
    result = runner.run_result(user("hi"), RunConfig(max_iterations=7))

    start = TraceEvent.objects.filter(trace_id=result.trace_id, type="round_start").first()
    assert start.payload == {"iteration": 0, "round": 1, "max_rounds": 7}


@pytest.mark.parametrize(
    ("info", "count"),
    [
        ({"level": 2, "compressed_count": 12}, 12),
        ({"level": "microcompact", "stubbed_sequences": [4, 6, 9]}, 3),
        ({"level": "truncate", "dropped_sequences": [3, 4]}, 2),
    ],
)
def test_compaction_events_carry_compacted_count(info, count):
    assert with_compacted_count(info) == {**info, "compacted_count": count}
