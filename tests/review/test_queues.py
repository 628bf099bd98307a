"""Review queues (X6, issue 23): filled by filter or by hand, shared among experts,
worked through on the portal; a trace is in a queue at most once."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from review.models import ItemStatus, QueueItem, ReviewQueue, Score
from review.queues import queue_progress
from review.services import queue_add_traces, queue_create, score_set
from tests.factories import make_trace, make_user
from traces.models import TraceStatus
from traces.services.delete import trace_delete

pytestmark = pytest.mark.django_db

CHAT = [("user", "hi"), ("assistant", "hello")]


def test_a_queue_is_filled_by_the_lists_filter_and_by_hand(expert, integrator, definitions):
    failed = [make_trace(integrator, name=f"failed {n}", status=TraceStatus.FAILED) for n in range(3)]
    chosen = make_trace(integrator, name="chosen")

    queue = queue_create(
        user=expert,
        name="failures",
        definitions=["quality"],
        filters={"status": "failed"},
        trace_ids=[chosen.trace_id, failed[0].trace_id],
    )

    assert [i.trace.name for i in queue.items.order_by("position")] == [
        "chosen",
        "failed 0",
        "failed 2",
        "failed 1",
    ]
    assert queue.filters == {"status": "failed"}
    assert list(queue.definitions.values_list("name", flat=True)) == ["quality"]


def test_a_trace_is_in_a_queue_at_most_once(expert, integrator):
    trace = make_trace(integrator)
    queue = queue_create(user=expert, name="once", trace_ids=[trace.trace_id, trace.trace_id])

    added = queue_add_traces(user=expert, queue=queue, trace_ids=[trace.trace_id])

    assert (added, queue.items.count()) == (0, 1)
    with pytest.raises(IntegrityError), transaction.atomic():
        QueueItem.objects.create(queue=queue, trace=trace, position=9)


def test_only_traces_the_creator_sees_are_queued(integrator, stranger):
    theirs, mine = make_trace(integrator), make_trace(stranger)

    queue = queue_create(user=stranger, name="mine", trace_ids=[theirs.trace_id, mine.trace_id])

    assert list(queue.items.values_list("trace_id", flat=True)) == [mine.trace_id]


def test_items_are_shared_round_robin_and_progress_counts_them(expert, integrator):
    other = make_user("second", staff=True)
    traces = [make_trace(integrator) for _ in range(4)]
    queue = queue_create(
        user=expert, name="shared", trace_ids=[t.trace_id for t in traces], assignees=[expert, other]
    )
    QueueItem.objects.filter(queue=queue, position=1).update(status=ItemStatus.DONE)
    QueueItem.objects.filter(queue=queue, position=2).update(status=ItemStatus.SKIPPED)

    assert list(queue.items.order_by("position").values_list("assignee__username", flat=True)) == [
        "expert",
        "second",
        "expert",
        "second",
    ]
    progress = queue_progress(queue)
    assert (progress.total, progress.done, progress.skipped, progress.pending, progress.percent) == (
        4,
        1,
        1,
        2,
        50,
    )


def test_a_queue_name_and_its_definitions_are_checked(expert, browser_client, definitions):
    client = browser_client(expert)
    client.post("/review/", {"name": "q1"})

    again = client.post("/review/", {"name": "q1"}, follow=True).content.decode()
    unknown = client.post("/review/", {"name": "q2", "definitions": ["nope"]}, follow=True).content.decode()

    assert "a queue named &#x27;q1&#x27; exists already" in again
    assert "nope" in unknown and not ReviewQueue.objects.filter(name="q2").exists()


@pytest.mark.parametrize(("who", "status"), [("expert", 200), ("integrator", 403), ("stranger", 403)])
def test_queue_pages_are_for_experts(request, browser_client, expert, integrator, who, status):
    queue = queue_create(user=expert, name="q", trace_ids=[make_trace(integrator).trace_id])
    item = queue.items.get()
    client = browser_client(request.getfixturevalue(who))

    pages = [
        client.get("/review/"),
        client.get(f"/review/{queue.pk}/"),
        client.get(f"/review/{queue.pk}/items/{item.pk}/"),
        client.post(f"/review/{queue.pk}/items/{item.pk}/finish/", {"status": "done"}),
    ]

    assert [p.status_code for p in pages[:3]] == [status] * 3
    assert pages[3].status_code == (302 if status == 200 else 403)


def test_anonymous_visitors_go_to_the_login(browser_client, expert, integrator):
    queue = queue_create(user=expert, name="q", trace_ids=[make_trace(integrator).trace_id])

    response = browser_client().get(f"/review/{queue.pk}/")

    assert response.status_code == 302 and "/login/" in response["Location"]


def test_an_expert_works_through_a_queue(browser_client, expert, integrator, definitions):
    traces = [make_trace(integrator, name=f"case {n}", messages=CHAT) for n in range(3)]
    client = browser_client(expert)
    created = client.post(
        "/review/",
        {"name": "triage", "trace_ids": "\n".join(t.trace_id for t in traces), "definitions": ["quality"]},
    )
    queue = ReviewQueue.objects.get(name="triage")
    first, second, third = queue.items.order_by("position")
    assert created["Location"] == f"/review/{queue.pk}/"
    assert f'href="/review/{queue.pk}/items/{first.pk}/"' in client.get(created["Location"]).content.decode()

    page = client.get(f"/review/{queue.pk}/items/{first.pk}/").content.decode()
    assert "case 0" in page and 'id="next"' in page and 'id="previous"' not in page
    assert (
        'data-definition="quality"' in page and 'data-definition="verdict"' not in page
    )  # the queue asks one
    assert "queue.js" in page and f'name="next" value="/review/{queue.pk}/items/{first.pk}/"' in page

    scored = client.post(
        f"/traces/{first.trace_id}/scores/",
        {
            "definition": "quality",
            "value": "2",
            "comment": "missed a step",
            "next": f"/review/{queue.pk}/items/{first.pk}/",
        },
    )
    assert scored["Location"] == f"/review/{queue.pk}/items/{first.pk}/"
    assert Score.objects.get().comment == "missed a step"

    done = client.post(f"/review/{queue.pk}/items/{first.pk}/finish/", {"status": "done"})
    skipped = client.post(f"/review/{queue.pk}/items/{second.pk}/finish/", {"status": "skipped"})
    assert done["Location"] == f"/review/{queue.pk}/items/{second.pk}/"
    assert skipped["Location"] == f"/review/{queue.pk}/items/{third.pk}/"
    last = client.get(f"/review/{queue.pk}/items/{third.pk}/").content.decode()
    assert 'id="previous"' in last and 'id="next"' not in last

    finished = client.post(f"/review/{queue.pk}/items/{third.pk}/finish/", {"status": "done"})
    assert finished["Location"] == f"/review/{queue.pk}/"
    first.refresh_from_db()
    assert (first.status, first.done_by) == (ItemStatus.DONE, expert)
    assert "2 done, 1 skipped, 0 pending of 3" in client.get(f"/review/{queue.pk}/").content.decode()


def test_an_expert_works_through_their_own_items_and_the_unassigned(browser_client, expert, integrator):
    other = make_user("second", staff=True)
    traces = [make_trace(integrator) for _ in range(2)]
    queue = queue_create(
        user=expert, name="split", trace_ids=[t.trace_id for t in traces], assignees=[expert, other]
    )
    mine, theirs = queue.items.order_by("position")

    finished = browser_client(expert).post(f"/review/{queue.pk}/items/{mine.pk}/finish/", {"status": "done"})

    assert finished["Location"] == f"/review/{queue.pk}/"  # the other expert's item is not next
    assert theirs.assignee == other


def test_the_trace_list_offers_its_filter_as_a_queue(browser_client, expert):
    page = browser_client(expert).get("/?status=failed").content.decode()

    assert 'href="/review/?filter=status%3Dfailed' in page


def test_deleting_a_trace_takes_its_scores_and_queue_items(expert, integrator, definitions):
    kept, gone = make_trace(integrator, messages=CHAT), make_trace(integrator, messages=CHAT)
    queue = queue_create(user=expert, name="q", trace_ids=[kept.trace_id, gone.trace_id])
    for trace in (kept, gone):
        score_set(user=expert, trace_id=trace.trace_id, definition="quality", value=3, message_sequence=2)

    trace_delete(user=expert, trace_id=gone.trace_id)

    assert list(Score.objects.values_list("trace_id", flat=True)) == [kept.trace_id]
    assert list(queue.items.values_list("trace_id", flat=True)) == [kept.trace_id]
