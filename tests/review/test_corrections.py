"""Correction → experience → verified (X6, issue 23 item 4), through the API on the real
runner: the correction proposes a draft experience, the expert approves it, the verify
run forks before the mistake with the experience on the wire and gets it right."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memory.models import Experience
from memory.services import experience_approve
from review.models import Correction
from tests.scripted_llm import Reply, ToolCall
from traces.models import Message, Trace
from traces.runner.tool_api import workspace_path

pytestmark = pytest.mark.django_db


@pytest.fixture
def mistaken(api_client, llm, integrator, inline_worker, workspace_root):
    """A run that wrote the wrong greeting and said it was done."""
    llm.script(
        "scripted",
        [Reply(tool_calls=[ToolCall("write", {"path": "hello.txt", "content": "bye"})]), "done"],
    )
    with inline_worker():
        started = api_client(integrator).post(
            "/api/traces", {"messages": [{"role": "user", "content": "save the greeting"}]}, format="json"
        )
    trace = Trace.objects.get(pk=started.json()["trace_id"])
    assert trace.status == "completed"
    return trace


def the_write(trace: Trace) -> Message:
    return Message.objects.get(trace=trace, role="assistant", tool_calls__isnull=False)


def lesson_applied(body: dict[str, Any]) -> Reply:
    """The model after the fork: it writes the right greeting only when the lesson is there."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return Reply(text="hello.txt now says hello")
    taught = last["role"] == "user" and "[ex_" in json.dumps(last["content"])
    return Reply(
        tool_calls=[ToolCall("write", {"path": "hello.txt", "content": "hello" if taught else "bye"})]
    )


def test_a_verified_correction_fixes_what_the_original_got_wrong(
    api_client, expert, llm, inline_worker, mistaken
):
    client = api_client(expert)
    write = the_write(mistaken)
    llm.script(
        "utility",
        json.dumps(
            {
                "condition": "a task asks to save the greeting",
                "rule": "Write the word hello, never bye, into hello.txt.",
                "tags": {"state": ["greeting"], "intent": ["save file"]},
            }
        ),
    )
    made = client.post(
        f"/api/traces/{mistaken.trace_id}/messages/{write.sequence}/corrections",
        {"text": "It should have written hello, not bye."},
        format="json",
    )
    assert made.status_code == 201, made.json()
    correction = made.json()
    draft = correction["experience"]
    assert draft["status"] == "draft" and draft["rule"].startswith("Write the word hello")
    experience = Experience.objects.get(code=draft["code"])
    assert (
        experience.evidence["messages"][0]["sequence"] == write.sequence and experience.source == "feedback"
    )

    early = client.post(f"/api/corrections/{correction['id']}/verify")
    assert early.status_code == 400 and "approve" in early.json()["error"]
    experience_approve(experience=experience, user=expert)

    llm.script("scripted", [lesson_applied] * 3)
    with inline_worker():
        verified = client.post(f"/api/corrections/{correction['id']}/verify")
    assert verified.status_code == 202, verified.json()
    sent = llm.requests_for("scripted")[-2].body["messages"]  # the first call after the fork
    assert experience.code in json.dumps(sent[-1]) and "Write the word hello" in json.dumps(sent[-1])
    assert all(
        "bye" not in json.dumps(m) or m["role"] != "assistant" for m in sent
    )  # forked before the mistake
    assert (workspace_path(mistaken.trace_id) / "hello.txt").read_text() == "hello"

    detail = client.get(f"/api/corrections/{correction['id']}").json()
    assert detail["comparison"]["a"]["answer"] == "done"
    assert detail["comparison"]["b"]["answer"] == "hello.txt now says hello"
    assert detail["comparison"]["ancestor_sequence"] == write.parent_sequence
    judged = client.post(f"/api/corrections/{correction['id']}/verdict", {"verdict": "fixed"}, format="json")
    assert judged.json()["verdict"] == "fixed" and judged.json()["verdict_by"] == "expert"
    assert Correction.objects.get().experience.corrections.get().verdict == "fixed"


def test_a_correction_without_a_utility_answer_keeps_the_experts_words(api_client, expert, llm, mistaken):
    llm.script("utility", "I cannot help with that")
    made = api_client(expert).post(
        f"/api/traces/{mistaken.trace_id}/messages/{the_write(mistaken).sequence}/corrections",
        {"text": "write hello"},
        format="json",
    )
    assert made.status_code == 201 and made.json()["experience"]["rule"] == "write hello"


@pytest.mark.parametrize(("who", "code"), [("integrator", 403), ("stranger", 403), (None, 401)])
def test_corrections_are_for_experts(request, api_client, mistaken, who, code):
    client = api_client(request.getfixturevalue(who) if who else None)
    answer = client.post(
        f"/api/traces/{mistaken.trace_id}/messages/{the_write(mistaken).sequence}/corrections",
        {"text": "x"},
        format="json",
    )
    assert answer.status_code == code and set(answer.json()) == {"error", "code"}
    assert not Correction.objects.exists()


def test_bad_corrections_are_clear_errors(api_client, expert, mistaken):
    client = api_client(expert)
    user_message = Message.objects.get(trace=mistaken, role="user")
    url = f"/api/traces/{mistaken.trace_id}/messages"
    assert (
        client.post(f"{url}/{user_message.sequence}/corrections", {"text": "x"}, format="json").status_code
        == 400
    )
    assert client.post(f"{url}/999/corrections", {"text": "x"}, format="json").status_code == 400
    assert (
        client.post(
            f"{url}/{the_write(mistaken).sequence}/corrections", {"text": " "}, format="json"
        ).status_code
        == 400
    )
    assert (
        client.post("/api/traces/nope/messages/1/corrections", {"text": "x"}, format="json").status_code
        == 404
    )
    assert client.get("/api/corrections/99").json()["code"] == "correction_not_found"


def test_the_queue_work_page_corrects_verifies_and_marks(
    expert, llm, inline_worker, mistaken, browser_client
):
    from memory.services import experience_approve
    from review.services import queue_create

    queue = queue_create(user=expert, name="q", trace_ids=[mistaken.trace_id])
    item = queue.items.get()
    page_url = f"/review/{queue.pk}/items/{item.pk}/"
    client = browser_client(expert)
    assert "No corrections yet." in client.get(page_url).content.decode()
    llm.script("utility", json.dumps({"condition": "saving the greeting", "rule": "Write hello."}))
    made = client.post(
        f"/traces/{mistaken.trace_id}/corrections/",
        {"sequence": the_write(mistaken).sequence, "text": "write <b>hello</b>", "next": page_url},
    )
    assert made.status_code == 302 and made.url == page_url
    correction = Correction.objects.get()
    page = client.get(page_url).content.decode()
    assert "write &lt;b&gt;hello&lt;/b&gt;" in page and correction.experience.code in page
    assert (
        "Verify" not in page.split('id="corrections"')[1].split("correction-new")[0]
    )  # a draft: nothing to verify
    experience_approve(experience=correction.experience, user=expert)
    llm.script("scripted", [lesson_applied] * 3)
    with inline_worker():
        client.post(f"/corrections/{correction.pk}/verify/", {"next": page_url})
    page = client.get(page_url).content.decode()
    assert "after: <em>hello.txt now says hello</em>" in page and "before: <em>done</em>" in page
    client.post(f"/corrections/{correction.pk}/verdict/", {"verdict": "not_fixed", "next": page_url})
    assert Correction.objects.get().verdict == "not_fixed"
    assert "not fixed</span>" in client.get(page_url).content.decode()
