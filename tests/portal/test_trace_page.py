"""The trace page's panels, pages of a long path and the tree on demand (P2, issue 15)."""

from __future__ import annotations

import re
import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from bench.harness import populate_trace
from memory.models import Experience, ExperienceSource
from portal.paging import PAGE_SIZE
from tests.factories import make_trace
from traces.collaboration.humans import human_request_create
from traces.models import Message, Trace, TraceEvent, TraceStatus

pytestmark = pytest.mark.django_db


def long_trace(owner, length: int) -> Trace:
    trace_id = str(uuid.uuid4())
    populate_trace(trace_id, length)
    Trace.objects.filter(pk=trace_id).update(owner=owner)
    return Trace.objects.get(pk=trace_id)


def sequences_shown(html: str) -> list[int]:
    """Messages on the page: each article, and each tool result folded under its call."""
    return sorted(int(n) for n in re.findall(r' id="m(\d+)"', html))


def queries(client, url: str, **params) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url, params)
    assert response.status_code == 200
    return len(captured.captured_queries)


def test_a_long_path_shows_its_newest_page_and_pages_back(browser_client, integrator):
    trace = long_trace(integrator, 1_000)  # plus 2 side branches of 10
    client = browser_client(integrator)
    url = f"/traces/{trace.trace_id}/"

    newest = client.get(url).content.decode()
    shown = sequences_shown(newest)
    assert shown[-1] == trace.head_sequence
    assert PAGE_SIZE - 1 <= len(shown) <= PAGE_SIZE  # a result starts no page: its call comes first
    assert "of 1,000 on this path" in newest
    assert 'data-main="1"' in newest  # the newest page of the main path follows the run

    older = re.search(r'href="\?before=(\d+)"', newest).group(1)
    before = client.get(url, {"before": older}).content.decode()
    previous = sequences_shown(before)
    assert previous[-1] < shown[0] and 'data-main="0"' in before
    assert Message.objects.get(trace=trace, sequence=previous[0]).role != "tool"

    middle = client.get(url, {"at": 500}).content.decode()
    assert 500 in sequences_shown(middle) or 501 in sequences_shown(middle)
    assert "Newer ›" in middle and "‹ Older" in middle

    first = client.get(url, {"before": 5}).content.decode()
    assert sequences_shown(first)[0] == 1 and "‹ Older" not in first


def test_the_page_and_its_panels_cost_the_same_queries_for_10_and_2000_messages(browser_client, expert):
    small = long_trace(expert, 10)
    large = long_trace(expert, 2_000)
    for parent in (small, large):  # sub-traces, so their panel and the ancestors are read too
        for n in range(3):
            make_trace(
                expert,
                trace_id=f"{parent.trace_id}@explore-00{n}-x",
                parent_trace=parent,
                status=TraceStatus.RUNNING,
                messages=[("user", "look"), ("assistant", "seen")],
            )
    client = browser_client(expert)
    every = "header,requests,plan,tree,subtraces,side,continue,messages"
    counts = {
        trace.total_messages: (
            queries(client, f"/traces/{trace.trace_id}/"),
            queries(client, f"/traces/{trace.trace_id}/panels.json", names=every),
            queries(client, f"/traces/{trace.trace_id}@explore-001-x/"),
        )
        for trace in (small, large)
    }
    assert len(set(counts.values())) == 1, counts
    page, panels, child = counts.popitem()[1]
    # the page's 18, plus 2 for the scores card (definitions, scores: review/), plus 1 for
    # the injected experiences' "why" (experiences_retrieved events: memory/selectors.py)
    assert page <= 21 and panels <= 21 and child <= 21


def test_the_tree_loads_on_demand_as_stretches_with_every_branch_end(browser_client, integrator):
    trace = long_trace(integrator, 1_000)
    client = browser_client(integrator)
    page = client.get(f"/traces/{trace.trace_id}/").content.decode()
    assert "Loading the tree" in page and "Branches:" not in page

    answer = client.get(f"/traces/{trace.trace_id}/panels.json", {"names": "tree"}).json()
    tree = answer["panels"]["tree"]
    rows = re.findall(r'<li class="([^"]*)" style="--depth: (\d)"', tree)
    assert len(rows) == 5  # main path in 3 stretches, 2 side branches
    assert [depth for _, depth in rows].count("1") == 2
    chips = re.findall(r'href="\?head=(\d+)" class="chip', tree)
    assert str(trace.head_sequence) in chips and len(chips) == 3
    assert "1,000 messages" not in tree and "messages</span>" in tree

    side_tip = next(int(c) for c in chips if int(c) != trace.head_sequence)
    branch = client.get(f"/traces/{trace.trace_id}/", {"head": side_tip}).content.decode()
    assert sequences_shown(branch)[-1] == side_tip and "not the main path" in branch


def test_panels_are_refused_clearly(browser_client, integrator, stranger):
    trace = make_trace(integrator, messages=[("user", "hi")])
    url = f"/traces/{trace.trace_id}/panels.json"
    bad = browser_client(integrator).get(url, {"names": "nope"})
    assert bad.status_code == 400 and "header" in bad.json()["error"]
    assert browser_client(stranger).get(url, {"names": "header"}).status_code == 404
    assert browser_client().get(url, {"names": "header"}).status_code == 302  # to the login


