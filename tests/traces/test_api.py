"""The REST API (W2, W6): listing, detail, messages, events, start / run / stop, errors."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from tests.factories import make_trace
from tests.scripted_llm import Reply, ToolCall
from traces.models import Message, Trace, TraceEvent

pytestmark = pytest.mark.django_db

CHAT = [("system", "be brief"), ("user", "hi"), ("assistant", "hello")]


def user_message(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def sequences(rows: list[dict[str, Any]]) -> list[int]:
    return [row["sequence"] for row in rows]


# --- reading ---------------------------------------------------------------------


def test_list_is_newest_first_paginated_and_filtered(api_client, integrator):
    now = timezone.now()
    old = make_trace(integrator, name="old report", created_at=now - timedelta(hours=2), agent_type="explore")
    mid = make_trace(integrator, task="count the files", created_at=now - timedelta(hours=1), uid="u-7")
    new = make_trace(integrator, name="fresh", status="failed", created_at=now, parent_trace=old)
    client = api_client(integrator)

    page = client.get("/api/traces", {"limit": 2}).json()
    assert page["count"] == 3
    assert [t["trace_id"] for t in page["results"]] == [new.trace_id, mid.trace_id]
    assert page["next"]
    rest = client.get("/api/traces", {"limit": 2, "offset": 2}).json()
    assert [t["trace_id"] for t in rest["results"]] == [old.trace_id]

    def ids(**params: Any) -> list[str]:
        return [t["trace_id"] for t in client.get("/api/traces", params).json()["results"]]

    assert ids(status="failed") == [new.trace_id]
    assert ids(agent_type="explore") == [old.trace_id]
    assert ids(uid="u-7") == [mid.trace_id]
    assert ids(parent=old.trace_id) == [new.trace_id]
    assert ids(parent="none") == [mid.trace_id, old.trace_id]
    assert ids(q="FILES") == [mid.trace_id]
    assert ids(q="report") == [old.trace_id]


def test_list_rejects_an_unknown_status_filter(api_client, integrator):
    response = api_client(integrator).get("/api/traces", {"status": "sleeping"})

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_choice"
    assert "status" in response.json()["error"]


def test_running_lists_only_running_traces(api_client, integrator):
    running = make_trace(integrator, status="running", heartbeat_at=timezone.now())
    make_trace(integrator, status="completed")

    response = api_client(integrator).get("/api/traces/running")

    assert response.status_code == 200
    assert [t["trace_id"] for t in response.json()] == [running.trace_id]


def test_detail_has_goal_tree_and_sub_traces(api_client, integrator):
    from traces.goal_tree import GoalTree

    parent = make_trace(integrator, messages=CHAT)
    child = make_trace(
        integrator, trace_id=f"{parent.trace_id}@explore-001", parent_trace=parent, agent_type="explore"
    )
    tree = GoalTree.load(parent)
    tree.ensure_root("answer the greeting")
    tree.flush()

    body = api_client(integrator).get(f"/api/traces/{parent.trace_id}").json()

    assert body["trace_id"] == parent.trace_id
    assert body["owner"] == "integrator"
    assert body["goal_tree"]["goals"][0]["description"] == "answer the greeting"
    assert [s["trace_id"] for s in body["sub_traces"]] == [child.trace_id]
    child_body = api_client(integrator).get(f"/api/traces/{child.trace_id}").json()
    assert child_body["parent_trace_id"] == parent.trace_id


def test_unknown_trace_is_404_with_reason(api_client, integrator):
    for url in ("/api/traces/nope", "/api/traces/nope/messages", "/api/traces/nope/events"):
        response = api_client(integrator).get(url)
        assert response.status_code == 404, url
        assert response.json() == {"error": "trace 'nope' does not exist", "code": "trace_not_found"}


def test_events_since_returns_the_later_events_in_order(api_client, integrator):
    trace = make_trace(integrator)
    for event_id in (1, 2, 3):
        TraceEvent.objects.create(trace=trace, event_id=event_id, type="message", payload={"n": event_id})

    rows = api_client(integrator).get(f"/api/traces/{trace.trace_id}/events", {"since": 1}).json()

    assert [r["event_id"] for r in rows] == [2, 3]
    assert rows[0]["payload"] == {"n": 2}


def test_events_page_through_a_long_log_with_limit(api_client, integrator):
    trace = make_trace(integrator)
    TraceEvent.objects.bulk_create(TraceEvent(trace=trace, event_id=n, type="message") for n in range(1, 8))
    client, url = api_client(integrator), f"/api/traces/{trace.trace_id}/events"

    pages, since = [], 0
    while page := [r["event_id"] for r in client.get(url, {"since": since, "limit": 3}).json()]:
        pages.append(page)
        since = page[-1]

    assert pages == [[1, 2, 3], [4, 5, 6], [7]]
    bad = client.get(url, {"limit": 0})
    assert bad.status_code == 400 and "limit" in bad.json()["error"]


def test_messages_page_through_the_main_path_and_all_messages(api_client, integrator):
    trace = make_trace(
        integrator, messages=[("user", "a"), ("assistant", "b"), ("user", "c"), ("assistant", "d")]
    )
    Message.objects.create(
        message_id=Message.make_id(trace.trace_id, 5),
        trace=trace,
        role="assistant",
        sequence=5,
        parent_sequence=3,
    )  # a side branch off 3; the head stays 4
    Trace.objects.filter(pk=trace.pk).update(last_sequence=5)
    client, url = api_client(integrator), f"/api/traces/{trace.trace_id}/messages"

    def sequences(**query):
        return [m["sequence"] for m in client.get(url, query).json()]

    assert sequences() == [1, 2, 3, 4]
    assert sequences(after=1, limit=2) == [2, 3]
    assert sequences(after=3, limit=2) == [4]
    assert sequences(mode="all", after=3) == [4, 5]
    assert sequences(mode="all", limit=1) == [1]
    bad = client.get(url, {"after": -1})
    assert bad.status_code == 400 and "after" in bad.json()["error"]


# --- starting and steering through the worker ----------------------------------------


def test_post_creates_the_trace_at_once_and_enqueues_its_run(
    api_client, integrator, llm, django_capture_on_commit_callbacks
):
    client = api_client(integrator)

    with django_capture_on_commit_callbacks(execute=False) as queued:
        response = client.post(
            "/api/traces", {"task": "say hi", "name": "greeting", "uid": "u-1"}, format="json"
        )

    assert response.status_code == 201
    body = response.json()
    assert body["status"] == "started"
    assert len(queued) == 1  # the task goes to the broker only after commit
    detail = client.get(f"/api/traces/{body['trace_id']}").json()
    assert detail["status"] == "queued"
    assert detail["task"] == "say hi"
    assert detail["owner"] == "integrator"
    assert detail["uid"] == "u-1"
    assert detail["model"] == "openai/scripted"
    assert client.get(f"/api/traces/{body['trace_id']}/messages").json() == []


def test_post_runs_in_the_worker_to_completion(api_client, integrator, llm, inline_worker, workspace_root):
    llm.script(
        "scripted",
        [Reply(tool_calls=[ToolCall("write", {"path": "a.txt", "content": "x"})]), Reply(text="wrote it")],
    )
    client = api_client(integrator)

    with inline_worker():
        response = client.post(
            "/api/traces", {"messages": user_message("write a.txt"), "name": "writer"}, format="json"
        )

    trace_id = response.json()["trace_id"]
    detail = client.get(f"/api/traces/{trace_id}").json()
    assert detail["status"] == "completed"
    assert detail["result_summary"] == "wrote it"
    assert detail["name"] == "writer"
    assert detail["owner"] == "integrator"
    assert detail["goal_tree"]["goals"]  # the auto root goal (R9)
    roles = [
        m["role"] for m in client.get(f"/api/traces/{trace_id}/messages").json() if m["kind"] != "context"
    ]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    assert (workspace_root / trace_id / "a.txt").read_text() == "x"
    events = client.get(f"/api/traces/{trace_id}/events").json()
    assert [e["event_id"] for e in events] == list(range(1, len(events) + 1))
    assert events[0]["type"] == "run_started" and events[-1]["type"] == "final"


def test_continue_rewind_and_regenerate_through_the_api(api_client, integrator, llm, inline_worker):
    client = api_client(integrator)
    llm.script("scripted", ["first answer", "second answer", "rewound answer", "regenerated answer"])
    with inline_worker():
        trace_id = client.post("/api/traces", {"task": "start"}, format="json").json()["trace_id"]

    def run(body: dict[str, Any]) -> dict[str, Any]:
        with inline_worker():
            response = client.post(f"/api/traces/{trace_id}/run", body, format="json")
        assert response.status_code == 202, response.json()
        assert response.json() == {"trace_id": trace_id, "status": "started"}
        return client.get(f"/api/traces/{trace_id}").json()

    continued = run({"messages": user_message("more")})
    assert continued["status"] == "completed"
    assert continued["result_summary"] == "second answer"
    path = [m for m in client.get(f"/api/traces/{trace_id}/messages").json() if m["kind"] != "context"]
    first_user = next(m for m in path if m["content"] == "start")

    rewound = run({"messages": user_message("instead"), "after_sequence": first_user["sequence"]})
    assert rewound["result_summary"] == "rewound answer"
    main = client.get(f"/api/traces/{trace_id}/messages", {"mode": "main_path"}).json()
    everything = client.get(f"/api/traces/{trace_id}/messages", {"mode": "all"}).json()
    contents = [m["content"] for m in main]
    assert "more" not in contents and "second answer" not in contents
    assert contents[-2:] == ["instead", "rewound answer"]
    assert {"more", "second answer"} <= {m["content"] for m in everything}
    assert sequences(everything) == list(range(1, len(everything) + 1))
    assert len(everything) > len(main)

    instead = next(m for m in main if m["content"] == "instead")
    regenerated = run({"messages": [], "after_sequence": instead["sequence"]})
    assert regenerated["result_summary"] == "regenerated answer"
    main = client.get(f"/api/traces/{trace_id}/messages").json()
    assert [m["content"] for m in main][-2:] == ["instead", "regenerated answer"]


def test_a_second_run_request_while_queued_or_running_gets_409(api_client, integrator, llm):
    trace = make_trace(integrator, messages=CHAT)
    client = api_client(integrator)

    first = client.post(f"/api/traces/{trace.trace_id}/run", {"messages": user_message("go")}, format="json")
    second = client.post(f"/api/traces/{trace.trace_id}/run", {"messages": user_message("go")}, format="json")

    assert first.status_code == 202
    assert second.status_code == 409
    assert second.json()["code"] == "run_conflict"
    assert "queued" in second.json()["error"]
    Trace.objects.filter(pk=trace.pk).update(
        status="running", heartbeat_at=timezone.now(), run_owner="host:1:2"
    )
    third = client.post(f"/api/traces/{trace.trace_id}/run", {"messages": user_message("go")}, format="json")
    assert third.status_code == 409
    assert "already running (worker host:1:2" in third.json()["error"]


def test_duplicate_task_delivery_does_nothing(
    api_client, integrator, llm, inline_worker, django_capture_on_commit_callbacks
):
    trace = make_trace(integrator, messages=CHAT)
    llm.script("scripted", ["once"])
    with django_capture_on_commit_callbacks(execute=False) as queued:
        api_client(integrator).post(
            f"/api/traces/{trace.trace_id}/run", {"messages": user_message("go")}, format="json"
        )
    from django_q.conf import Conf

    assert Conf.SYNC  # inline_worker: the broker runs tasks in the test
    queued[0]()
    queued[0]()  # the broker delivers the same task again

    trace.refresh_from_db()
    assert trace.status == "completed"
    assert Message.objects.filter(trace=trace, content="go").count() == 1
    assert Message.objects.filter(trace=trace, content="once").count() == 1


def test_stop_a_queued_run_stops_it_and_its_task_does_nothing(
    api_client, integrator, llm, inline_worker, django_capture_on_commit_callbacks
):
    trace = make_trace(integrator, messages=CHAT)
    client = api_client(integrator)
    with django_capture_on_commit_callbacks(execute=False) as queued:
        client.post(f"/api/traces/{trace.trace_id}/run", {"messages": user_message("go")}, format="json")

    response = client.post(f"/api/traces/{trace.trace_id}/stop")

    assert response.status_code == 202
    assert response.json() == {"trace_id": trace.trace_id, "status": "stopped"}
    trace.refresh_from_db()
    assert trace.status == "stopped"
    assert list(TraceEvent.objects.filter(trace=trace).values_list("type", flat=True)) == ["stopped"]
    queued[0]()  # the task reaches a worker afterwards and finds its reservation gone
    trace.refresh_from_db()
    assert trace.status == "stopped"
    assert Message.objects.filter(trace=trace).count() == len(CHAT)
    assert not llm.requests


def test_stop_of_a_running_trace_flags_it(api_client, integrator):
    trace = make_trace(integrator, status="running", heartbeat_at=timezone.now(), run_owner="w")

    response = api_client(integrator).post(f"/api/traces/{trace.trace_id}/stop")

    assert response.json() == {"trace_id": trace.trace_id, "status": "stopping"}
    trace.refresh_from_db()
    assert trace.stop_requested is True


def test_stop_of_a_finished_trace_is_409(api_client, integrator):
    trace = make_trace(integrator, status="completed")

    response = api_client(integrator).post(f"/api/traces/{trace.trace_id}/stop")

    assert response.status_code == 409
    assert "not running (status completed)" in response.json()["error"]


# --- bad input (W6) ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("after", "problem"),
    [(2, "is on a side branch, not on the main path"), (99, "does not exist")],
)
def test_bad_after_sequence_is_400_naming_the_problem(api_client, integrator, llm, after, problem):
    trace = make_trace(integrator, messages=[*CHAT, ("user", "more"), ("assistant", "ok")])
    # sequence 2 is moved onto a side branch: the head's chain skips it
    Message.objects.filter(trace=trace, sequence=3).update(parent_sequence=1)

    response = api_client(integrator).post(
        f"/api/traces/{trace.trace_id}/run",
        {"messages": user_message("x"), "after_sequence": after},
        format="json",
    )

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_run"
    assert f"after_sequence {after} {problem}" in response.json()["error"]
    trace.refresh_from_db()
    assert trace.status == "completed"  # nothing was reserved


def test_nothing_to_run_is_400(api_client, integrator, llm):
    trace = make_trace(integrator, messages=CHAT)

    response = api_client(integrator).post(
        f"/api/traces/{trace.trace_id}/run", {"messages": []}, format="json"
    )

    assert response.status_code == 400
    assert "nothing to run" in response.json()["error"]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role must be one of"),
        ({"messages": "hello"}, "messages must be a list"),
        ({"messages": [{"role": "user"}]}, "messages[0] (user) has no content"),
        ({"messages": [{"role": "system", "content": "s"}]}, "needs at least one user message"),
        ({"task": "x", "preset": "wizard"}, "unknown preset 'wizard'"),
        ({"task": "x", "tools": ["teleport"]}, "unknown tool(s): teleport"),
        ({"task": "x", "tools": ["read", "web_search"]}, "tool web_search is not available on this server"),
        ({}, "send either messages or task"),
        ({"task": "x", "messages": []}, "send either messages or task"),
    ],
)
def test_bad_start_requests_are_400_with_a_reason(api_client, integrator, llm, settings, body, reason):
    settings.AGENT_SEARCH_BACKEND = ""  # web_search cannot run
    response = api_client(integrator).post("/api/traces", body, format="json")

    assert response.status_code == 400
    assert reason in response.json()["error"]
    assert Trace.objects.count() == 0


def test_no_model_configured_is_400(api_client, integrator, settings):
    settings.AGENT_MODEL = ""

    response = api_client(integrator).post("/api/traces", {"task": "x"}, format="json")

    assert response.status_code == 400
    assert "No model configured" in response.json()["error"]


def test_malformed_json_is_400(api_client, integrator):
    response = api_client(integrator).post("/api/traces", data="{not json", content_type="application/json")

    assert response.status_code == 400
    assert response.json()["code"] == "parse_error"
    assert "JSON parse error" in response.json()["error"]


def test_a_body_over_the_limit_is_413(api_client, integrator, settings, llm):
    settings.AGENT_MAX_MESSAGES_REQUEST_BYTES = 2048  # the bodies that post messages (L5)
    body = json.dumps({"task": "x" * 5000})

    response = api_client(integrator).post("/api/traces", data=body, content_type="application/json")

    assert response.status_code == 413
    assert response.json()["code"] == "request_too_large"
    assert "limit is 2048 bytes (AGENT_MAX_MESSAGES_REQUEST_BYTES)" in response.json()["error"]
    assert Trace.objects.count() == 0


def test_schema_and_docs_are_served(api_client):
    schema = api_client().get("/api/schema/", {"format": "json"})
    assert schema.status_code == 200
    paths = json.loads(schema.content)["paths"]
    assert {"/api/traces", "/api/traces/{trace_id}/run", "/api/traces/running"} <= set(paths)
    yaml = api_client().get("/api/schema/")
    assert yaml.status_code == 200 and b"openapi:" in yaml.content
    assert api_client().get("/api/docs/").status_code == 200


def test_schema_generates_without_warnings():
    from django.core.management import call_command

    call_command("spectacular", "--validate", "--fail-on-warn", "--file", "/dev/null")


def test_hot_reads_take_a_fixed_number_of_queries(api_client, integrator, django_assert_num_queries):
    trace = make_trace(integrator, messages=CHAT * 10)
    for _ in range(5):
        make_trace(integrator)
    client = api_client(integrator)

    with django_assert_num_queries(2):  # the trace, then the main path in one CTE
        assert len(client.get(f"/api/traces/{trace.trace_id}/messages").json()) == 30
    with django_assert_num_queries(2):  # count, then the page with owners joined
        assert client.get("/api/traces").json()["count"] == 6


def test_a_run_refused_in_the_worker_gives_its_reservation_back(
    api_client, integrator, llm, inline_worker, django_capture_on_commit_callbacks, settings
):
    with django_capture_on_commit_callbacks(execute=False) as queued:
        trace_id = api_client(integrator).post("/api/traces", {"task": "x"}, format="json").json()["trace_id"]
    settings.AGENT_MODEL = ""  # the deployment lost its model between the request and the worker

    queued[0]()

    trace = Trace.objects.get(pk=trace_id)
    assert trace.status == "failed"
    assert "No model configured" in trace.error_message


def test_run_settings_set_through_the_api_hold_across_a_continue(
    api_client, integrator, llm, inline_worker, workspace_root
):
    client = api_client(integrator)
    llm.script("scripted", ["first", "second"])
    body = {
        "task": "look around",
        "tools": ["read", "list_files"],
        "temperature": 0.25,
        "max_iterations": 12,
        "llm_params": {"top_p": 0.9},
        "confirm_policy": "ask-all",
        "system_prompt": "You are terse.",
        "enable_memory": False,
    }
    with inline_worker():
        trace_id = client.post("/api/traces", body, format="json").json()["trace_id"]

    stored = client.get(f"/api/traces/{trace_id}").json()["run_settings"]
    assert sorted(stored["tools"]) == ["list_files", "read"]
    assert (stored["temperature"], stored["max_iterations"], stored["confirm_policy"]) == (
        0.25,
        12,
        "ask-all",
    )
    assert (stored["llm_params"], stored["system_prompt"], stored["enable_memory"]) == (
        {"top_p": 0.9},
        "You are terse.",
        False,
    )
    first = llm.requests_for("scripted")[0]
    assert first.messages[0]["content"].startswith("You are terse.")
    assert (first.body["temperature"], first.body["top_p"]) == (0.25, 0.9)

    with inline_worker():
        response = client.post(
            f"/api/traces/{trace_id}/run",
            {"messages": user_message("more"), "temperature": 0.5},
            format="json",
        )
    assert response.status_code == 202
    again = llm.requests_for("scripted")[1]
    assert sorted(t["function"]["name"] for t in again.body["tools"]) == ["list_files", "read"]
    assert (again.body["temperature"], again.body["top_p"]) == (0.5, 0.9)
    events = client.get(f"/api/traces/{trace_id}/events").json()
    changed = [e["payload"]["changed"] for e in events if e["type"] == "settings_changed"]
    assert changed == [{"temperature": {"from": 0.25, "to": 0.5}}]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"temperature": 3}, "temperature"),
        ({"temperature": "hot"}, "temperature"),
        ({"max_iterations": 0}, "max_iterations"),
        ({"llm_params": {"api_base": "http://169.254.169.254"}}, "llm_params: api_base may not be set"),
        ({"confirm_policy": "sometimes"}, "confirm_policy"),
        ({"enable_memory": "yes"}, "enable_memory"),
        ({"skills": "planning"}, "skills"),
    ],
)
def test_bad_run_settings_are_400_naming_the_field(api_client, integrator, llm, body, reason):
    response = api_client(integrator).post("/api/traces", {"task": "x", **body}, format="json")
    assert response.status_code == 400
    assert reason in response.json()["error"]
    assert Trace.objects.count() == 0


def test_only_an_expert_may_loosen_the_gate(api_client, integrator, expert, llm, settings):
    settings.AGENT_CONFIRM_POLICY = "ask-risky"
    refused = api_client(integrator).post(
        "/api/traces", {"task": "x", "confirm_policy": "auto"}, format="json"
    )
    assert refused.status_code == 400
    assert "only an expert may loosen the gate" in refused.json()["error"]
    stricter = api_client(integrator).post(
        "/api/traces", {"task": "x", "confirm_policy": "ask-all"}, format="json"
    )
    assert stricter.status_code == 201
    loosened = api_client(expert).post("/api/traces", {"task": "x", "confirm_policy": "auto"}, format="json")
    assert loosened.status_code == 201
    continued = api_client(integrator).post(
        f"/api/traces/{stricter.json()['trace_id']}/run", {"confirm_policy": "ask-risky"}, format="json"
    )
    assert continued.status_code in (400, 409)  # looser than ask-all, or the run still queued
