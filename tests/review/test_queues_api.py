"""The review queue endpoints (X6, issue 23): create, read with progress, add, finish."""

from __future__ import annotations

import pytest

from review.models import QueueItem, ReviewQueue
from tests.factories import make_trace

pytestmark = pytest.mark.django_db


def test_an_expert_fills_and_works_through_a_queue_over_the_api(api_client, expert, integrator, definitions):
    failed = [make_trace(integrator, status="failed") for _ in range(2)]
    done = make_trace(integrator)
    client = api_client(expert)

    created = client.post(
        "/api/review-queues",
        {
            "name": "failures",
            "filters": {"status": "failed"},
            "definitions": ["quality"],
            "assignees": ["expert"],
        },
        format="json",
    )
    assert created.status_code == 201, created.json()
    queue = created.json()
    assert queue["definitions"] == ["quality"] and queue["progress"] == {
        "total": 2,
        "done": 0,
        "skipped": 0,
        "pending": 2,
    }
    added = client.post(
        f"/api/review-queues/{queue['id']}/items", {"trace_ids": [done.pk, failed[0].pk]}, format="json"
    )
    assert added.json()["added"] == 1  # a trace is in a queue once
    detail = client.get(f"/api/review-queues/{queue['id']}").json()
    assert {i["trace_id"] for i in detail["items"]} == {t.pk for t in [*failed, done]}
    assignees = {i["trace_id"]: i["assignee"] for i in detail["items"]}
    assert assignees == {failed[0].pk: "expert", failed[1].pk: "expert", done.pk: None}

    item = detail["items"][0]
    finished = client.post(
        f"/api/review-queues/{queue['id']}/items/{item['id']}", {"status": "done"}, format="json"
    )
    assert finished.json()["status"] == "done" and finished.json()["done_by"] == "expert"
    listed = client.get("/api/review-queues").json()
    assert listed[0]["progress"]["done"] == 1 and listed[0]["progress"]["pending"] == 2


@pytest.mark.parametrize(("who", "code"), [("integrator", 403), (None, 401)])
def test_queues_are_for_experts(request, api_client, who, code):
    client = api_client(request.getfixturevalue(who) if who else None)
    answer = client.post("/api/review-queues", {"name": "q"}, format="json")
    assert answer.status_code == code and set(answer.json()) == {"error", "code"}
    assert client.get("/api/review-queues").status_code == code
    assert not ReviewQueue.objects.exists()


def test_bad_queue_requests_are_clear_errors(api_client, expert, integrator):
    client = api_client(expert)
    assert client.get("/api/review-queues/99").json()["code"] == "queue_not_found"
    unknown = client.post("/api/review-queues", {"name": "q", "assignees": ["nobody"]}, format="json")
    assert unknown.status_code == 400 and "nobody" in unknown.json()["error"]
    queue = client.post("/api/review-queues", {"name": "q"}, format="json").json()
    twice = client.post("/api/review-queues", {"name": "q"}, format="json")
    assert twice.status_code == 400 and "exists already" in twice.json()["error"]
    bad = client.post(f"/api/review-queues/{queue['id']}/items/5", {"status": "done"}, format="json")
    assert bad.status_code == 404
    trace = make_trace(integrator)
    client.post(f"/api/review-queues/{queue['id']}/items", {"trace_ids": [trace.pk]}, format="json")
    item = QueueItem.objects.get()
    wrong = client.post(
        f"/api/review-queues/{queue['id']}/items/{item.pk}", {"status": "maybe"}, format="json"
    )
    assert wrong.status_code == 400 and wrong.json()["error"].startswith("status")
