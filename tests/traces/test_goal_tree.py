"""GoalTree: the plan a run holds in memory, its display ids, focus, figures and writes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from tests.scripted_llm import Reply, ToolCall
from traces import goal_tree as goal_tree_module
from traces.goal_tree import EMPTY_STATS, FLUSHED_FIELDS, GoalError, GoalTree
from traces.models import Goal, GoalStatus, Trace, TraceEvent
from traces.runner import RunConfig


@pytest.fixture
def events() -> list[tuple[str, dict[str, Any]]]:
    return []


@pytest.fixture
def tree(events: list[tuple[str, dict[str, Any]]]) -> GoalTree:
    """An empty plan of an unsaved trace; emitted events land in `events`."""
    trace = Trace(trace_id="plan", task="Ship the release\nwith notes")
    return GoalTree(trace, [], emit=lambda kind, payload: events.append((kind, payload)))


def order(tree: GoalTree) -> list[tuple[str, str]]:
    return [(display, goal.description) for display, goal in tree.walk()]


def test_add_under_and_after_place_goals_by_position_with_display_ids(tree, events):
    survey = tree.add("Survey", reason="first things first")
    report = tree.add("Report")
    tree.add("Read the files", parent=survey)
    tree.add("Check the totals", after=survey)

    assert order(tree) == [
        ("1", "Survey"),
        ("1.1", "Read the files"),
        ("2", "Check the totals"),
        ("3", "Report"),
    ]
    assert tree.resolve("3") is report and tree.resolve("1.1.").description == "Read the files"
    assert [g.goal_id for _, g in tree.walk()] == ["1", "3", "4", "2"]  # internal ids: order of creation
    assert tree.trace.context["goal_counter"] == 4
    assert [kind for kind, _ in events] == ["goal_added"] * 4
    assert (
        events[0][1]["goal"]["display_id"] == "1" and events[0][1]["goal"]["reason"] == "first things first"
    )
    assert survey.self_stats == EMPTY_STATS and survey.status == GoalStatus.PENDING


def test_a_goal_needs_a_description_and_stores_no_nul(tree):
    with pytest.raises(GoalError, match="needs a description"):
        tree.add("   ")
    assert tree.add("a\x00b", reason="c\x00").description == "a\ufffdb"


def test_resolve_names_the_existing_goals_when_a_reference_is_unknown(tree):
    with pytest.raises(GoalError, match="no current goal"):
        tree.resolve("")
    tree.add("Survey")
    with pytest.raises(GoalError, match="no goal '7'; existing goals: 1"):
        tree.resolve("7")


def test_focus_starts_a_pending_goal_and_refuses_a_closed_one(tree, events):
    survey = tree.add("Survey")
    tree.focus(survey)
    assert tree.current is survey and survey.status == GoalStatus.IN_PROGRESS
    assert events[-1] == ("goal_updated", {"goal_id": "1", "status": "in_progress", "summary": None})

    tree.complete(survey, "done")
    with pytest.raises(GoalError, match="goal 1 is already completed"):
        tree.focus(survey)
    with pytest.raises(GoalError, match="already completed"):
        tree.abandon(survey, "again")


def test_done_moves_the_focus_to_the_next_open_goal_skipping_its_own_children(tree):
    survey = tree.add("Survey")
    tree.add("Read the files", parent=survey)
    report = tree.add("Report")
    tree.focus(survey)

    following = tree.complete(survey, "surveyed")

    assert following is report and tree.current is report
    assert survey.summary == "surveyed" and report.status == GoalStatus.IN_PROGRESS


def test_abandon_wraps_around_to_an_earlier_open_goal_and_closing_the_last_clears_the_focus(tree):
    first = tree.add("First")
    second = tree.add("Second")
    tree.focus(second)

    assert tree.abandon(second, "not needed") is first
    assert second.status == GoalStatus.ABANDONED and second.summary == "not needed"
    assert tree.complete(first, "done") is None
    assert tree.current is None and tree.current_id is None


def test_closing_a_goal_out_of_focus_keeps_the_focus(tree):
    first, second = tree.add("First"), tree.add("Second")
    tree.focus(first)
    assert tree.complete(second, "done early") is first
    assert tree.current is first


def test_record_stats_adds_to_the_goal_itself_and_cumulatively_to_its_ancestors(tree):
    root = tree.add("Root")
    child = tree.add("Child", parent=root)
    tree.record_stats(child.goal_id, prompt_tokens=100, completion_tokens=20, cost=0.5, duration_ms=300)
    tree.record_stats(child.goal_id, prompt_tokens=10, completion_tokens=2, unpriced=True, duration_ms=30)
    tree.record_stats(root.goal_id, prompt_tokens=1)
    tree.record_stats("no such goal", prompt_tokens=1000)
    tree.record_stats(None, prompt_tokens=1000)

    assert (
        child.self_stats
        == child.cumulative_stats
        == {
            "message_count": 2,
            "prompt_tokens": 110,
            "completion_tokens": 22,
            "total_tokens": 132,
            "total_cost": 0.5,
            "unpriced_calls": 1,  # the second call had no price: 0.5 is a lower bound
            "duration_ms": 330,
        }
    )
    assert root.self_stats["message_count"] == 1 and root.self_stats["total_tokens"] == 1
    assert root.self_stats["unpriced_calls"] == 0 and root.cumulative_stats["unpriced_calls"] == 1
    assert root.cumulative_stats["message_count"] == 3 and root.cumulative_stats["total_tokens"] == 133

    tree.add_cumulative(child.goal_id, {"message_count": 5, "total_cost": 0.25, "unpriced_calls": 2})
    assert child.self_stats["message_count"] == 2  # a sub-trace's figures are not the goal's own
    assert child.cumulative_stats["message_count"] == 7 and root.cumulative_stats["total_cost"] == 0.75
    assert root.cumulative_stats["unpriced_calls"] == 3  # an unpriced sub-trace leaves the sum partial


def test_pending_writes_insert_new_goals_and_update_changed_ones_figures_when_due(tree, monkeypatch):
    monkeypatch.setattr(goal_tree_module, "STATS_FLUSH_SECONDS", 3600)
    survey = tree.add("Survey")
    tree.focus(survey)
    tree.record_stats(survey.goal_id, prompt_tokens=5)

    new, writes, due = tree.pending_writes()
    assert new == [survey] and writes == [] and not due  # inserted with its values, not also updated
    tree.mark_flushed(stats=due)

    report = tree.add("Report")
    tree.record_stats(survey.goal_id, prompt_tokens=5)
    new, writes, due = tree.pending_writes()
    assert new == [report] and writes == [] and not due  # figures alone wait

    new, writes, due = tree.pending_writes(all_stats=True)
    assert due and [(goal, set(values)) for goal, values in writes] == [(survey, set(FLUSHED_FIELDS))]
    assert writes[0][1]["self_stats"]["prompt_tokens"] == 10
    tree.mark_flushed(stats=True)

    tree.complete(survey, "done")  # a status change is written at the next commit
    new, writes, _ = tree.pending_writes()
    assert new == [] and [(goal.goal_id, values["status"]) for goal, values in writes] == [
        ("1", "completed"),
        ("2", "in_progress"),  # the focus moved on
    ]


@pytest.mark.django_db
def test_rebuild_at_drops_later_goals_reopens_kept_ones_and_never_reuses_an_id():
    trace = Trace.objects.create(trace_id="plan", task="Ship")
    tree = GoalTree.load(trace)
    cutoff = timezone.now()
    kept, later = tree.add("Kept"), tree.add("Later")
    kept.created_at, later.created_at = cutoff - timedelta(seconds=1), cutoff + timedelta(seconds=1)
    tree.focus(kept)
    tree.flush()

    assert tree.rebuild_at(cutoff) == [later.goal_id]

    assert list(Goal.objects.filter(trace=trace).values_list("goal_id", flat=True)) == [kept.goal_id]
    assert list(tree.goals) == [kept.goal_id]
    assert kept.status == GoalStatus.PENDING and tree.current is None
    [(goal, values)] = tree.pending_writes()[1]  # written by the next commit
    assert goal is kept and values["status"] == GoalStatus.PENDING
    assert tree.add("After the rewind").goal_id == "3"


@pytest.mark.django_db
def test_flush_writes_new_and_changed_goals_that_load_reads_back_in_order():
    trace = Trace.objects.create(trace_id="plan", task="Ship")
    tree = GoalTree.load(trace)
    first = tree.add("First")
    tree.add("Second")
    tree.add("Between", after=first)
    tree.flush()
    tree.focus(first)
    tree.flush()

    loaded = GoalTree.load(trace)
    assert order(loaded) == [("1", "First"), ("2", "Between"), ("3", "Second")]
    assert loaded.goals[first.goal_id].status == GoalStatus.IN_PROGRESS


def test_to_prompt_shows_the_mission_the_nested_plan_and_the_focus(tree):
    assert tree.to_prompt() == "Mission: Ship the release\n(no goals yet)"
    survey = tree.add("Survey")
    tree.add("Read the files", parent=survey)
    report = tree.add("Report")
    assert tree.to_prompt().splitlines()[-1].startswith("No goal is in focus")

    tree.focus(survey)
    tree.complete(survey, "3 files, all current")

    assert tree.to_prompt() == (
        "Mission: Ship the release\n"
        "1. [completed] Survey\n"
        "  1.1. [pending] Read the files\n"
        "2. [in_progress] Report  <- current"
    )
    tree.abandon(report, "")  # no summary to show
    assert tree.to_prompt(include_summary=True) == (
        "Mission: Ship the release\n"
        "1. [completed] Survey\n"
        "  summary: 3 files, all current\n"
        "  1.1. [in_progress] Read the files  <- current\n"
        "2. [abandoned] Report"
    )


def test_snapshot_lists_the_goals_in_document_order_with_the_focus(tree):
    first = tree.add("First")
    tree.add("Child", parent=first)
    tree.focus(first)
    snapshot = tree.snapshot()
    assert snapshot["current_id"] == first.goal_id
    assert [(g["display_id"], g["description"]) for g in snapshot["goals"]] == [
        ("1", "First"),
        ("1.1", "Child"),
    ]


def test_leave_open_marks_the_open_goals_once_and_reopen_clears_the_marks(tree, events):
    survey, report, notes = tree.add("Survey"), tree.add("Report"), tree.add("Notes")
    tree.focus(survey)
    tree.complete(notes, "written")  # out of focus: survey keeps it
    tree.mark_flushed(stats=True)
    events.clear()

    assert tree.leave_open("completed") == [survey, report]
    assert tree.leave_open("completed") == []  # already marked: no second event

    assert (survey.status, survey.left_open) == (GoalStatus.IN_PROGRESS, "completed")  # status as left
    assert (report.status, report.left_open) == (GoalStatus.PENDING, "completed")
    assert notes.left_open == "" and tree.current is survey
    assert events == [
        (
            "goal_updated",
            {"goal_id": "1", "status": "in_progress", "summary": None, "left_open": "completed"},
        ),
        ("goal_updated", {"goal_id": "2", "status": "pending", "summary": None, "left_open": "completed"}),
    ]
    assert {goal.goal_id: values["left_open"] for goal, values in tree.pending_writes()[1]} == {
        "1": "completed",
        "2": "completed",
    }
    assert tree.goal_dict(survey)["left_open"] == "completed" and tree.goal_dict(notes)["left_open"] is None
    tree.mark_flushed(stats=True)
    events.clear()

    tree.reopen()

    assert survey.left_open == report.left_open == "" and survey.status == GoalStatus.IN_PROGRESS
    assert [payload["left_open"] for _, payload in events] == [None, None]
    assert [goal.goal_id for goal, _ in tree.pending_writes()[1]] == ["1", "2"]


# --- through the runner: what a run's end does to the plan -------------------------------


def goal_call(action: str, **kwargs: Any) -> ToolCall:
    return ToolCall("goal", {"action": action, **kwargs})


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def stored_goals(trace_id: str) -> dict[str, tuple[str, str]]:
    return {g.description: (g.status, g.left_open) for g in Goal.objects.filter(trace_id=trace_id)}


def event_types(trace_id: str) -> list[tuple[str, Any]]:
    return [
        (e.type, e.payload.get("left_open", "-") if e.type == "goal_updated" else None)
        for e in TraceEvent.objects.filter(trace_id=trace_id).order_by("event_id")
    ]


@pytest.mark.django_db
def test_a_completed_run_leaves_its_open_goals_marked_and_a_continue_takes_them_up(
    runner, llm, api_client, expert
):
    llm.script(
        "scripted",
        [
            Reply(
                tool_calls=[goal_call("add", description="Survey"), goal_call("add", description="Report")]
            ),
            Reply(tool_calls=[goal_call("focus", target="1")]),
            Reply(text="Here is what I found."),
        ],
    )
    first = runner.run_result(user("survey and report"), RunConfig())

    assert first.status == "completed"
    assert stored_goals(first.trace_id) == {
        "Survey": ("in_progress", "completed"),
        "Report": ("pending", "completed"),
    }
    types = event_types(first.trace_id)
    assert types[-3:] == [("goal_updated", "completed"), ("goal_updated", "completed"), ("final", None)]
    tree = api_client(expert).get(f"/api/traces/{first.trace_id}").json()["goal_tree"]
    assert [(g["description"], g["status"], g["left_open"]) for g in tree["goals"]] == [
        ("Survey", "in_progress", "completed"),
        ("Report", "pending", "completed"),
    ]
    assert tree["current_id"] == Goal.objects.get(trace_id=first.trace_id, description="Survey").goal_id

    # A continue: the marks go as the run starts, the focus is where it was, and
    # the plan works on: done moves on to the next open goal.
    llm.script(
        "scripted",
        [Reply(tool_calls=[goal_call("done", summary="surveyed")]), Reply(text="Report in progress.")],
    )
    runner.run_result(user("go on"), RunConfig(trace_id=first.trace_id))

    assert stored_goals(first.trace_id) == {
        "Survey": ("completed", ""),
        "Report": ("in_progress", "completed"),  # left open again by this run's end
    }
    second = event_types(first.trace_id)[len(types) :]
    started = second.index(("run_started", None))
    assert second[started + 1 : started + 3] == [("goal_updated", None), ("goal_updated", None)]
    assert second[-2:] == [("goal_updated", "completed"), ("final", None)]


@pytest.mark.django_db
def test_a_run_stopped_at_its_step_limit_leaves_goals_open_as_stopped_and_waiting_marks_nothing(
    runner, llm, integrator
):
    llm.script("scripted", [Reply(tool_calls=[goal_call("add", description="Long job")])])
    paused = runner.run_result(user("a long job"), RunConfig(max_iterations=1))
    assert paused.status == "stopped"
    assert stored_goals(paused.trace_id) == {"Long job": ("in_progress", "stopped")}

    llm.script(
        "scripted",
        [Reply(tool_calls=[ToolCall("write", {"path": "out.txt", "content": "x"})]), Reply(text="written")],
    )
    waiting = runner.run_result(
        user("write it"),
        RunConfig(trace_id=paused.trace_id, confirm_policy="ask-risky", owner_id=integrator.pk),
    )
    assert waiting.status == "waiting"  # paused inside a step for an expert: nothing was left
    assert stored_goals(paused.trace_id) == {"Long job": ("in_progress", "")}
