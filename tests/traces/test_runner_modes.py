"""Run modes (R2): new, continue, rewind, regenerate — through real litellm."""

from __future__ import annotations

from typing import Any

import pytest

from tests.scripted_llm import Reply, ToolCall
from traces.models import Message, Trace, TraceEvent
from traces.runner import InvalidRun, RunConfig, TraceNotFound
from traces.selectors import trace_main_path

pytestmark = pytest.mark.django_db


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def write_then_answer(llm: Any, answer: str = "all done") -> None:
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("write", {"path": "notes.txt", "content": "hello"})]),
            Reply(text=answer),
        ],
    )


def sequences(messages: list[Message]) -> list[int]:
    return [m.sequence for m in messages]


def conversation(trace_id: str) -> list[Message]:
    """The main path without the periodic context injections (R7)."""
    return [m for m in trace_main_path(trace_id=trace_id) if m.kind != "context"]


def test_new_run_persists_a_chain_of_messages_and_completes(runner, llm, workspace_root):
    llm.script("utility", ["Write a notes file"])
    write_then_answer(llm)

    result = runner.run_result(user("write notes.txt"), RunConfig())

    trace = Trace.objects.get(pk=result.trace_id)
    assert trace.status == "completed"
    assert trace.result_summary == "all done"
    assert trace.name == "Write a notes file"
    messages = list(Message.objects.filter(trace=trace).order_by("sequence"))
    assert [m.role for m in messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert [m.parent_sequence for m in messages] == [None, 1, 2, 3, 4]
    assert [m.message_id for m in messages][:2] == [f"{trace.trace_id}-0001", f"{trace.trace_id}-0002"]
    assert trace.head_sequence == trace.last_sequence == 5
    assert (workspace_root / trace.trace_id / "notes.txt").read_text() == "hello"
    event_ids = list(TraceEvent.objects.filter(trace=trace).values_list("event_id", flat=True))
    assert event_ids == list(range(1, trace.last_event_id + 1))
    types = list(TraceEvent.objects.filter(trace=trace).values_list("type", flat=True))
    assert types[0] == "run_started" and types[-1] == "final"
    assert {"round_start", "tool_call", "tool_result", "message", "goal_added"} <= set(types)


def test_continue_appends_after_the_head(runner, llm):
    first = runner.run_result(user("hi"), RunConfig())
    llm.script("scripted", ["second answer"])

    second = runner.run_result(user("and now?"), RunConfig(trace_id=first.trace_id))

    path = trace_main_path(trace_id=first.trace_id)
    assert second.status == "completed"
    assert sequences(path) == list(range(1, second.head_sequence + 1))
    talk = conversation(first.trace_id)
    assert [m.role for m in talk][-2:] == ["user", "assistant"]
    assert talk[-2].parent_sequence == first.head_sequence
    assert talk[-1].content == "second answer"


def test_rewind_hangs_new_text_from_the_cut_and_keeps_the_old_branch(runner, llm):
    write_then_answer(llm)
    first = runner.run_result(user("write notes"), RunConfig())
    old_messages = Message.objects.filter(trace_id=first.trace_id).count()
    llm.script("scripted", ["rewound answer"])

    result = runner.run_result(
        user("do something else"), RunConfig(trace_id=first.trace_id, after_sequence=2)
    )

    path = conversation(first.trace_id)
    assert [m.sequence for m in path][:2] == [1, 2]
    new_user = path[2]
    assert new_user.content == "do something else"
    assert new_user.parent_sequence == 2
    assert new_user.sequence == old_messages + 1  # sequences are never reused
    assert path[-1].content == "rewound answer"
    assert result.status == "completed"
    # the old branch is still stored, off the main path
    assert Message.objects.filter(trace_id=first.trace_id, sequence__lte=old_messages).count() == old_messages
    assert not {3, 4, 5} & set(sequences(path))
    request = llm.requests_for("scripted")[-1]
    assert [m["content"] for m in request.messages if m["role"] == "user"] == [
        "write notes",
        "do something else",
    ]


def test_regenerate_reruns_from_the_cut_without_new_messages(runner, llm):
    llm.script("scripted", ["first try"])
    first = runner.run_result(user("say something"), RunConfig())
    llm.script("scripted", ["second try"])

    result = runner.run_result([], RunConfig(trace_id=first.trace_id, after_sequence=2))

    path = conversation(first.trace_id)
    assert [m.content for m in path[1:]] == ["say something", "second try"]
    assert path[-1].parent_sequence in (2, path[-1].sequence - 1)
    assert result.status == "completed"
    rewind = TraceEvent.objects.get(trace_id=first.trace_id, type="rewind")
    assert rewind.payload["after_sequence"] == 2 and rewind.payload["previous_head"] == 3


def test_rewind_to_a_side_branch_message_is_refused_and_changes_nothing(runner, llm):
    first = runner.run_result(user("one"), RunConfig())
    runner.run_result(user("two"), RunConfig(trace_id=first.trace_id, after_sequence=2))
    before = Trace.objects.get(pk=first.trace_id)

    with pytest.raises(InvalidRun, match="after_sequence 3 is on a side branch"):
        runner.run_result(user("three"), RunConfig(trace_id=first.trace_id, after_sequence=3))
    with pytest.raises(InvalidRun, match="after_sequence 99 does not exist"):
        runner.run_result(user("three"), RunConfig(trace_id=first.trace_id, after_sequence=99))

    after = Trace.objects.get(pk=first.trace_id)
    assert (after.status, after.head_sequence, after.last_sequence) == (
        "completed",
        before.head_sequence,
        before.last_sequence,
    )
    assert after.run_owner == ""


def test_continuing_a_finished_trace_without_a_message_is_refused(runner, llm):
    first = runner.run_result(user("one"), RunConfig())
    with pytest.raises(InvalidRun, match="nothing to run"):
        runner.run_result([], RunConfig(trace_id=first.trace_id))


def test_unknown_trace_and_malformed_messages_are_refused(runner, llm, settings):
    settings.AGENT_SEARCH_BACKEND = ""  # web_search cannot run
    with pytest.raises(TraceNotFound):
        runner.run_result(user("x"), RunConfig(trace_id="nope"))
    with pytest.raises(InvalidRun, match=r"messages\[0\].role"):
        runner.run_result([{"role": "robot", "content": "x"}], RunConfig())
    with pytest.raises(InvalidRun, match="at least one user message"):
        runner.run_result([{"role": "system", "content": "x"}], RunConfig())
    with pytest.raises(InvalidRun, match="unknown preset 'nonesuch'"):
        runner.run_result(user("x"), RunConfig(agent_type="nonesuch"))
    with pytest.raises(InvalidRun, match="unknown tool"):
        runner.run_result(user("x"), RunConfig(tools=["teleport"]))
    with pytest.raises(InvalidRun, match="web_search is not available on this server: no search backend"):
        runner.run_result(user("x"), RunConfig(tools=["web_search"]))
    assert not Trace.objects.exists()


def test_no_model_configured_fails_fast_with_a_clear_message(runner, llm, settings):
    settings.AGENT_MODEL = ""
    with pytest.raises(InvalidRun, match="AGENT_MODEL"):
        runner.run_result(user("x"), RunConfig())
    assert not Trace.objects.exists()
    assert llm.requests == []


def test_main_path_is_read_in_one_query(runner, llm, django_assert_num_queries):
    first = runner.run_result(user("one"), RunConfig())
    runner.run_result(user("two"), RunConfig(trace_id=first.trace_id, after_sequence=2))
    trace = Trace.objects.get(pk=first.trace_id)
    with django_assert_num_queries(1):
        path = trace_main_path(trace_id=trace.trace_id, head_sequence=trace.head_sequence)
    assert [m.sequence for m in path if m.kind != "context"] == [1, 2, 4, 5]


def test_main_path_matches_the_parent_chain_after_many_rewinds(runner, llm):
    import random

    rng = random.Random(7)
    llm.script("scripted", [Reply(tool_calls=[ToolCall("list_files", {})]), Reply(text="a")])
    trace_id = runner.run_result(user("start"), RunConfig()).trace_id
    for round_number in range(6):
        path = trace_main_path(trace_id=trace_id)
        points = [m.sequence for m in path if m.role in ("user", "tool")]
        llm.script(
            "scripted", [Reply(tool_calls=[ToolCall("list_files", {})]), Reply(text=f"r{round_number}")]
        )
        runner.run_result(
            user(f"branch {round_number}"), RunConfig(trace_id=trace_id, after_sequence=rng.choice(points))
        )

    by_sequence = {m.sequence: m for m in Message.objects.filter(trace_id=trace_id)}
    expected, cursor = [], Trace.objects.get(pk=trace_id).head_sequence
    while cursor is not None:
        expected.append(cursor)
        cursor = by_sequence[cursor].parent_sequence
    assert sequences(trace_main_path(trace_id=trace_id)) == expected[::-1]
    starts = {m.segment_start for m in by_sequence.values()}
    assert 1 < len(starts) < len(by_sequence)  # linear runs share a segment


def test_run_yields_each_persisted_message_exactly_once(runner, llm):
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("list_files", {}), ToolCall("glob", {"pattern": "*"})]),
            Reply(tool_calls=[ToolCall("list_files", {})]),
            Reply(text="done"),
        ],
    )
    seen: list[str] = []
    result = runner.run_result(
        user("look twice"),
        RunConfig(),
        on_event=lambda item: isinstance(item, Message) and seen.append(item.message_id),
    )
    stored = list(
        Message.objects.filter(trace_id=result.trace_id)
        .order_by("sequence")
        .values_list("message_id", flat=True)
    )
    assert seen == stored
