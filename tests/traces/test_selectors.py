"""trace_main_path and trace_main_path_for_run: what they build from raw rows is the ORM's, field by field."""

from __future__ import annotations

import gc
import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from django.db import connection, models
from django.db.models.signals import post_init, pre_init
from django.test.utils import CaptureQueriesContext

from traces.models import Message, Trace
from traces.selectors import (
    _MESSAGE_ATTNAMES,
    PathMessage,
    _decoder,
    _decoders,
    _gc_paused,
    trace_main_path,
    trace_main_path_for_run,
)

pytestmark = pytest.mark.django_db

FIELDS = [field.attname for field in Message._meta.concrete_fields]
CALL = {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": '{"path": "a.txt"}'}}
PICTURE = [
    {"type": "text", "text": "what is in this picture?"},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"}},
]


def tree_trace(messages: list[dict[str, Any]], *, head: int) -> Trace:
    """A trace holding `messages` (sequence, parent_sequence, ... each), segments set as RunStore sets them."""
    trace = Trace.objects.create(trace_id="tree", last_sequence=len(messages), head_sequence=head)
    starts: dict[int, int] = {}
    for fields in messages:
        sequence, parent = fields["sequence"], fields.get("parent_sequence")
        starts[sequence] = starts[parent] if parent == sequence - 1 else sequence
        Message.objects.create(
            message_id=Message.make_id(trace.trace_id, sequence),
            trace=trace,
            segment_start=starts[sequence],
            **fields,
        )
    return trace


def assert_fields_as_the_orm_loads_them(
    trace: Trace, path: list[Any], fields: Sequence[str]
) -> dict[int, Message]:
    """Each of `fields` of every message on `path` equals the ORM's value, type included; the ORM's messages."""
    loaded = {m.sequence: m for m in Message.objects.filter(trace=trace)}
    for message in path:
        expected = loaded[message.sequence]
        for name in fields:
            value, orm_value = getattr(message, name), getattr(expected, name)
            assert (value, type(value)) == (orm_value, type(orm_value)), (message.sequence, name)
        assert message.created_at.tzinfo == expected.created_at.tzinfo
    return loaded


@pytest.fixture
def branched() -> Trace:
    """Main path 1-2-3-4-7-8-10; side branches 5-6 (from 4) and 9 (from 8)."""
    at = datetime(2026, 3, 29, 1, 30, 5, 123456, tzinfo=UTC)
    return tree_trace(
        [
            {"sequence": 1, "role": "system", "content": "Be brief.", "created_at": at},
            {
                "sequence": 2,
                "parent_sequence": 1,
                "role": "user",
                "content": PICTURE,
                "goal_id": "1",
                "created_at": at + timedelta(microseconds=876544),  # a whole second: no fraction stored
            },
            {
                "sequence": 3,
                "parent_sequence": 2,
                "role": "assistant",
                "content": None,
                "tool_calls": [CALL],
                "prompt_tokens": 120,
                "completion_tokens": 7,
                "cost": 0.000123,
                "duration_ms": 840,
                "finish_reason": "tool_calls",
                "reasoning": "First read it — 世界 \u2028 then answer.",
                "reasoning_tokens": 9,
                "description": "reads a.txt",
                "created_at": datetime(2026, 3, 29, 3, 30, 6, 999999, tzinfo=timezone(timedelta(hours=2))),
            },
            {
                "sequence": 4,
                "parent_sequence": 3,
                "role": "tool",
                "content": 'Grüße, 世界 🌍 \u2028 "quoted" \\ back',
                "tool_call_id": "call_1",
                "name": "read",
                "created_at": at + timedelta(seconds=2),
            },
            {"sequence": 5, "parent_sequence": 4, "role": "assistant", "content": "abandoned"},
            {"sequence": 6, "parent_sequence": 5, "role": "user", "content": "abandoned too"},
            {"sequence": 7, "parent_sequence": 4, "role": "user", "content": "", "kind": "context"},
            {"sequence": 8, "parent_sequence": 7, "role": "assistant", "content": "[1, 2]"},
            {"sequence": 9, "parent_sequence": 8, "role": "user", "content": "side"},
            {
                "sequence": 10,
                "parent_sequence": 8,
                "role": "assistant",
                "content": "done",
                "kind": "summary",
                "created_at": datetime(2299, 12, 31, 23, 59, 59, 1, tzinfo=UTC),
            },
        ],
        head=10,
    )


def test_main_path_messages_equal_orm_loaded_ones_field_by_field(branched, django_assert_num_queries):
    with django_assert_num_queries(1):
        path = trace_main_path(trace_id=branched.trace_id, head_sequence=branched.head_sequence)

    assert [m.sequence for m in path] == [1, 2, 3, 4, 7, 8, 10]
    loaded = assert_fields_as_the_orm_loads_them(branched, path, FIELDS)
    for message in path:
        expected = loaded[message.sequence]
        assert (message._state.adding, message._state.db) == (False, expected._state.db)
        assert message.to_llm_dict() == expected.to_llm_dict()
    by_sequence = {m.sequence: m for m in path}
    assert by_sequence[2].content == PICTURE
    assert by_sequence[3].content is None and by_sequence[3].tool_calls == [CALL]
    assert by_sequence[4].content == 'Grüße, 世界 🌍 \u2028 "quoted" \\ back'
    assert by_sequence[8].content == "[1, 2]"
    assert by_sequence[3].created_at == datetime(2026, 3, 29, 1, 30, 6, 999999, tzinfo=UTC)


def test_the_fixture_gives_every_message_field_a_value_so_each_is_compared(branched):
    # A new Message field fails here until the fixture sets it: the comparisons
    # above and below then check the bulk decoding of it against the ORM's.
    path = list(Message.objects.filter(trace=branched, sequence__in=[1, 2, 3, 4, 7, 8, 10]))
    for field in Message._meta.concrete_fields:
        empty = [None, "", field.get_default()]
        assert any(getattr(message, field.attname) not in empty for message in path), (
            f"Message.{field.name}: give it a value on the main path of `branched`"
        )


def test_fast_built_messages_hold_what_model_init_gives_an_orm_loaded_one(branched):
    # Model.__init__ / from_db growing an instance attribute (a Django upgrade)
    # shows here: the fast path fills __dict__ itself.
    for message in trace_main_path(trace_id=branched.trace_id):
        loaded = Message.objects.get(pk=message.pk)
        assert vars(message).keys() == vars(loaded).keys()
        assert message._state.fields_cache == {}  # made on first use, as Model.__init__ uses it
        assert vars(message._state) == vars(loaded._state)
        for name in (f.attname for f in Message._meta.concrete_fields):
            assert (getattr(message, name), type(getattr(message, name))) == (
                getattr(loaded, name),
                type(getattr(loaded, name)),
            ), name
        assert message == loaded and hash(message) == hash(loaded)
        assert message.get_deferred_fields() == set() and message.trace_id == branched.trace_id


def test_a_fast_built_message_refreshes_from_the_database(branched):
    message = trace_main_path(trace_id=branched.trace_id)[2]
    Message.objects.filter(pk=message.pk).update(content=["changed"], description="elsewhere")

    message.refresh_from_db(fields=["content"])
    assert message.content == ["changed"] and message.description == "reads a.txt"
    message.refresh_from_db()
    assert message.description == "elsewhere" and not message._state.adding


def test_main_path_from_a_side_branch_and_from_nothing(branched):
    side = trace_main_path(trace_id=branched.trace_id, head_sequence=6)
    assert [m.sequence for m in side] == [1, 2, 3, 4, 5, 6]
    assert side[-1].content == "abandoned too"
    assert trace_main_path(trace_id=branched.trace_id, head_sequence=99) == []
    Trace.objects.filter(pk=branched.pk).update(head_sequence=0)
    assert trace_main_path(trace_id=branched.trace_id) == []


def test_saving_a_main_path_message_updates_its_row(branched):
    message = trace_main_path(trace_id=branched.trace_id)[-1]
    message.description = "edited"

    with CaptureQueriesContext(connection) as queries:
        message.save()

    assert len(queries.captured_queries) == 1
    assert queries.captured_queries[0]["sql"].startswith("UPDATE")
    assert Message.objects.filter(trace=branched).count() == 10
    assert Message.objects.get(pk=message.pk).description == "edited"
    assert message.trace == branched


def test_main_path_goes_through_model_init_when_someone_listens_before_init(branched):
    calls: list[tuple[Any, ...]] = []

    def record(sender: type[Message], args: tuple[Any, ...], **kwargs: Any) -> None:
        calls.append(args)

    pre_init.connect(record, sender=Message)
    try:
        path = trace_main_path(trace_id=branched.trace_id)
    finally:
        pre_init.disconnect(record, sender=Message)

    assert len(calls) == 7 and all(len(args) == len(_MESSAGE_ATTNAMES) for args in calls)
    assert [m.sequence for m in path] == [1, 2, 3, 4, 7, 8, 10]
    assert path[1].content == PICTURE and path[2].tool_calls == [CALL] and not path[1]._state.adding


def test_main_path_goes_through_model_init_when_someone_listens(branched):
    seen: list[int] = []

    def record(sender: type[Message], instance: Message, **kwargs: Any) -> None:
        seen.append(instance.sequence)

    post_init.connect(record, sender=Message)
    try:
        path = trace_main_path(trace_id=branched.trace_id)
    finally:
        post_init.disconnect(record, sender=Message)

    assert seen == [1, 2, 3, 4, 7, 8, 10]
    assert path[1].content == PICTURE and not path[1]._state.adding
    assert path[2].created_at == Message.objects.get(pk=path[2].pk).created_at


def test_run_path_carries_the_orm_values_of_its_fields(branched, django_assert_num_queries):
    with django_assert_num_queries(1):
        path = trace_main_path_for_run(trace_id=branched.trace_id, head_sequence=branched.head_sequence)

    assert [m.sequence for m in path] == [1, 2, 3, 4, 7, 8, 10]
    assert all(isinstance(message, PathMessage) for message in path)
    loaded = assert_fields_as_the_orm_loads_them(branched, path, PathMessage._fields)
    for message in path:
        assert message.to_llm_dict() == loaded[message.sequence].to_llm_dict()
    by_sequence = {m.sequence: m for m in path}
    assert by_sequence[2].content == PICTURE
    assert by_sequence[3].to_llm_dict() == {"role": "assistant", "content": None, "tool_calls": [CALL]}
    assert by_sequence[4].to_llm_dict() == {
        "role": "tool",
        "content": 'Grüße, 世界 🌍 \u2028 "quoted" \\ back',
        "tool_call_id": "call_1",
        "name": "read",
    }
    assert by_sequence[10].kind == "summary"


def test_run_path_from_a_side_branch_from_the_head_and_from_nothing(branched):
    side = trace_main_path_for_run(trace_id=branched.trace_id, head_sequence=6)
    assert [(m.sequence, m.content) for m in side[-2:]] == [(5, "abandoned"), (6, "abandoned too")]
    assert [m.sequence for m in trace_main_path_for_run(trace_id=branched.trace_id)] == [1, 2, 3, 4, 7, 8, 10]
    assert trace_main_path_for_run(trace_id=branched.trace_id, head_sequence=99) == []
    Trace.objects.filter(pk=branched.pk).update(head_sequence=0)
    assert trace_main_path_for_run(trace_id=branched.trace_id) == []


def test_main_path_reads_leave_the_garbage_collector_as_they_found_it(branched):
    assert gc.isenabled()
    trace_main_path_for_run(trace_id=branched.trace_id)
    trace_main_path(trace_id=branched.trace_id)
    assert gc.isenabled()

    gc.disable()
    try:
        trace_main_path_for_run(trace_id=branched.trace_id)
        trace_main_path(trace_id=branched.trace_id)
        assert not gc.isenabled()  # someone else's pause is not ended by ours
    finally:
        gc.enable()

    with pytest.raises(ZeroDivisionError), _gc_paused():
        assert not gc.isenabled()
        1 / 0  # noqa: B018
    assert gc.isenabled()


def test_nested_pauses_resume_the_collector_only_when_the_outermost_ends():
    assert gc.isenabled()
    with _gc_paused():
        with _gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_overlapping_pauses_in_threads_resume_the_collector_when_the_last_ends():
    first_in, first_may_leave, first_left = threading.Event(), threading.Event(), threading.Event()

    def first() -> None:
        with _gc_paused():
            first_in.set()
            first_may_leave.wait(5)
        first_left.set()

    thread = threading.Thread(target=first)
    thread.start()
    assert first_in.wait(5)
    with _gc_paused():
        first_may_leave.set()
        assert first_left.wait(5)
        thread.join(5)
        assert not gc.isenabled()  # the first thread left while this one still decodes
    assert gc.isenabled()


def test_many_threads_pausing_at_once_never_see_the_collector_on_and_leave_it_on():
    seen_on: list[int] = []
    start = threading.Barrier(8)

    def pause_often() -> None:
        start.wait(5)
        for _ in range(300):
            with _gc_paused():
                if gc.isenabled():
                    seen_on.append(1)

    threads = [threading.Thread(target=pause_often) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert seen_on == [] and gc.isenabled()


def test_the_main_path_readers_decode_every_message_field_and_refuse_an_unknown_kind():
    # Every field of today's Message has a decoder or needs none; a new kind fails loudly, named.
    assert {index for index, _ in _decoders(_MESSAGE_ATTNAMES)} == {
        _MESSAGE_ATTNAMES.index(name) for name in ("content", "tool_calls", "created_at")
    }
    assert len(_decoders(PathMessage._fields)) == 3
    flagged = models.BooleanField(default=False)  # 0/1 on SQLite: the ORM converts it, the readers would not
    flagged.set_attributes_from_name("flagged")
    with pytest.raises(
        TypeError, match=r"^Message\.flagged: the main-path readers cannot decode a BooleanField"
    ):
        _decoder(flagged)


def test_main_path_after_a_sequence_is_the_tail_of_the_path(branched, django_assert_num_queries):
    with django_assert_num_queries(1):
        tail = trace_main_path(trace_id=branched.trace_id, head_sequence=10, after_sequence=4)

    assert [m.sequence for m in tail] == [7, 8, 10]
    assert [m.sequence for m in trace_main_path(trace_id=branched.trace_id, after_sequence=5)] == [7, 8, 10]
    assert [
        m.sequence for m in trace_main_path(trace_id=branched.trace_id, head_sequence=6, after_sequence=3)
    ] == [
        4,
        5,
        6,
    ]
    assert trace_main_path(trace_id=branched.trace_id, after_sequence=10) == []
