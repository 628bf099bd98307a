"""Branch comparison and edit-and-fork through the API (X6, issue 23), on the real runner
against the scripted model."""

from __future__ import annotations

from typing import Any

import pytest

from review.models import MessageEdit
from tests.factories import make_trace
from tests.scripted_llm import Reply, ToolCall
from traces.models import Message, Trace

pytestmark = pytest.mark.django_db


def start(client: Any, inline_worker: Any, task: str) -> str:
    with inline_worker():
        response = client.post("/api/traces", {"task": task}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()["trace_id"]


def path(client: Any, trace_id: str) -> list[dict[str, Any]]:
    messages = client.get(f"/api/traces/{trace_id}/messages", {"mode": "main_path"}).json()
    return [m for m in messages if m["kind"] != "context"]


def write(content: str) -> Reply:
    return Reply(tool_calls=[ToolCall("write", {"path": "a.txt", "content": content})])


def test_comparison_of_a_rewound_trace_aligns_from_the_common_ancestor(
    api_client, integrator, llm, inline_worker, workspace_root
):
    llm.script("scripted", [write("x"), "wrote x for you", write("y"), "wrote y for you"])
    client = api_client(integrator)
    trace_id = start(client, inline_worker, "write a.txt")
    first = path(client, trace_id)
    task = next(m for m in first if m["role"] == "user")
    with inline_worker():
        client.post(f"/api/traces/{trace_id}/run", {"after_sequence": task["sequence"]}, format="json")

    response = client.get(f"/api/traces/{trace_id}/compare", {"a": first[-1]["sequence"]})

    assert response.status_code == 200, response.json()
    data = response.json()
    assert data["common_ancestor"]["a_sequence"] == task["sequence"]
    assert data["a"]["outcome"] == {
        "status": "side branch",
        "error": None,
        "answer": "wrote x for you",
        "ends_with": "assistant",
    }
    assert data["b"]["outcome"]["status"] == "completed" and data["b"]["main_path"]
    assert data["b"]["outcome"]["answer"] == "wrote y for you"
    rows = [r for r in data["rows"] if (r["a"] or r["b"])["kind"] != "context"]
    assert [(r["status"], r["a"]["role"], r["b"]["role"]) for r in rows] == [
        ("changed", "assistant", "assistant"),
        ("changed", "tool", "tool"),
        ("changed", "assistant", "assistant"),
    ]
    call = rows[0]["tool_call_diffs"][0]
    assert rows[0]["changes"] == ["tool_calls"]
    assert call["changed_arguments"] == ["content"]
    assert (call["a"]["arguments"]["content"], call["b"]["arguments"]["content"]) == ("x", "y")
    assert rows[1]["text_diff"][:2] == [
        {"op": "delete", "text": "Created"},
        {"op": "insert", "text": "Overwrote"},
    ]
    assert {"op": "delete", "text": "x"} in rows[2]["text_diff"]
    assert {"op": "insert", "text": "y"} in rows[2]["text_diff"]
    for side in ("a", "b"):
        figures = data[side]["after_ancestor"]
        assert figures["total_tokens"] > 0 and figures["tools_called"] == ["write"]
        assert data[side]["figures"]["total_tokens"] >= figures["total_tokens"]


def test_two_traces_of_one_task_compare_and_different_tasks_do_not(
    api_client, integrator, llm, inline_worker
):
    llm.script("scripted", ["answer one", "answer two", "other"])
    client = api_client(integrator)
    one, two = start(client, inline_worker, "same task"), start(client, inline_worker, "same task")
    other = start(client, inline_worker, "another task")

    compared = client.get("/api/compare/traces", {"a": one, "b": two}).json()
    refused = client.get("/api/compare/traces", {"a": one, "b": other})

    assert compared["common_ancestor"]["messages"] >= 2  # the system prompt and the task
    last = compared["rows"][-1]
    assert (last["status"], last["a"]["content"], last["b"]["content"]) == (
        "changed",
        "answer one",
        "answer two",
    )
    assert refused.status_code == 400
    assert refused.json()["code"] == "invalid_comparison"


def test_edit_and_fork_keeps_the_original_and_reruns_with_the_edit(
    api_client, expert, integrator, llm, inline_worker
):
    llm.script("scripted", ["first answer", "answer to the edit"])
    trace_id = start(api_client(integrator), inline_worker, "summarise the report")
    original = path(api_client(integrator), trace_id)
    task = next(m for m in original if m["role"] == "user")
    client = api_client(expert)

    with inline_worker():
        response = client.post(
            f"/api/traces/{trace_id}/messages/{task['sequence']}/edit",
            {"content": "summarise the report in French", "rerun": True},
            format="json",
        )

    assert response.status_code == 201, response.json()
    edit = response.json()
    assert (edit["editor"], edit["original_sequence"], edit["rerun"]) == ("expert", task["sequence"], True)
    assert edit["before"] == {"content": "summarise the report"}
    assert edit["after"] == {"content": "summarise the report in French"}
    wire = llm.requests_for("scripted")[-1].messages
    assert [m["content"] for m in wire if m["role"] == "user"] == ["summarise the report in French"]
    main = path(client, trace_id)
    assert [m["content"] for m in main][-2:] == ["summarise the report in French", "answer to the edit"]
    assert main[-2]["parent_sequence"] == task["parent_sequence"]
    kept = Message.objects.filter(trace_id=trace_id, sequence__in=[m["sequence"] for m in original])
    assert sorted(kept.values_list("content", flat=True)) == sorted(m["content"] for m in original)
    assert Trace.objects.get(pk=trace_id).status == "completed"
    assert client.get(f"/api/traces/{trace_id}/edits").json()[0]["id"] == edit["id"]
    types = [e["type"] for e in client.get(f"/api/traces/{trace_id}/events").json()]
    assert types.index("rewind") < types.index("message_edited") < len(types) - 1


def test_edited_tool_call_arguments_are_run_again(api_client, integrator, llm, inline_worker, workspace_root):
    llm.script("scripted", [write("x"), "wrote x", "wrote the edited file"])
    client = api_client(integrator)
    trace_id = start(client, inline_worker, "write a.txt")
    call = next(m for m in path(client, trace_id) if m["tool_calls"])

    with inline_worker():
        response = client.post(
            f"/api/traces/{trace_id}/messages/{call['sequence']}/edit",
            {
                "tool_calls": [
                    {"id": call["tool_calls"][0]["id"], "arguments": {"path": "a.txt", "content": "edited"}}
                ],
                "rerun": True,
            },
            format="json",
        )

    assert response.status_code == 201, response.json()
    assert (workspace_root / trace_id / "a.txt").read_text() == "edited"
    main = path(client, trace_id)
    assert [m["role"] for m in main][-3:] == ["assistant", "tool", "assistant"]
    assert main[-1]["content"] == "wrote the edited file"
    wire = llm.requests_for("scripted")[-1].messages
    sent = [c["function"]["arguments"] for m in wire for c in m.get("tool_calls") or []]
    assert sent == ['{"path": "a.txt", "content": "edited"}']


def test_an_edited_tool_result_keeps_the_rounds_other_results_paired(api_client, integrator):
    trace = make_trace(integrator, messages=[("user", "look"), ("assistant", "")])
    calls = [
        {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": "read", "arguments": f'{{"path": "{n}"}}'},
        }
        for n in (1, 2)
    ]
    Message.objects.filter(trace=trace, sequence=2).update(tool_calls=calls)
    for sequence, n in ((3, 1), (4, 2)):
        Message.objects.create(
            message_id=Message.make_id(trace.trace_id, sequence),
            trace=trace,
            role="tool",
            sequence=sequence,
            parent_sequence=sequence - 1,
            tool_call_id=f"call_{n}",
            name="read",
            content=f"file {n}",
        )
    Trace.objects.filter(pk=trace.pk).update(head_sequence=4, last_sequence=4)

    response = api_client(integrator).post(
        f"/api/traces/{trace.trace_id}/messages/3/edit", {"content": "file 1, edited"}, format="json"
    )

    assert response.status_code == 201, response.json()
    trace.refresh_from_db()
    branch = Message.objects.filter(trace=trace, sequence__gt=4).order_by("sequence")
    assert [(m.parent_sequence, m.tool_call_id, m.content) for m in branch] == [
        (2, "call_1", "file 1, edited"),
        (5, "call_2", "file 2"),
    ]
    assert (trace.head_sequence, trace.status) == (6, "stopped")
    assert Message.objects.get(trace=trace, sequence=3).content == "file 1"


CHAT = [("system", "be brief"), ("user", "hi"), ("assistant", "hello")]


@pytest.mark.parametrize(
    ("who", "expected"), [("integrator", 201), ("expert", 201), ("stranger", 404), (None, 401)]
)
def test_compare_and_edit_authorisation_matrix(request, api_client, integrator, who, expected):
    trace = make_trace(integrator, messages=CHAT)
    client = api_client(request.getfixturevalue(who) if who else None)
    read = 200 if expected == 201 else expected

    edited = client.post(f"/api/traces/{trace.trace_id}/messages/2/edit", {"content": "hello"}, format="json")
    compared = client.get(f"/api/traces/{trace.trace_id}/compare", {"a": 2})
    listed = client.get(f"/api/traces/{trace.trace_id}/edits")
    across = client.get("/api/compare/traces", {"a": trace.trace_id, "b": trace.trace_id})

    assert [edited.status_code, compared.status_code, listed.status_code, across.status_code] == [
        expected,
        read,
        read,
        read,
    ]
    if expected != 201:
        assert set(edited.json()) == {"error", "code"} and set(compared.json()) == {"error", "code"}
        assert not MessageEdit.objects.exists()


@pytest.mark.parametrize(
    ("url", "body", "code"),
    [
        ("messages/2/edit", {"content": "hi"}, "invalid_edit"),  # changes nothing
        ("messages/1/edit", {"content": "be long"}, "invalid_edit"),  # the system prompt
        ("messages/9/edit", {"content": "x"}, "invalid_edit"),  # no such message
        ("messages/2/edit", {"content": "   "}, "invalid_edit"),  # a user message needs text
        ("messages/2/edit", {"tool_calls": [{"id": "c", "arguments": {}}]}, "invalid_edit"),
        ("messages/3/edit", {"content": "bye", "rerun": True}, "invalid_edit"),  # a final answer
        ("messages/2/edit", {}, "invalid"),
        ("messages/2/edit", {"content": 5}, "invalid"),
        ("messages/2/edit", {"content": "x", "rerun": "yes"}, "invalid"),
    ],
)
def test_bad_edits_are_400_with_the_error_shape(api_client, integrator, url, body, code):
    trace = make_trace(integrator, messages=CHAT)

    response = api_client(integrator).post(f"/api/traces/{trace.trace_id}/{url}", body, format="json")

    assert response.status_code == 400, response.json()
    assert response.json()["code"] == code and response.json()["error"]
    assert Message.objects.filter(trace=trace).count() == 3
    assert not MessageEdit.objects.exists()


@pytest.mark.parametrize("query", [{}, {"a": "x"}, {"a": 0}, {"a": 9}, {"a": 2, "b": 99}])
def test_bad_comparisons_are_400(api_client, integrator, query):
    trace = make_trace(integrator, messages=CHAT)

    response = api_client(integrator).get(f"/api/traces/{trace.trace_id}/compare", query)

    assert response.status_code == 400
    assert {"error", "code"} <= set(response.json())


def test_editing_a_running_trace_is_409(api_client, integrator):
    trace = make_trace(integrator, messages=CHAT, status="running")

    response = api_client(integrator).post(
        f"/api/traces/{trace.trace_id}/messages/2/edit", {"content": "hello"}, format="json"
    )

    assert response.status_code == 409 and response.json()["code"] == "run_conflict"
    assert Message.objects.filter(trace=trace).count() == 3


def test_editing_a_side_branch_message_is_400(api_client, integrator):
    trace = make_trace(integrator, messages=CHAT)
    client = api_client(integrator)
    assert (
        client.post(
            f"/api/traces/{trace.trace_id}/messages/2/edit", {"content": "hey"}, format="json"
        ).status_code
        == 201
    )

    response = client.post(f"/api/traces/{trace.trace_id}/messages/3/edit", {"content": "yo"}, format="json")

    assert response.status_code == 400 and "not on the main path" in response.json()["error"]


def test_a_bad_second_tool_call_is_a_400_naming_it(api_client, integrator):
    trace = make_trace(integrator, messages=CHAT)
    calls = [{"id": "a", "arguments": {}}, {"id": "b", "arguments": None}]

    response = api_client(integrator).post(
        f"/api/traces/{trace.trace_id}/messages/3/edit", {"tool_calls": calls}, format="json"
    )

    assert response.status_code == 400
    assert response.json()["error"].startswith("tool_calls.arguments:")
