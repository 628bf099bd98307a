"""RunStore commits: everything of a step lands together, fenced by the run's lease token."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from traces.goal_tree import GoalTree
from traces.models import Goal, GoalStatus, Message, Trace, TraceEvent
from traces.runner import LeaseLost
from traces.runner.config import RunConflict, TraceNotFound
from traces.runner.store import RunStore, trace_claim

pytestmark = pytest.mark.django_db

on_postgresql = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the one-statement commit is PostgreSQL's"
)

CONTENTS: list[Any] = [
    "plain text",
    "ünïcödé — 漢字 🙂 and a 'quote' \"double\" \\ backslash {} [] ,",
    [{"type": "text", "text": "multimodal"}, {"type": "image_url", "image_url": {"url": "data:x"}}],
    None,
    "",
]


def claimed_store(trace_id: str = "t-store") -> RunStore:
    Trace.objects.create(trace_id=trace_id, task="store test", status="completed")
    trace = trace_claim(trace_id=trace_id, owner="test:1")
    store = RunStore(trace)
    store.goal_tree = GoalTree.load(trace, emit=store.emit)
    return store


def buffer_messages(store: RunStore, contents: list[Any]) -> list[Message]:
    trace_id = store.trace.trace_id
    added = []
    for content in contents:
        sequence = store.next_sequence()
        message = Message(
            message_id=Message.make_id(trace_id, sequence),
            trace_id=trace_id,
            role="tool" if content is None else "assistant",
            sequence=sequence,
            parent_sequence=sequence - 1 or None,
            goal_id="1",
            description="d",
            content=content,
            tool_calls=[{"id": "c1", "type": "function", "function": {"name": "note", "arguments": "{}"}}]
            if content is None
            else None,
            tool_call_id="c1" if content is None else None,
            prompt_tokens=3,
            completion_tokens=None,
            cost=0.25 if content == "" else None,
            created_at=timezone.now(),
        )
        added.append(store.add_message(message))
    return added


def stored(message: Message) -> dict[str, Any]:
    fields = [f.attname for f in Message._meta.concrete_fields]
    return {f: getattr(message, f) for f in fields}


def test_a_commit_stores_messages_events_goals_and_trace_totals_as_buffered():
    store = claimed_store()
    goal = store.goal_tree.add("Survey", reason="test")
    store.goal_tree.focus(goal)
    added = buffer_messages(store, CONTENTS)
    store.emit("tool_result", {"nested": {"list": [1, 2.5, None, "ü"]}, "flag": True})
    store.commit(final=True)

    rows = Message.objects.filter(trace_id="t-store").order_by("sequence")
    assert [stored(m) for m in rows] == [stored(m) for m in added]
    events = list(TraceEvent.objects.filter(trace_id="t-store").order_by("event_id"))
    assert [e.event_id for e in events] == list(range(1, len(events) + 1))
    assert events[-1].payload == {"nested": {"list": [1, 2.5, None, "ü"]}, "flag": True}
    assert [e.type for e in events].count("message") == len(CONTENTS)
    trace = Trace.objects.get(pk="t-store")
    assert (trace.total_messages, trace.head_sequence, trace.last_event_id) == (
        len(CONTENTS),
        added[-1].sequence,
        events[-1].event_id,
    )
    assert trace.total_cost == 0.25
    saved = Goal.objects.get(trace_id="t-store", goal_id=goal.goal_id)
    assert saved.status == GoalStatus.IN_PROGRESS
    assert saved.self_stats["message_count"] == len(CONTENTS)


def test_a_commit_after_the_lease_was_taken_raises_and_writes_nothing():
    store = claimed_store()
    goal = store.goal_tree.add("Survey", reason="test")
    store.commit()
    Trace.objects.filter(pk="t-store").update(run_token=F("run_token") + 1)  # another worker claims
    store.goal_tree.focus(goal)
    buffer_messages(store, ["lost"])

    with pytest.raises(LeaseLost):
        store.commit()

    assert not Message.objects.filter(trace_id="t-store").exists()
    assert Goal.objects.get(trace_id="t-store", goal_id=goal.goal_id).status == GoalStatus.PENDING
    assert Trace.objects.get(pk="t-store").total_messages == 0


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_a_lost_lease_also_writes_nothing():
    # Runs in autocommit, as a worker does: the fenced statement is its own transaction.
    store = claimed_store()
    buffer_messages(store, ["kept"])
    store.commit()
    Trace.objects.filter(pk="t-store").update(run_token=F("run_token") + 1)
    buffer_messages(store, ["lost"])
    with pytest.raises(LeaseLost):
        store.commit()
    assert list(Message.objects.filter(trace_id="t-store").values_list("content", flat=True)) == ["kept"]
    assert TraceEvent.objects.filter(trace_id="t-store").count() == 1  # the message event of "kept"
    assert Trace.objects.get(pk="t-store").total_messages == 1


def test_a_failed_commit_inside_a_transaction_leaves_it_usable():
    store = claimed_store()
    buffer_messages(store, ["first"])
    store.commit()
    with transaction.atomic():
        store.trace.last_sequence -= 1  # the next message reuses a stored sequence
        buffer_messages(store, ["duplicate"])
        with pytest.raises(IntegrityError):
            store.commit()
        assert Message.objects.filter(trace_id="t-store").count() == 1  # still queryable


@on_postgresql
@pytest.mark.django_db(transaction=True)
def test_on_postgresql_a_step_commits_in_one_statement(django_assert_num_queries):
    # In autocommit, as in a worker (inside a transaction it takes a savepoint too).
    store = claimed_store()
    goal = store.goal_tree.add("Survey", reason="test")
    store.goal_tree.focus(goal)
    buffer_messages(store, ["a", None])
    store.emit("round_start", {"iteration": 0})
    with django_assert_num_queries(1):
        store.commit(final=True)
    assert Message.objects.filter(trace_id="t-store").count() == 2
    assert Goal.objects.get(trace_id="t-store", goal_id=goal.goal_id).status == GoalStatus.IN_PROGRESS


@on_postgresql
@pytest.mark.django_db(transaction=True)
def test_on_postgresql_what_the_model_was_sent_commits_in_the_same_statement(django_assert_num_queries):
    from traces.observability.models import ModelRequest, RequestPart

    store = claimed_store()
    RequestPart.objects.create(trace_id="t-store", digest="a" * 32, body={"stored": "before"})
    buffer_messages(store, ["a"])
    parts = [
        RequestPart(trace_id="t-store", digest="a" * 32, body={"stored": "again"}),
        RequestPart(trace_id="t-store", digest="b" * 32, body={"role": "user", "content": "a"}),
    ]
    store.insert(RequestPart, parts, keep_existing=True)
    store.insert(ModelRequest, [ModelRequest(trace_id="t-store", sequence=1, parts=["b" * 32], model="m")])
    with django_assert_num_queries(1):
        store.commit()
    with django_assert_num_queries(1):
        store.commit()  # the rows went with the first commit only
    assert dict(RequestPart.objects.filter(trace_id="t-store").values_list("digest", "body")) == {
        "a" * 32: {"stored": "before"},
        "b" * 32: {"role": "user", "content": "a"},
    }
    assert list(ModelRequest.objects.values_list("trace_id", "sequence", "parts")) == [
        ("t-store", 1, ["b" * 32])
    ]


def test_rows_inserted_with_a_commit_are_not_written_by_a_run_that_lost_its_lease():
    from traces.observability.models import ModelRequest

    store = claimed_store()
    store.insert(ModelRequest, [ModelRequest(trace_id="t-store", sequence=1, model="m")])
    Trace.objects.filter(pk="t-store").update(run_token=F("run_token") + 1)
    with pytest.raises(LeaseLost):
        store.commit()
    assert not ModelRequest.objects.exists()


def test_a_commit_reads_the_stop_flag():
    store = claimed_store()
    buffer_messages(store, ["a"])
    store.commit()
    assert store.stop_seen is False and store.polled_at > 0
    Trace.objects.filter(pk="t-store").update(stop_requested=True)
    store.emit("round_start", {"iteration": 1})
    store.commit()
    assert store.stop_seen is True


def test_sqlite_older_than_3_35_is_refused_by_a_system_check():
    from django.core import checks

    from traces.checks import sqlite_version_problem

    assert sqlite_version_problem((3, 31, 1)) == (
        "SQLite 3.31.1 is too old: agentsite needs 3.35 or newer (UPDATE ... RETURNING)."
    )
    assert sqlite_version_problem((3, 40, 1)) is None
    assert not [e for e in checks.run_checks(databases=["default"]) if e.id == "traces.E001"]


def test_a_message_with_a_nan_cost_is_stored_with_an_unknown_cost():
    store = claimed_store()
    [message] = buffer_messages(store, ["priced oddly"])
    message.cost = float("nan")
    store.commit()
    assert Message.objects.get(trace_id="t-store").cost is None


def test_a_claim_takes_a_free_lease_in_one_statement_and_returns_the_row_as_stored(
    django_assert_num_queries,
):
    Trace.objects.create(
        trace_id="t-claim",
        task="claim test",
        status="failed",
        error_message="earlier failure",
        tools=[{"name": "write"}],
        llm_params={"temperature": 0.5},
        run_token=4,
    )
    with django_assert_num_queries(1):
        claimed = trace_claim(trace_id="t-claim", owner="test:claim")
    stored = Trace.objects.get(pk="t-claim")
    fields = [field.attname for field in Trace._meta.concrete_fields]
    assert {f: getattr(claimed, f) for f in fields} == {f: getattr(stored, f) for f in fields}
    assert (stored.status, stored.run_token, stored.run_owner) == ("running", 5, "test:claim")
    assert stored.error_message is None and stored.stop_requested is False
    assert claimed.tools == [{"name": "write"}] and claimed.llm_params == {"temperature": 0.5}
    assert claimed.heartbeat_at is not None and claimed.heartbeat_at.tzinfo is not None


def test_a_live_lease_is_refused_and_a_stale_one_taken_over(settings):
    settings.AGENT_LEASE_SECONDS = 60
    now = timezone.now()
    Trace.objects.create(
        trace_id="t-held", task="held", status="running", run_owner="w:1", heartbeat_at=now, run_token=2
    )
    with pytest.raises(RunConflict, match="already running \\(worker w:1"):
        trace_claim(trace_id="t-held", owner="w:2")
    assert Trace.objects.get(pk="t-held").run_token == 2
    Trace.objects.filter(pk="t-held").update(heartbeat_at=now - timedelta(seconds=61))
    assert trace_claim(trace_id="t-held", owner="w:2").run_token == 3
    with pytest.raises(TraceNotFound):
        trace_claim(trace_id="t-missing", owner="w:2")


def test_a_reservation_is_claimed_once_and_only_with_its_token():
    Trace.objects.create(
        trace_id="t-reserved", task="reserved", status="queued", run_token=7, run_request={"messages": []}
    )
    with pytest.raises(RunConflict, match="reservation 6"):
        trace_claim(trace_id="t-reserved", owner="w:1", reserved_token=6)
    claimed = trace_claim(trace_id="t-reserved", owner="w:1", reserved_token=7)
    # The request stays until the run's first commit (the sweep's, should the worker die first).
    assert (claimed.status, claimed.run_token, claimed.run_request) == ("running", 8, {"messages": []})
    with pytest.raises(RunConflict, match="reservation 7"):  # a duplicate delivery claims nothing
        trace_claim(trace_id="t-reserved", owner="w:2", reserved_token=7)
    assert Trace.objects.get(pk="t-reserved").run_owner == "w:1"
