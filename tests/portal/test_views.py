"""Portal pages through Django's test client: permissions, pages, actions and refusals (P1-P4)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from django.utils import timezone

from tests.factories import make_trace
from tests.scripted_llm import Reply, ToolCall
from traces.models import Approval, ApprovalStatus, Message, Trace, TraceEvent, TraceStatus

pytestmark = pytest.mark.django_db


def branch_trace(owner):
    """1 system, 2 user, 3 assistant (old answer, off the main path), 4 user (rewound), 5 assistant."""
    trace = make_trace(
        owner,
        name="branchy",
        messages=[("system", "be brief"), ("user", "start"), ("assistant", "old answer")],
    )
    for sequence, parent, role, content in (
        (4, 2, "user", "rewound text"),
        (5, 4, "assistant", "new answer"),
    ):
        Message.objects.create(
            message_id=Message.make_id(trace.trace_id, sequence),
            trace=trace,
            role=role,
            sequence=sequence,
            parent_sequence=parent,
            segment_start=4,
            content=content,
        )
    Trace.objects.filter(pk=trace.pk).update(last_sequence=5, head_sequence=5)
    trace.refresh_from_db()
    return trace


# --- login and who sees what ------------------------------------------------------


def test_pages_require_login(browser_client, integrator):
    trace = make_trace(integrator)
    client = browser_client()
    for url in ("/", f"/traces/{trace.trace_id}/", "/experiences/", "/library/", "/traces/new/"):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/login/?next=")


def test_login_form_logs_in_and_logout_is_a_post(client, integrator):
    page = client.get("/login/")
    assert b'name="password"' in page.content
    response = client.post("/login/", {"username": "integrator", "password": "integrator-pw"})
    assert response.status_code == 302 and response["Location"] == "/"
    assert client.get("/").status_code == 200
    client.post("/logout/")
    assert client.get("/").status_code == 302


def test_a_user_sees_only_their_traces_and_experts_see_all(browser_client, integrator, stranger, expert):
    mine = make_trace(integrator, name="integrator's run")
    theirs = make_trace(stranger, name="stranger's run")

    page = browser_client(integrator).get("/").content.decode()
    assert "integrator&#x27;s run" in page and "stranger&#x27;s run" not in page
    assert browser_client(integrator).get(f"/traces/{theirs.trace_id}/").status_code == 404
    assert browser_client(integrator).get(f"/traces/{mine.trace_id}/").status_code == 200

    staff = browser_client(expert).get("/").content.decode()
    assert "integrator&#x27;s run" in staff and "stranger&#x27;s run" in staff
    assert browser_client(expert).get(f"/traces/{theirs.trace_id}/").status_code == 200


def test_a_stranger_cannot_act_on_someone_elses_trace(browser_client, integrator, stranger):
    trace = make_trace(integrator, status=TraceStatus.RUNNING)
    response = browser_client(stranger).post(f"/traces/{trace.trace_id}/stop/", follow=True)
    assert response.redirect_chain == [("/", 302)]
    assert "Not found" in response.content.decode()
    trace.refresh_from_db()
    assert not trace.stop_requested


def test_posts_need_the_csrf_token(browser_client, integrator):
    trace = make_trace(integrator, status=TraceStatus.RUNNING)
    client = browser_client(integrator, enforce_csrf_checks=True)
    assert client.post(f"/traces/{trace.trace_id}/stop/").status_code == 403


# --- list -------------------------------------------------------------------------


def test_list_filters_searches_and_flags_attention(browser_client, integrator):
    make_trace(integrator, name="alpha report", status=TraceStatus.COMPLETED)
    make_trace(integrator, name="beta loop", status=TraceStatus.FAILED, needs_attention=True)
    make_trace(integrator, name="gamma approval", status=TraceStatus.WAITING)
    client = browser_client(integrator)

    assert "alpha report" in client.get("/", {"q": "alpha"}).content.decode()
    assert "beta loop" not in client.get("/", {"q": "alpha"}).content.decode()
    attention = client.get("/", {"status": "attention"}).content.decode()
    assert "beta loop" in attention and "gamma approval" in attention and "alpha report" not in attention
    page = client.get("/").content.decode()
    assert page.count('class="attention"') == 2
    assert "2 traces need an expert" in page


def test_list_paginates(browser_client, integrator):
    for index in range(30):
        make_trace(integrator, name=f"run {index}")
    client = browser_client(integrator)
    assert "page 1 of 2" in client.get("/").content.decode()
    assert "page 2 of 2" in client.get("/", {"page": 2}).content.decode()


def test_live_endpoint_reports_only_visible_traces(browser_client, integrator, stranger):
    mine = make_trace(integrator, status=TraceStatus.RUNNING, total_tokens=1234)
    theirs = make_trace(stranger, status=TraceStatus.RUNNING)
    data = (
        browser_client(integrator)
        .get("/traces/live.json", {"ids": f"{mine.trace_id},{theirs.trace_id}"})
        .json()
    )
    assert [t["trace_id"] for t in data["traces"]] == [mine.trace_id]
    assert data["traces"][0]["tokens"] == "1.2k" and data["traces"][0]["status"] == "running"


def test_list_costs_say_unknown_or_at_least_when_calls_were_unpriced_also_live(browser_client, integrator):
    known = make_trace(integrator, name="known", total_cost=0.0123)
    partial = make_trace(integrator, name="partial", total_cost=0.0123, unpriced_calls=2, status="running")
    unknown = make_trace(integrator, name="unknown", unpriced_calls=3)
    client = browser_client(integrator)

    page = client.get("/").content.decode()

    cells = dict(re.findall(r'<tr data-trace="([^"]+)".*?data-col="cost">(.*?)</td>', page, re.S))
    assert cells[known.trace_id] == "$0.0123"
    assert cells[partial.trace_id] == (
        '<span class="cost-partial" title="2 model calls had no known price (litellm&#x27;s tables, '
        'AGENT_MODEL_PRICES): the cost is at least this">≥ $0.0123</span>'
    )
    assert cells[unknown.trace_id].endswith(">unknown</span>") and "$0<" not in page
    (live,) = client.get("/traces/live.json", {"ids": partial.trace_id}).json()["traces"]
    assert live["cost"] == "≥ $0.0123" and live["cost_note"].startswith("2 model calls had no known price")


# --- detail -----------------------------------------------------------------------


def test_detail_shows_the_main_path_and_the_branches(browser_client, integrator):
    trace = branch_trace(integrator)
    client = browser_client(integrator)

    page = client.get(f"/traces/{trace.trace_id}/").content.decode()
    conversation = page.split('id="messages"')[1].split('id="live"')[0]
    assert "new answer" in conversation and "rewound text" in conversation
    assert "old answer" not in conversation
    assert 'id="m3"' not in page
    tree = client.get(f"/traces/{trace.trace_id}/panels.json", {"names": "tree"}).json()["panels"]["tree"]
    assert 'href="?head=3"' in tree  # the old branch's tip is one click away (the tree loads on demand)

    branch = client.get(f"/traces/{trace.trace_id}/", {"head": 3}).content.decode()
    conversation = branch.split('id="messages"')[1].split('id="live"')[0]
    assert "old answer" in conversation and "new answer" not in conversation
    assert "not the main path" in branch
    assert client.get(f"/traces/{trace.trace_id}/", {"head": 99}).status_code == 404


def test_detail_folds_tool_results_under_their_call_and_marks_injections(browser_client, integrator):
    trace = make_trace(integrator, messages=[("system", "sys"), ("user", "go")])
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "read", "arguments": '{"path": "a.txt"}'},
    }
    rows = [
        dict(role="assistant", content=None, tool_calls=[call]),
        dict(role="tool", content="file body", tool_call_id="call_1", name="read"),
        dict(role="system", content="Plan: 1. read", kind="context"),
    ]
    for offset, row in enumerate(rows, start=3):
        Message.objects.create(
            message_id=Message.make_id(trace.trace_id, offset),
            trace=trace,
            sequence=offset,
            parent_sequence=offset - 1,
            **row,
        )
    Trace.objects.filter(pk=trace.pk).update(last_sequence=5, head_sequence=5)

    page = browser_client(integrator).get(f"/traces/{trace.trace_id}/").content.decode()
    assert '<details class="toolcall">' in page
    assert "&quot;path&quot;: &quot;a.txt&quot;" in page and "file body" in page
    assert 'id="m4"' in page  # the result, inside the call
    assert "injected" in page.split('id="m5"')[0].rsplit("<article", 1)[1]


def test_goal_tree_sub_traces_and_events_are_shown(browser_client, integrator):
    from django.core.management import call_command

    integrator.is_staff = True
    integrator.save()
    call_command("load_demo", owner="integrator")
    research = Trace.objects.get(name="Competitor pricing scan")
    page = browser_client(integrator).get(f"/traces/{research.trace_id}/").content.decode()
    assert "Collect competitor prices" in page and "Σ" in page
    assert "Find competitor prices" in page  # the sub-trace
    assert "sub_trace_completed" in page  # the event timeline
    child = research.sub_traces.get()
    assert browser_client(integrator).get(f"/traces/{child.trace_id}/").status_code == 200


# --- markdown and XSS (P5) ----------------------------------------------------------

XSS = (
    "Hello **bold**\n\n<script>alert('s')</script>\n\n<img src=x onerror=\"alert('i')\">\n\n"
    "[click me](javascript:alert('j')) <a href=\"javascript:alert('k')\">raw</a> "
    '<div onclick="alert(\'c\')" style="x">div</div> <iframe src="https://evil"></iframe>'
)


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, attrs))


def assert_inert(html: str) -> None:
    """No element that runs code: no script/iframe/img, no on* handler, no javascript: URL.

    Escaped text (`&lt;script&gt;` shown as text) is fine: it is not markup.
    """
    parser = _Elements()
    parser.feed(html)
    for tag, attrs in parser.found:
        assert tag not in ("script", "iframe", "img", "object", "embed"), tag
        for name, value in attrs:
            assert not name.startswith("on"), (tag, name)
            assert not (value or "").strip().lower().startswith("javascript:"), (tag, name, value)
    assert "alert('s')" not in html  # script bodies are dropped, not kept as text


def test_model_and_tool_output_render_as_markdown_and_inert(browser_client, integrator):
    trace = make_trace(integrator, messages=[("user", "hi"), ("assistant", XSS)])
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "webfetch", "arguments": '{"url": "<script>"}'},
    }
    Message.objects.filter(trace=trace, sequence=2).update(tool_calls=[call])
    Message.objects.create(
        message_id=Message.make_id(trace.trace_id, 3),
        trace=trace,
        sequence=3,
        parent_sequence=2,
        role="tool",
        tool_call_id="c1",
        content=XSS,
    )
    Trace.objects.filter(pk=trace.pk).update(head_sequence=3, last_sequence=3)
    client = browser_client(integrator)

    page = client.get(f"/traces/{trace.trace_id}/").content.decode()
    assert "<strong>bold</strong>" in page
    assert_inert(page.split('id="messages"')[1].split('id="live"')[0])
    assert_inert(client.get(f"/traces/{trace.trace_id}/messages/2/").content.decode())


def test_experience_text_is_inert(browser_client, expert):
    from memory.services import experience_create

    experience_create(rule=XSS, condition="<script>alert('cond')</script>")
    page = browser_client(expert).get("/experiences/").content.decode()
    assert_inert(page.split('<article class="card experience')[1].split("</article>")[0])


# --- actions (P3) -------------------------------------------------------------------


def test_new_run_continue_rewind_and_regenerate(browser_client, integrator, llm, inline_worker):
    llm.script("scripted", ["first answer", "second answer", "rewound answer", "regenerated"])
    client = browser_client(integrator)

    def act(url, data):
        """POST, let the worker run the queued task, then read the page the POST redirected to."""
        with inline_worker():
            response = client.post(url, data)
        assert response.status_code == 302
        return client.get(response["Location"]).content.decode()

    act("/traces/new/", {"task": "start", "preset": "default", "name": "mine"})
    trace = Trace.objects.get(name="mine")
    assert (trace.status, trace.result_summary) == (TraceStatus.COMPLETED, "first answer")
    run_url = f"/traces/{trace.trace_id}/run/"

    page = act(run_url, {"text": "more"})
    assert "Continuing the run" in page and "second answer" in page

    user = Message.objects.get(trace=trace, content="start")
    page = act(run_url, {"text": "instead", "after_sequence": user.sequence})
    assert f"Rewound to message {user.sequence}" in page
    conversation = page.split('id="messages"')[1].split('id="live"')[0]
    assert "rewound answer" in conversation and "second answer" not in conversation

    instead = Message.objects.get(trace=trace, content="instead")
    page = act(run_url, {"text": "", "after_sequence": instead.sequence})
    assert "Regenerating from message" in page and "regenerated" in page


def test_refusals_are_explained_in_plain_words(browser_client, integrator, llm):
    client = browser_client(integrator)
    running = make_trace(integrator, status=TraceStatus.RUNNING, messages=[("user", "x")])
    page = client.post(f"/traces/{running.trace_id}/run/", {"text": "more"}, follow=True).content.decode()
    assert "Not now" in page and "already" in page

    done = make_trace(integrator, messages=[("user", "x"), ("assistant", "y")])
    page = client.post(f"/traces/{done.trace_id}/stop/", follow=True).content.decode()
    assert "is not running" in page
    page = client.post(
        f"/traces/{done.trace_id}/run/", {"text": "z", "after_sequence": "77"}, follow=True
    ).content.decode()
    assert "That could not be done" in page and "77" in page
    page = client.post("/traces/new/", {"task": ""}).content.decode()
    assert "at least one user message" in page


def test_no_model_configured_is_explained(browser_client, integrator, settings):
    settings.AGENT_MODEL = None
    page = browser_client(integrator).post("/traces/new/", {"task": "hello"}).content.decode()
    assert "That could not be done" in page and "model" in page.lower()


def test_stop_flags_a_running_trace(browser_client, integrator):
    trace = make_trace(integrator, status=TraceStatus.RUNNING, heartbeat_at=timezone.now())
    page = browser_client(integrator).post(f"/traces/{trace.trace_id}/stop/", follow=True).content.decode()
    assert "Stopping" in page
    trace.refresh_from_db()
    assert trace.stop_requested


def test_reflect_queues_with_the_focus(browser_client, integrator, llm, django_capture_on_commit_callbacks):
    trace = make_trace(integrator, messages=[("user", "x"), ("assistant", "y")])
    with django_capture_on_commit_callbacks(execute=False) as queued:
        page = browser_client(integrator).post(
            f"/traces/{trace.trace_id}/reflect/", {"focus": "the second step"}, follow=True
        )
    assert "Reflecting on a side branch" in page.content.decode()
    assert len(queued) == 1


def waiting_trace(owner):
    call = {
        "id": "call_rm",
        "type": "function",
        "function": {"name": "bash", "arguments": '{"command": "rm x"}'},
    }
    trace = make_trace(owner, status=TraceStatus.WAITING, messages=[("user", "clean"), ("assistant", "")])
    Message.objects.filter(trace=trace, sequence=2).update(tool_calls=[call])
    approval = Approval.objects.create(
        trace=trace,
        tool_call_id="call_rm",
        message_sequence=2,
        tool_name="bash",
        arguments={"command": "rm x"},
    )
    return trace, approval


def test_pending_approval_shows_the_exact_arguments_and_can_be_denied(
    browser_client, integrator, expert, llm
):
    trace, approval = waiting_trace(integrator)
    owners_page = browser_client(integrator).get(f"/traces/{trace.trace_id}/").content.decode()
    assert "Waiting for an expert's approval" in owners_page and "rm x" in owners_page
    assert "approval-decide" not in owners_page and 'value="approve"' not in owners_page
    client = browser_client(expert)
    page = client.get(f"/traces/{trace.trace_id}/").content.decode()
    assert "Waiting for your approval" in page and "&quot;command&quot;: &quot;rm x&quot;" in page

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("traces.services.approvals._resume_when_decided", lambda **kw: None)
        page = client.post(
            f"/traces/{trace.trace_id}/approvals/{approval.pk}/",
            {"decision": "deny", "note": "not today", "arguments": '{"command": "rm x"}', "edited": "0"},
            follow=True,
        ).content.decode()
    assert "Denied bash" in page
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.DENIED and approval.decided_by == expert
    assert approval.decision_note == "not today"

    again = client.post(
        f"/traces/{trace.trace_id}/approvals/{approval.pk}/", {"decision": "approve"}, follow=True
    )
    assert "already decided" in again.content.decode()


def test_approve_with_edited_arguments_resumes_the_run(
    browser_client, integrator, expert, llm, inline_worker
):
    trace, approval = waiting_trace(integrator)
    with inline_worker():
        page = browser_client(expert).post(
            f"/traces/{trace.trace_id}/approvals/{approval.pk}/",
            {"decision": "approve", "arguments": '{"command": "echo safe"}', "edited": "1"},
            follow=True,
        )
    assert "with your edited arguments" in page.content.decode()
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.APPROVED
    assert approval.edited_arguments == {"command": "echo safe"}


def test_edited_arguments_that_are_not_json_are_refused(browser_client, integrator, expert):
    trace, approval = waiting_trace(integrator)
    page = browser_client(expert).post(
        f"/traces/{trace.trace_id}/approvals/{approval.pk}/",
        {"decision": "approve", "arguments": "{oops", "edited": "1"},
        follow=True,
    )
    assert "not valid JSON" in page.content.decode()
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.PENDING


def test_the_owner_cannot_decide_their_own_call_in_the_portal(browser_client, integrator):
    trace, approval = waiting_trace(integrator)
    page = browser_client(integrator).post(
        f"/traces/{trace.trace_id}/approvals/{approval.pk}/", {"decision": "approve"}, follow=True
    )
    assert "Not yours to decide" in page.content.decode()
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.PENDING and approval.decided_by is None


def test_live_fragment_of_a_scripted_run(browser_client, integrator, llm, inline_worker):
    llm.script("scripted", [Reply(tool_calls=[ToolCall("list_files", {})]), Reply(text="**done**")])
    client = browser_client(integrator)
    with inline_worker():
        client.post("/traces/new/", {"task": "look", "name": "frag"})
    trace = Trace.objects.get(name="frag")
    last = trace.head_sequence
    fragment = client.get(f"/traces/{trace.trace_id}/messages/{last}/").content.decode()
    assert "<strong>done</strong>" in fragment and f'id="m{last}"' in fragment


def test_an_ask_human_question_is_answered_on_the_parents_page(browser_client, integrator, monkeypatch):
    from traces.collaboration.humans import human_request_create

    parent = make_trace(integrator, status=TraceStatus.WAITING, messages=[("user", "deploy?")])
    child = human_request_create(
        parent=parent,
        trace_id=f"{parent.trace_id}@human-1",
        goal_id=None,
        tool_call_id="call_ask",
        question="Which **region** should I deploy to?",
        to="expert",
    )
    resumed = []
    monkeypatch.setattr(
        "traces.collaboration.humans._resume_parent", lambda **kw: resumed.append(kw["parent"].pk)
    )
    client = browser_client(integrator)

    page = client.get(f"/traces/{parent.trace_id}/").content.decode()
    assert "The agent asks you" in page and "<strong>region</strong>" in page
    response = client.post(
        f"/traces/{child.trace_id}/answer/", {"answer": "eu-west-1", "back": parent.trace_id}, follow=True
    )
    assert response.redirect_chain[-1][0] == f"/traces/{parent.trace_id}/"
    assert "Answer sent" in response.content.decode()
    child.refresh_from_db()
    assert (child.status, child.result_summary) == (TraceStatus.COMPLETED, "eu-west-1")
    assert resumed == [parent.pk]

    again = client.post(
        f"/traces/{child.trace_id}/answer/", {"answer": "x", "back": parent.trace_id}, follow=True
    )
    assert "not waiting for an answer" in again.content.decode()


def test_list_and_detail_queries_do_not_grow_with_rows(browser_client, expert, django_assert_max_num_queries):
    from django.core.management import call_command

    call_command("load_demo", owner="expert")
    for index in range(20):
        make_trace(expert, name=f"extra {index}", messages=[("user", "a"), ("assistant", "b")])
    client = browser_client(expert)
    with django_assert_max_num_queries(10):
        client.get("/")
    sales = Trace.objects.get(name="Quarterly sales summary")
    # 16, plus the scores card's definitions and scores, and the injected experiences' why
    with django_assert_max_num_queries(19):
        client.get(f"/traces/{sales.trace_id}/")


def test_the_timeline_shows_the_newest_events_and_counts_them_all(browser_client, integrator):
    trace = make_trace(integrator, messages=[("user", "go"), ("assistant", "done")])
    TraceEvent.objects.bulk_create(
        TraceEvent(trace=trace, event_id=n, type="round_start" if n < 305 else "final") for n in range(1, 306)
    )

    page = browser_client(integrator).get(f"/traces/{trace.trace_id}/").content.decode()

    assert re.search(r'<span id="event-count">305</span> events, the last 300 shown', page)
    timeline = page.split('id="events"')[1].split("</ol>")[0]
    shown = [int(n) for n in re.findall(r'<span class="mono small muted">(\d+)</span>', timeline)]
    assert shown == list(range(6, 306))


def test_an_expert_approves_a_tool_for_the_rest_of_the_run(browser_client, integrator, expert):
    trace, approval = waiting_trace(integrator)
    Approval.objects.filter(pk=approval.pk).update(question="bash wants to run rm x (deletion)")
    client = browser_client(expert)
    page = client.get(f"/traces/{trace.trace_id}/").content.decode()
    assert "bash wants to run rm x (deletion)" in page
    assert "Approve bash for the rest of the run" in page

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("traces.services.approvals._resume_when_decided", lambda **kw: None)
        page = client.post(
            f"/traces/{trace.trace_id}/approvals/{approval.pk}/", {"decision": "approve-run"}, follow=True
        ).content.decode()

    assert "Approved every bash call for the rest of the run" in page
    approval.refresh_from_db()
    assert (approval.status, approval.scope, approval.decided_by) == ("approved", "run", expert)
    trace.refresh_from_db()
    assert trace.context["approved_tools"] == {"bash": approval.pk}


def test_a_new_run_takes_advanced_settings_and_the_trace_page_shows_them(
    browser_client, integrator, llm, inline_worker
):
    llm.script("scripted", ["done"])
    client = browser_client(integrator)
    assert "Advanced: run settings" in client.get("/traces/new/").content.decode()
    with inline_worker():
        client.post(
            "/traces/new/",
            {
                "task": "look",
                "name": "tuned",
                "temperature": "0.3",
                "max_iterations": "9",
                "tools": "read, list_files",
                "confirm_policy": "ask-all",
                "llm_params": '{"top_p": 0.8}',
            },
        )
    trace = Trace.objects.get(name="tuned")
    settings = trace.run_settings
    assert (settings["temperature"], settings["max_iterations"], settings["confirm_policy"]) == (
        0.3,
        9,
        "ask-all",
    )
    assert sorted(settings["tools"]) == ["list_files", "read"] and settings["llm_params"] == {"top_p": 0.8}
    page = client.get(f"/traces/{trace.trace_id}/").content.decode()
    assert "(now: 9 steps, approvals ask-all, 2 tools)" in page
    assert 'placeholder="read, list_files"' in page or 'placeholder="list_files, read"' in page


def test_bad_advanced_settings_are_refused_naming_the_field(browser_client, integrator, llm, settings):
    settings.AGENT_CONFIRM_POLICY = "ask-risky"
    client = browser_client(integrator)
    page = client.post("/traces/new/", {"task": "x", "temperature": "5"}).content.decode()
    assert "Temperature" in page and "less than or equal to 2" in page
    page = client.post("/traces/new/", {"task": "x", "llm_params": '{"api_key": "k"}'}).content.decode()
    assert "llm_params: api_key may not be set" in page
    page = client.post("/traces/new/", {"task": "x", "confirm_policy": "auto"}).content.decode()
    assert "only an expert may loosen the gate" in page
    assert Trace.objects.count() == 0


def test_the_approvals_inbox_lists_waiting_calls_of_visible_traces(
    browser_client, integrator, expert, stranger
):
    trace, approval = waiting_trace(integrator)
    Approval.objects.filter(pk=approval.pk).update(question="matches the rule 'deletion'")
    child = make_trace(
        integrator, status=TraceStatus.WAITING, trace_id=f"{trace.trace_id}@delegate-1", parent_trace=trace
    )
    Approval.objects.create(
        trace=child, tool_call_id="c2", message_sequence=1, tool_name="write", arguments={}
    )

    page = browser_client(expert).get("/approvals/").content.decode()
    assert "matches the rule &#x27;deletion&#x27;" in page and "rm x" in page
    assert "sub-agent of" in page and page.count(f"/traces/{trace.trace_id}/#approvals") == 2
    assert ">Decide<" in page
    assert (
        ">View<" in browser_client(integrator).get("/approvals/").content.decode()
    )  # owner: not theirs to decide
    assert "Nothing waits for an approval" in browser_client(stranger).get("/approvals/").content.decode()
