"""AGENT_STREAM=watched (issue 18): a run streams a model call only while a watch socket
follows its trace; otherwise the call is plain. Through the real runner and litellm
against the scripted model, and the real consumer through the ASGI stack."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import timedelta
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.utils import timezone

from tests.factories import make_trace, make_user
from tests.scripted_llm import Reply, ToolCall
from tests.traces.test_watch import child_with_events, trace_with_events, tree_query, user_with_token, watch
from traces.events.presence import WATCH_SECONDS, mark_watched, watched
from traces.models import ModelRequest, Trace, TraceEvent, TraceWatch
from traces.runner import AgentRunner, RunConfig
from traces.services.delete import trace_delete


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def agent_calls(llm: Any) -> list[bool]:
    """Whether each of the run's own model calls streamed (not the utility model's naming call)."""
    return [r.stream for r in llm.requests if r.get("tools")]


def tokens_of(trace_id: str) -> str:
    events = TraceEvent.objects.filter(trace_id=trace_id, type="token").order_by("event_id")
    return "".join(e.payload["text"] for e in events)


@pytest.mark.django_db
def test_an_unwatched_run_calls_plainly_and_a_watched_one_streams(runner: AgentRunner, llm: Any, settings):
    settings.AGENT_STREAM = "watched"
    llm.script("scripted", [Reply(text="nobody sees this", chunks=["nobody ", "sees ", "this"])])
    first = runner.run_result(user("one"), RunConfig())
    assert first.status == "completed"
    assert agent_calls(llm) == [False]
    assert tokens_of(first.trace_id) == ""  # no token events: the reply is its message
    assert ModelRequest.objects.get(trace_id=first.trace_id).parameters["stream"] is False

    assert mark_watched([first.trace_id]) and watched(first.trace_id)
    llm.script("scripted", [Reply(text="now you see it", chunks=["now ", "you ", "see ", "it"])])
    llm.requests.clear()
    second = runner.run_result(user("two"), RunConfig(trace_id=first.trace_id))
    assert second.status == "completed"
    assert agent_calls(llm) == [True]
    assert tokens_of(first.trace_id) == "now you see it"


@pytest.mark.django_db
def test_a_mark_that_ran_out_no_longer_streams_and_a_run_setting_wins(
    runner: AgentRunner, llm: Any, settings
):
    settings.AGENT_STREAM = "watched"
    llm.script("scripted", [Reply(text="a", chunks=["a"])] * 3)
    first = runner.run_result(user("one"), RunConfig())
    TraceWatch.objects.create(trace_id=first.trace_id, until=timezone.now() - timedelta(seconds=1))
    assert not watched(first.trace_id)
    runner.run_result(user("two"), RunConfig(trace_id=first.trace_id))
    # An explicit run setting is not "watched": stream=True streams with no one watching.
    runner.run_result(user("three"), RunConfig(trace_id=first.trace_id, stream=True))
    assert agent_calls(llm) == [False, False, True]


@pytest.mark.django_db
def test_the_run_own_token_listener_counts_as_watching(runner: AgentRunner, llm: Any, settings):
    settings.AGENT_STREAM = "watched"
    llm.script("scripted", [Reply(text="for the terminal", chunks=["for ", "the ", "terminal"])])
    heard: list[str] = []
    result = runner.run_result(user("cli"), RunConfig(on_token=heard.append))
    assert agent_calls(llm) == [True] and "".join(heard) == "for the terminal"
    assert tokens_of(result.trace_id) == "for the terminal"


@pytest.mark.django_db
def test_by_default_every_call_streams_and_nothing_is_marked(runner: AgentRunner, llm: Any, settings):
    assert settings.AGENT_STREAM is True
    llm.script(
        "scripted",
        [Reply(tool_calls=[ToolCall("list_files", {"path": "."})]), Reply(text="done", chunks=["do", "ne"])],
    )
    result = runner.run_result(user("look"), RunConfig())
    assert agent_calls(llm) == [True, True] and tokens_of(result.trace_id) == "done"


@pytest.mark.django_db(transaction=True)  # autocommit, as on the watch-read threads
def test_a_mark_for_a_trace_that_is_gone_fails_quietly():
    assert mark_watched([]) is True
    assert mark_watched(["no-such-trace"]) is False  # the foreign key refuses it; the watch goes on
    assert not TraceWatch.objects.exists()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_watch_socket_marks_its_trace_and_its_sub_traces(settings):
    settings.AGENT_STREAM = "watched"
    owner, key = await user_with_token("integrator")
    root = await trace_with_events(owner, 1)
    child = await child_with_events(root, "explore-001-a", 1)
    comm = watch(root, token=key, query=tree_query())
    assert (await comm.connect())[0]
    await comm.receive_json_from(timeout=3)
    await comm.receive_json_from(timeout=3)

    marks = await database_sync_to_async(lambda: dict(TraceWatch.objects.values_list("trace_id", "until")))()
    assert set(marks) == {root, child}
    left = marks[root] - timezone.now()
    assert timedelta(seconds=WATCH_SECONDS - 5) < left <= timedelta(seconds=WATCH_SECONDS)
    assert await database_sync_to_async(watched)(child)
    await comm.disconnect()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_socket_marks_again_before_its_mark_runs_out(settings, monkeypatch):
    from traces.events import consumers

    settings.AGENT_STREAM = "watched"
    settings.AGENT_WATCH_POLL_SECONDS = 30  # the mark's turn, not the poll, wakes the pump
    monkeypatch.setattr(consumers, "MARK_EVERY", 0.3)
    owner, key = await user_with_token("integrator")
    root = await trace_with_events(owner, 1)
    comm = watch(root, token=key)
    assert (await comm.connect())[0]
    await comm.receive_json_from(timeout=3)
    first = await database_sync_to_async(lambda: TraceWatch.objects.get(trace_id=root).until)()
    await comm.receive_nothing(timeout=1.0)
    again = await database_sync_to_async(lambda: TraceWatch.objects.get(trace_id=root).until)()
    assert again > first
    await comm.disconnect()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_sockets_mark_nothing_unless_streaming_is_watched(settings):
    assert settings.AGENT_STREAM is True
    owner, key = await user_with_token("integrator")
    root = await trace_with_events(owner, 1)
    comm = watch(root, token=key)
    assert (await comm.connect())[0]
    await comm.receive_json_from(timeout=3)
    await comm.disconnect()
    assert not await database_sync_to_async(TraceWatch.objects.exists)()


@pytest.mark.django_db
def test_a_watched_mark_goes_with_its_trace():
    expert = make_user("expert", staff=True)
    trace = make_trace(expert)
    assert mark_watched([trace.trace_id])
    trace_delete(user=expert, trace_id=trace.trace_id)
    assert not Trace.objects.filter(pk=trace.trace_id).exists() and not TraceWatch.objects.exists()


@pytest.mark.django_db
def test_a_process_reads_the_marks_once_a_while_and_its_own_marks_at_once(monkeypatch):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from traces.events import presence

    monkeypatch.setattr(presence, "_marks", presence._Marks())
    monkeypatch.setattr(presence, "READ_EVERY", 0.3)
    owner = make_user("owner")
    mine, theirs, nobody = (make_trace(owner).trace_id for _ in range(3))
    with CaptureQueriesContext(connection) as queries:
        assert not any(watched(nobody) for _ in range(100))
    assert len(queries.captured_queries) == 1  # 100 model calls, one read of the marks

    assert mark_watched([mine]) and watched(mine)  # this process's mark counts at once
    # Another process's mark (the web server's socket) counts from the next read on.
    TraceWatch.objects.create(trace_id=theirs, until=timezone.now() + timedelta(seconds=WATCH_SECONDS))
    time.sleep(0.3)
    assert watched(theirs) and watched(mine) and not watched(nobody)


@pytest.mark.django_db
def test_with_many_marks_held_a_call_reads_its_own_row(monkeypatch):
    from traces.events import presence

    monkeypatch.setattr(presence, "_marks", presence._Marks())
    monkeypatch.setattr(presence, "MANY", 2)
    owner = make_user("owner")
    traces = [make_trace(owner).trace_id for _ in range(4)]
    until = timezone.now() + timedelta(seconds=WATCH_SECONDS)
    TraceWatch.objects.bulk_create(TraceWatch(trace_id=t, until=until) for t in traces[:3])
    assert [watched(t) for t in traces] == [True, True, True, False]


def django_with(value: str, code: str) -> subprocess.CompletedProcess[str]:
    """`code` run after django.setup() in a fresh interpreter with AGENT_STREAM=`value`."""
    env = {**os.environ, "AGENT_STREAM": value, "DJANGO_SETTINGS_MODULE": "agentsite.settings"}
    script = f"import django; django.setup(); {code}"
    return subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("value", "read"),
    [("watched", "'watched'"), (" Watched ", "'watched'"), ("false", "False"), ("", "True")],
)
def test_agent_stream_reads_true_false_or_watched(value: str, read: str) -> None:
    done = django_with(value, "from django.conf import settings; print(repr(settings.AGENT_STREAM))")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == read


def test_a_bad_agent_stream_stops_start_up_naming_it() -> None:
    done = django_with("sometimes", "pass")
    assert done.returncode != 0 and "AGENT_STREAM='sometimes' is not true, false or watched" in done.stderr
