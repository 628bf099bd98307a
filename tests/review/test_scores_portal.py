"""Scores on the portal (X6): shown and edited on the trace page, filtered and sorted in the list."""

from __future__ import annotations

import pytest

from review.models import Score
from tests.factories import make_trace

pytestmark = pytest.mark.django_db

CHAT = [("user", "hi"), ("assistant", "hello")]


def test_the_trace_page_shows_a_form_per_definition_and_the_scores(
    browser_client, integrator, expert, definitions
):
    trace = make_trace(integrator, messages=CHAT)
    client = browser_client(expert)

    saved = client.post(
        f"/traces/{trace.trace_id}/scores/", {"definition": "quality", "value": "4", "comment": "tidy"}
    )
    page = client.get(f"/traces/{trace.trace_id}/").content.decode()

    assert saved.status_code == 302
    assert 'data-definition="quality"' in page and 'data-definition="verdict"' in page
    assert "tidy" in page and 'value="4.0"' in page  # the expert's own score, to edit


def test_editing_replaces_the_score_and_a_message_is_scored_apart(
    browser_client, integrator, expert, definitions
):
    trace = make_trace(integrator, messages=CHAT)
    client = browser_client(expert)
    url = f"/traces/{trace.trace_id}/scores/"

    client.post(url, {"definition": "solved", "value": "false"})
    client.post(url, {"definition": "solved", "value": "true", "comment": "fixed"})
    client.post(url, {"definition": "verdict", "value": "bad", "message_sequence": "2"})

    assert sorted(Score.objects.values_list("definition__name", "label", "message__sequence")) == [
        ("solved", "true", None),
        ("verdict", "bad", 2),
    ]


def test_a_refused_score_is_said_on_the_page(browser_client, integrator, expert, definitions):
    trace = make_trace(integrator, messages=CHAT)
    client = browser_client(expert)

    page = client.post(
        f"/traces/{trace.trace_id}/scores/", {"definition": "quality", "value": "11"}, follow=True
    ).content.decode()

    assert "quality takes a number from 1 to 5" in page
    assert not Score.objects.exists()


@pytest.mark.parametrize(("who", "scored"), [("integrator", True), ("expert", True), ("stranger", False)])
def test_only_who_sees_the_trace_may_score_it(request, browser_client, integrator, definitions, who, scored):
    trace = make_trace(integrator, messages=CHAT)

    browser_client(request.getfixturevalue(who)).post(
        f"/traces/{trace.trace_id}/scores/", {"definition": "quality", "value": "3"}
    )

    assert Score.objects.exists() == scored


def test_anonymous_scoring_goes_to_the_login(browser_client, integrator, definitions):
    trace = make_trace(integrator, messages=CHAT)

    response = browser_client().post(
        f"/traces/{trace.trace_id}/scores/", {"definition": "quality", "value": "3"}
    )

    assert response.status_code == 302 and "/login/" in response["Location"]
    assert not Score.objects.exists()


def test_the_list_sorts_by_score_and_shows_the_average(browser_client, integrator, expert, definitions):
    low, high = make_trace(integrator, name="low-one"), make_trace(integrator, name="high-one")
    client = browser_client(expert)
    for trace, value in ((low, "2"), (high, "5")):
        client.post(f"/traces/{trace.trace_id}/scores/", {"definition": "quality", "value": value})

    best = client.get("/?score=quality&ordering=-score").content.decode()
    worst = client.get("/?score=quality&ordering=score").content.decode()
    at_least = client.get("/?score=quality&score_min=4").content.decode()

    assert best.index("high-one") < best.index("low-one")
    assert worst.index("low-one") < worst.index("high-one")
    assert "high-one" in at_least and "low-one" not in at_least
    assert '<td class="num score-average">5</td>' in best
