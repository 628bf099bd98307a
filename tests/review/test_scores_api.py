"""GET/POST /api/traces/{id}/scores and the trace list by score (X6, issue 23)."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from review.models import Score, ScoreDefinition, ScoreKind
from tests.factories import make_trace

pytestmark = pytest.mark.django_db

CHAT = [("user", "hi"), ("assistant", "hello")]


def scores_url(trace) -> str:
    return f"/api/traces/{trace.trace_id}/scores"


@pytest.mark.parametrize(
    ("who", "get_status", "post_status"),
    [("integrator", 200, 201), ("expert", 200, 201), ("stranger", 404, 404), (None, 401, 401)],
)
def test_scores_authorisation_matrix(
    request, api_client, integrator, definitions, who, get_status, post_status
):
    trace = make_trace(integrator, messages=CHAT)
    client = api_client(request.getfixturevalue(who) if who else None)

    posted = client.post(scores_url(trace), {"definition": "quality", "value": 4}, format="json")
    listed = client.get(scores_url(trace))

    assert (listed.status_code, posted.status_code) == (get_status, post_status)
    if post_status != 201:
        assert set(posted.json()) == {"error", "code"}
        assert not Score.objects.exists()


def test_owner_sees_the_experts_scores_and_a_stranger_sees_none(
    api_client, integrator, expert, stranger, definitions
):
    trace = make_trace(integrator, messages=CHAT)
    api_client(expert).post(
        scores_url(trace), {"definition": "verdict", "value": "bad", "comment": "wrong file"}, format="json"
    )

    mine = api_client(integrator).get(scores_url(trace)).json()

    assert [(s["definition"], s["value"], s["comment"], s["author"]) for s in mine] == [
        ("verdict", "bad", "wrong file", "expert")
    ]
    assert api_client(stranger).get("/api/traces?score=verdict").json()["results"] == []


def test_scoring_again_replaces_the_authors_score(api_client, integrator, expert, definitions):
    trace = make_trace(integrator, messages=CHAT)
    client = api_client(expert)

    first = client.post(scores_url(trace), {"definition": "solved", "value": False}, format="json")
    again = client.post(
        scores_url(trace), {"definition": "solved", "value": True, "comment": "ok"}, format="json"
    )
    api_client(integrator).post(scores_url(trace), {"definition": "solved", "value": False}, format="json")

    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["value"] is True
    assert sorted(Score.objects.values_list("author__username", "label")) == [
        ("expert", "true"),
        ("integrator", "false"),
    ]


def test_a_message_is_scored_apart_from_its_trace(api_client, integrator, expert, definitions):
    trace = make_trace(integrator, messages=CHAT)
    client = api_client(expert)

    client.post(scores_url(trace), {"definition": "quality", "value": 2}, format="json")
    made = client.post(
        scores_url(trace), {"definition": "quality", "value": 5, "message_sequence": 2}, format="json"
    )
    of_message = client.get(scores_url(trace) + "?message_sequence=2").json()

    assert made.status_code == 201
    assert [(s["message_sequence"], s["value"]) for s in of_message] == [(2, 5.0)]
    assert len(client.get(scores_url(trace)).json()) == 2


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"definition": "quality", "value": 9}, "value: quality takes a number from 1 to 5"),
        ({"definition": "quality", "value": "4"}, "value: quality takes a number"),
        ({"definition": "quality", "value": True}, "value: quality takes a number"),
        ({"definition": "verdict", "value": "meh"}, "value: verdict takes one of: good, bad"),
        ({"definition": "solved", "value": 1}, "value: solved takes true or false"),
        ({"definition": "nope", "value": 1}, "definition: no active score definition named 'nope'"),
        ({"definition": "quality", "value": 3, "message_sequence": 99}, "message_sequence: trace"),
        ({"definition": "quality", "value": 3, "message_sequence": "2"}, "message_sequence: "),
        ({"definition": "quality"}, "value: This field is required."),
        ({"value": 3}, "definition: This field is required."),
    ],
)
def test_invalid_scores_answer_400_in_the_error_shape(
    api_client, integrator, expert, definitions, body, reason
):
    trace = make_trace(integrator, messages=CHAT)

    response = api_client(expert).post(scores_url(trace), body, format="json")

    assert response.status_code == 400
    assert response.json()["error"].startswith(reason)
    assert response.json()["code"]
    assert not Score.objects.exists()


def test_inactive_definitions_take_no_new_scores(api_client, integrator, expert, definitions):
    ScoreDefinition.objects.filter(name="quality").update(active=False)
    trace = make_trace(integrator, messages=CHAT)

    response = api_client(expert).post(
        scores_url(trace), {"definition": "quality", "value": 3}, format="json"
    )

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_score"
    assert [d["name"] for d in api_client(expert).get("/api/score-definitions").json()] == [
        "solved",
        "verdict",
    ]


def test_trace_list_filters_and_sorts_by_score(api_client, integrator, expert, definitions):
    low, high, unscored = (make_trace(integrator, name=n) for n in ("low", "high", "unscored"))
    for trace, value in ((low, 2), (high, 5)):
        api_client(expert).post(scores_url(trace), {"definition": "quality", "value": value}, format="json")
    api_client(integrator).post(scores_url(low), {"definition": "quality", "value": 4}, format="json")
    client = api_client(integrator)

    def names(query: str) -> list[str]:
        response = client.get(f"/api/traces?{query}")
        assert response.status_code == 200, response.json()
        return [t["name"] for t in response.json()["results"]]

    assert names("score=quality&ordering=-score") == ["high", "low", "unscored"]
    assert names("score=quality&ordering=score") == ["low", "high", "unscored"]  # low averages 3
    assert names("score=quality&score_min=3.5") == ["high", "low"]  # low has the integrator's 4
    assert names("score=quality&score_max=2") == ["low"]
    assert names("score=quality&scored=false") == ["unscored"]


def test_trace_list_score_parameters_are_checked(api_client, integrator, definitions):
    client = api_client(integrator)

    without = client.get("/api/traces?ordering=score")
    bad = client.get("/api/traces?score=quality&score_min=lots")

    assert without.status_code == 400
    assert without.json()["error"] == "score: name the score definition to filter or sort by"
    assert bad.status_code == 400
    assert bad.json()["error"].startswith("score_min:")


def test_categorical_filter_by_label(api_client, integrator, expert, definitions):
    good, bad = make_trace(integrator, name="good"), make_trace(integrator, name="bad")
    for trace in (good, bad):
        api_client(expert).post(
            scores_url(trace), {"definition": "verdict", "value": trace.name}, format="json"
        )

    response = api_client(expert).get("/api/traces?score=verdict&score_label=bad")

    assert [t["name"] for t in response.json()["results"]] == ["bad"]


def test_a_numeric_definition_needs_a_range(db):
    with pytest.raises(IntegrityError), transaction.atomic():
        ScoreDefinition.objects.create(name="open", kind=ScoreKind.NUMERIC)
