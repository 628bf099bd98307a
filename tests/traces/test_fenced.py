"""fenced_write: what the one fenced statement (PostgreSQL) or transaction (SQLite) stores
is what the ORM stores, for every field the runner writes; errors and logging are Django's."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from django.db import IntegrityError, connection, models
from django.test.utils import CaptureQueriesContext, isolate_apps

from traces.models import Goal, GoalStatus, Message, Trace, TraceEvent
from traces.observability.models import ModelRequest, RequestPart
from traces.runner.fenced import _finite, _iso, _param_shape, _record_shape, fenced_write

pytestmark = pytest.mark.django_db

on_postgresql = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the one statement is PostgreSQL's"
)

# The models a run's commit inserts (traces/runner/store.py:RunStore.commit), with
# what the model was sent (traces/runner/request_log.py:RequestLog.record).
INSERTED = [Message, TraceEvent, Goal, RequestPart, ModelRequest]
TOKEN = 3
AT = datetime(2026, 3, 29, 3, 30, 6, 999999, tzinfo=timezone(timedelta(hours=2)))
TEXT = 'Grüße, 世界 🌍 \u2028 "quoted" \\ back \' single, {"not": "json"} %s %(x)s'
CALL = {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": '{"path": "a"}'}}
TRACE_VALUES: dict[str, Any] = {
    "status": "running",
    "head_sequence": 2,
    "last_sequence": 2,
    "last_event_id": 2,
    "total_messages": 2,
    "total_cost": 0.000123,
    "total_duration_ms": 2**40,
    "context": {"goal_counter": 2, "experiences": [{"code": "ex_001"}], "note": TEXT},
    "run_settings": {"temperature": 0.25, "tools": ["read"], "memory": False},
    "current_goal_id": "1",
    "heartbeat_at": AT,
    "completed_at": None,
    "needs_attention": True,
    "attention_reason": TEXT,
}
GOAL_CHANGES: dict[str, Any] = {
    "status": GoalStatus.COMPLETED,
    "summary": TEXT,
    "self_stats": {"message_count": 2, "total_cost": 0.5},
    "cumulative_stats": {"message_count": 3, "total_cost": 0.75},
    "sub_trace_ids": ["child-1"],
    "sub_trace_metadata": {"child-1": {"mode": "delegate"}},
    "agent_call_mode": "delegate",
    "type": "agent_call",
}


def rows(trace_id: str) -> list[tuple[type[models.Model], list[Any]]]:
    """Every field of every inserted model with a value, and with its empty value."""
    messages = [
        Message(
            message_id=Message.make_id(trace_id, 1),
            trace_id=trace_id,
            role="assistant",
            sequence=1,
            parent_sequence=None,
            segment_start=1,
            goal_id="1",
            description=TEXT,
            tool_call_id=None,
            name=None,
            content=None,
            tool_calls=[CALL],
            prompt_tokens=120,
            completion_tokens=7,
            cost=0.000123,
            duration_ms=840,
            finish_reason="tool_calls",
            kind="",
            created_at=AT,
        ),
        Message(
            message_id=Message.make_id(trace_id, 2),
            trace_id=trace_id,
            role="tool",
            sequence=2,
            parent_sequence=1,
            segment_start=1,
            goal_id=None,
            description="",
            tool_call_id="call_1",
            name="read",
            content=[{"type": "text", "text": TEXT}, {"nested": [1, 2.5, None, True, {"deep": "ü"}]}],
            tool_calls=None,
            prompt_tokens=None,
            completion_tokens=None,
            cost=None,
            duration_ms=None,
            finish_reason=None,
            kind="summary",
            created_at=datetime(2299, 12, 31, 23, 59, 59, 1, tzinfo=UTC),
        ),
        Message(
            message_id=Message.make_id(trace_id, 3),
            trace_id=trace_id,
            role="assistant",
            sequence=3,
            parent_sequence=2,
            content="[1, 2]",  # text that looks like JSON stays text
            created_at=AT,
        ),
    ]
    events = [
        TraceEvent(
            trace_id=trace_id,
            event_id=1,
            type="message",
            payload={"sequence": 1, "text": TEXT},
            created_at=AT,
        ),
        TraceEvent(trace_id=trace_id, event_id=2, type="final", payload={}, created_at=AT),
    ]
    goals = [
        Goal(
            trace_id=trace_id,
            goal_id="1",
            description=TEXT,
            reason="because",
            parent_id=None,
            position=1.5,
            type="agent_call",
            status=GoalStatus.IN_PROGRESS,
            summary=None,
            sub_trace_ids=["a", "b"],
            agent_call_mode="delegate",
            sub_trace_metadata={"a": {"tokens": 12}},
            self_stats={"message_count": 1, "total_cost": 0.1},
            cumulative_stats={"message_count": 1, "total_cost": 0.1},
            created_at=AT,
        ),
        Goal(trace_id=trace_id, goal_id="2", description="plain", parent_id="1", created_at=AT),
    ]
    parts = [
        RequestPart(trace_id=trace_id, digest="a" * 32, body={"role": "user", "content": TEXT}),
        RequestPart(
            trace_id=trace_id, digest="b" * 32, body=[{"type": "function", "function": {"name": "r"}}]
        ),
    ]
    requests = [
        ModelRequest(
            trace_id=trace_id,
            sequence=1,
            base_sequence=None,
            parts=["a" * 32, [0, 2]],
            tools="b" * 32,
            model="openai/scripted",
            parameters={"temperature": 0.25, "stream": True},
        ),
        ModelRequest(trace_id=trace_id, sequence=3, base_sequence=1, model="m"),
    ]
    return [
        (Message, messages),
        (TraceEvent, events),
        (Goal, goals),
        (RequestPart, parts),
        (ModelRequest, requests),
    ]


def typed(value: Any) -> Any:
    """`value` with its type at every level, so 1 != 1.0 != True and "[1]" != [1]."""
    if isinstance(value, dict):
        return {key: typed(v) for key, v in value.items()}
    if isinstance(value, list):
        return [typed(v) for v in value]
    return (type(value).__name__, value)


def stored(model: type[models.Model], trace_id: str, skip: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Each stored row of `model` in `trace_id` as the ORM loads it, typed, without its keys."""
    keys = {"id", "message_id", "trace", *skip}
    fields = [f for f in model._meta.concrete_fields if f.name not in keys]
    order = {
        Message: "sequence",
        TraceEvent: "event_id",
        Goal: "goal_id",
        RequestPart: "digest",
        ModelRequest: "sequence",
    }[model]
    return [
        {f.name: typed(getattr(row, f.attname)) for f in fields}
        for row in model.objects.filter(trace_id=trace_id).order_by(order)
    ]