def test_a_tool_result_comes_back_as_its_call_with_results_folded(browser_client, integrator):
    trace = make_trace(integrator, messages=[("user", "read both")])
    calls = [
        {"id": f"call_{n}", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        for n in (1, 2)
    ]
    rows = [
        dict(role="assistant", content=None, tool_calls=calls),
        dict(role="tool", content="first body", tool_call_id="call_1", name="read"),
        dict(role="tool", content="second body", tool_call_id="call_2", name="read"),
    ]
    for sequence, row in enumerate(rows, start=2):
        Message.objects.create(
            message_id=Message.make_id(trace.trace_id, sequence),
            trace=trace,
            sequence=sequence,
            parent_sequence=sequence - 1,
            **row,
        )
    client = browser_client(integrator)
    fragment = client.get(f"/traces/{trace.trace_id}/messages/3/").content.decode()
    assert 'id="m2"' in fragment and "first body" in fragment and "second body" not in fragment
    assert fragment.count("no result yet") == 1  # call_2's result has not come yet
    both = client.get(f"/traces/{trace.trace_id}/messages/4/").content.decode()
    assert "first body" in both and "second body" in both and "no result yet" not in both


def test_messages_show_their_time(browser_client, integrator):
    trace = make_trace(integrator, messages=[("user", "hi"), ("assistant", "hello")])
    page = browser_client(integrator).get(f"/traces/{trace.trace_id}/").content.decode()
    stamp = Message.objects.get(trace=trace, sequence=2).created_at.strftime("%H:%M:%S")
    assert f">{stamp}</time>" in page


def test_a_waiting_run_offers_no_continue_and_an_ask_human_page_no_continue(browser_client, integrator):
    parent = make_trace(integrator, status=TraceStatus.WAITING, messages=[("user", "deploy?")])
    child = human_request_create(
        parent=parent,
        trace_id=f"{parent.trace_id}@human-1",
        goal_id=None,
        tool_call_id="call_ask",
        question="Which region?",
        to="expert",
    )
    client = browser_client(integrator)
    for trace in (parent, child):
        page = client.get(f"/traces/{trace.trace_id}/").content.decode()
        assert "Which region?" in page and "Continue the run" not in page
    Trace.objects.filter(pk=parent.pk).update(status=TraceStatus.COMPLETED)
    assert "Continue the run" in client.get(f"/traces/{parent.trace_id}/").content.decode()
    # the question's page links to the asking trace
    page = client.get(f"/traces/{child.trace_id}/").content.decode()
    assert f'href="/traces/{parent.trace_id}/"' in page


def test_the_page_links_the_experiences_its_reflection_made(browser_client, integrator):
    trace = make_trace(integrator, messages=[("user", "hi"), ("assistant", "done")])
    Experience.objects.create(
        code="ex_042", rule="Check the **branch** first", trace=trace, source=ExperienceSource.EXECUTION
    )
    page = browser_client(integrator).get(f"/traces/{trace.trace_id}/").content.decode()
    assert (
        "Experiences from this trace" in page
        and "ex_042" in page
        and "<strong>" not in page.split("ex_042")[1][:200]
    )


def test_the_timeline_lists_no_token_events(browser_client, integrator):
    trace = make_trace(integrator, messages=[("user", "go"), ("assistant", "done")])
    types = ["round_start", *["token"] * 40, "message", "final"]
    TraceEvent.objects.bulk_create(
        TraceEvent(trace=trace, event_id=n, type=t, payload={"text": "x"} if t == "token" else {})
        for n, t in enumerate(types, start=1)
    )
    page = browser_client(integrator).get(f"/traces/{trace.trace_id}/").content.decode()
    assert '<span id="event-count">3</span> events' in page
    timeline = page.split('id="events"')[1].split("</ol>")[0]
    assert 'evtype">token' not in timeline and timeline.count("<li") == 3


def test_live_children_show_their_newest_messages_on_the_parents_page(browser_client, integrator):
    parent = make_trace(integrator, status=TraceStatus.RUNNING, messages=[("user", "explore")])
    for n in range(3):
        make_trace(
            integrator,
            trace_id=f"{parent.trace_id}@explore-00{n}-x",
            parent_trace=parent,
            status=TraceStatus.RUNNING,
            messages=[("user", f"part {n}"), ("assistant", f"looking at part {n}"), ("user", "more")],
        )
    page = browser_client(integrator).get(f"/traces/{parent.trace_id}/").content.decode()
    assert all(f"looking at part {n}" in page for n in range(3))
    cursors = re.search(r'data-cursors="([^"]*)"', page).group(1)
    assert f"{parent.trace_id}@explore-000-x" in cursors.replace("&quot;", '"')


def test_the_page_names_the_watch_sockets_server_when_the_service_runs_one(
    browser_client, integrator, settings
):
    trace = make_trace(integrator, status=TraceStatus.RUNNING, messages=[("user", "go")])
    page = browser_client(integrator).get(f"/traces/{trace.trace_id}/").content.decode()
    assert 'data-watch-port=""' in page  # the page's own server
    settings.AGENT_WATCH_PORT = 8123
    page = browser_client(integrator).get(f"/traces/{trace.trace_id}/").content.decode()
    assert 'data-watch-port="8123"' in page


def test_the_timeline_shows_the_url_a_tool_result_reached(browser_client, integrator):
    trace = make_trace(integrator, messages=[("user", "go"), ("assistant", "done")])
    TraceEvent.objects.bulk_create(
        [
            TraceEvent(
                trace=trace,
                event_id=1,
                type="tool_result",
                payload={"name": "browser_open", "url": "https://example.org/a?b=<c>"},
            ),
            TraceEvent(trace=trace, event_id=2, type="tool_result", payload={"name": "read"}),
        ]
    )
    page = browser_client(integrator).get(f"/traces/{trace.trace_id}/").content.decode()
    timeline = page.split('id="events"')[1].split("</ol>")[0]
    assert 'title="browser_open">https://example.org/a?b=&lt;c&gt;</span>' in timeline
    assert timeline.count("ev-url") == 1