@pytest.mark.parametrize("model", INSERTED, ids=lambda model: model.__name__)
def test_every_field_the_runner_inserts_has_a_json_form(model):
    # A field of a kind _record_shape does not know fails here, naming it.
    shape = _record_shape(model)
    assert [column for column, _, _ in shape] == [
        f.column
        for f in model._meta.concrete_fields
        if not (f.primary_key and f.get_internal_type() == "BigAutoField")
    ]


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's parameters")
def test_values_passed_as_they_are_on_sqlite_are_what_the_orm_would_pass():
    # _write_in_transaction skips get_db_prep_save for a str, int, bool or None of
    # the kinds that would return it unchanged; any other value still goes through it.
    odd = Message(
        trace_id="odd", role="tool", sequence=True, prompt_tokens=7.0, content="x"
    )  # a bool, a float
    for model, objects in [*rows("same"), (Message, [odd])]:
        for obj in objects:
            for field, attname, same in _param_shape(model):
                value = getattr(obj, attname)
                if type(value) in same:
                    assert field.get_db_prep_save(field.pre_save(obj, True), connection) is value, field.name
    assert {f.name for f, _, same in _param_shape(Message) if not same} >= {
        "content",
        "tool_calls",
        "cost",
        "created_at",
    }
    sequence = next(same for f, _, same in _param_shape(Message) if f.name == "sequence")
    assert bool not in sequence and float not in sequence  # True and 7.0 become 1 and 7 through the field


@isolate_apps("traces")
def test_a_field_kind_without_a_json_form_is_refused_naming_the_field():
    class Priced(models.Model):
        label = models.CharField(max_length=10)
        amount = models.DecimalField(max_digits=8, decimal_places=2)

        class Meta:
            app_label = "traces"

        def __str__(self) -> str:
            return self.label

    with pytest.raises(TypeError, match=r"^Priced\.amount: no JSON form for a DecimalField$"):
        _record_shape(Priced)


def test_rows_written_by_the_fenced_write_read_back_as_the_orm_saves_them():
    for trace_id in ("fenced", "orm"):
        trace = Trace.objects.create(trace_id=trace_id, run_token=TOKEN)
        Goal.objects.create(trace=trace, goal_id="9", description="changed by the write", created_at=AT)

    stop = fenced_write(
        trace_id="fenced",
        token=TOKEN,
        trace_values=TRACE_VALUES,
        inserts=rows("fenced"),
        updates=[(Goal, {"trace": "fenced", "goal_id": "9"}, GOAL_CHANGES)],
    )
    for model, objects in rows("orm"):
        model.objects.bulk_create(objects)
    Trace.objects.filter(pk="orm").update(**TRACE_VALUES)
    Goal.objects.filter(trace_id="orm", goal_id="9").update(**GOAL_CHANGES)

    assert stop is False
    for model in INSERTED:
        ours, theirs = stored(model, "fenced"), stored(model, "orm")
        assert ours == theirs, model.__name__
    assert len(stored(Message, "fenced")) == 3 and len(stored(Goal, "fenced")) == 3
    fenced, orm = Trace.objects.get(pk="fenced"), Trace.objects.get(pk="orm")
    for name in TRACE_VALUES:
        assert typed(getattr(fenced, name)) == typed(getattr(orm, name)), name
    assert Message.objects.get(trace_id="fenced", sequence=1).created_at == AT


def test_rows_kept_existing_skip_what_is_stored_and_insert_the_rest():
    # What the model was sent is content-addressed per trace: a part an earlier
    # segment stored is skipped; a second message request is still a conflict.
    Trace.objects.create(trace_id="kept", run_token=TOKEN)
    RequestPart.objects.create(trace_id="kept", digest="a" * 32, body={"stored": "first"})
    parts = [
        RequestPart(trace_id="kept", digest="a" * 32, body={"stored": "again"}),
        RequestPart(trace_id="kept", digest="c" * 32, body={"new": True}),
    ]
    request = ModelRequest(trace_id="kept", sequence=1, model="m")

    stop = fenced_write(
        trace_id="kept",
        token=TOKEN,
        trace_values={"head_sequence": 1},
        inserts=[(RequestPart, parts), (ModelRequest, [request])],
        keep_existing={RequestPart},
    )

    assert stop is False
    assert dict(RequestPart.objects.filter(trace_id="kept").values_list("digest", "body")) == {
        "a" * 32: {"stored": "first"},
        "c" * 32: {"new": True},
    }
    assert ModelRequest.objects.filter(trace_id="kept").count() == 1
    with pytest.raises(IntegrityError):
        fenced_write(
            trace_id="kept",
            token=TOKEN,
            trace_values={"head_sequence": 1},
            inserts=[(ModelRequest, [ModelRequest(trace_id="kept", sequence=1, model="m")])],
            keep_existing={RequestPart},
        )


def test_a_write_whose_token_is_stale_stores_nothing_and_says_so():
    Trace.objects.create(trace_id="fenced", run_token=TOKEN + 1, status="running")
    stop = fenced_write(
        trace_id="fenced", token=TOKEN, trace_values={"status": "completed"}, inserts=rows("fenced")
    )
    assert stop is None
    assert not Message.objects.exists() and not TraceEvent.objects.exists() and not Goal.objects.exists()
    assert Trace.objects.get(pk="fenced").status == "running"


def test_the_write_returns_the_stop_flag():
    Trace.objects.create(trace_id="fenced", run_token=TOKEN, stop_requested=True)
    assert fenced_write(trace_id="fenced", token=TOKEN, trace_values={"head_sequence": 0}, inserts=[]) is True


@pytest.mark.django_db(transaction=True)
def test_the_write_goes_through_django_s_cursor_execute_wrappers_and_query_log():
    # In autocommit, as a worker writes: on PostgreSQL the statement is the whole transaction.
    Trace.objects.create(trace_id="fenced", run_token=TOKEN)
    seen: list[str] = []

    def watch(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(watch), CaptureQueriesContext(connection) as log:
        fenced_write(trace_id="fenced", token=TOKEN, trace_values=TRACE_VALUES, inserts=rows("fenced")[:2])

    logged = [query["sql"] for query in log.captured_queries]  # as run: parameters filled in
    fence = [sql for sql in seen if "RETURNING" in sql]
    assert len(fence) == 1 and "traces_trace" in fence[0]
    assert len([sql for sql in logged if "RETURNING" in sql]) == 1
    if connection.vendor == "postgresql":
        assert len(seen) == 1 and seen[0].startswith("WITH t AS (UPDATE")
        assert seen[0].count("jsonb_to_recordset") == 2
        assert len(logged) == 1 and logged[0].startswith(
            'WITH t AS (UPDATE "traces_trace" SET "status" = \'running\''
        )
    assert Message.objects.count() == 3 and TraceEvent.objects.count() == 2


@on_postgresql
@pytest.mark.django_db(transaction=True)
def test_a_database_error_is_django_s_and_leaves_nothing_written():
    # In autocommit, as a worker writes: the statement is its own transaction.
    Trace.objects.create(trace_id="fenced", run_token=TOKEN)
    Message.objects.bulk_create(rows("fenced")[0][1][:1])

    with pytest.raises(IntegrityError):
        fenced_write(
            trace_id="fenced", token=TOKEN, trace_values={"head_sequence": 3}, inserts=rows("fenced")
        )

    assert Message.objects.count() == 1 and not TraceEvent.objects.exists()
    assert Trace.objects.get(pk="fenced").head_sequence == 0  # the fence rolled back with the rest


def test_values_without_a_json_form_are_stored_as_unknown_or_refused():
    assert _finite(math.nan) is None and _finite(-math.inf) is None and _finite(0.5) == 0.5
    assert _iso(AT) == "2026-03-29T03:30:06.999999+02:00" and _iso(None) is None
    with pytest.raises(ValueError, match="naive datetime"):
        _iso(datetime(2026, 3, 29))
