"""The suites pages (issue 23, item 5): create a suite, add a case from a trace, run it
and read the comparison table, as an expert; nobody else gets in."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from suites.models import Case, Suite, SuiteRun
from tests.suites.agent import CHECKS, TASKS, scripted_agent

pytestmark = pytest.mark.django_db


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize(("who", "code"), [("integrator", 403), ("stranger", 403)])
def test_suite_pages_are_for_experts(request, who, code):
    client = logged_in(request.getfixturevalue(who))
    assert client.get("/suites/").status_code == code
    assert client.post("/suites/", {"name": "x"}).status_code == code
    assert not Suite.objects.exists()
    assert Client().get("/suites/").status_code == 302  # to the login


def test_an_expert_builds_runs_and_compares_a_suite_on_the_portal(expert, llm, inline_worker, source_traces):
    client = logged_in(expert)
    created = client.post("/suites/", {"name": "basics", "description": "three small tasks"})
    suite = Suite.objects.get(name="basics")
    assert created.status_code == 302 and created.url == f"/suites/{suite.pk}/"

    page = client.get(f"/suites/{suite.pk}/?trace={source_traces['write']}")
    assert source_traces["write"] in page.content.decode()  # the trace id prefilled from the link
    bad = client.post(
        f"/suites/{suite.pk}/", {"trace_id": source_traces["write"], "checks": "[{"}, follow=True
    )
    assert "checks: not JSON" in bad.content.decode() and not Case.objects.exists()
    for key, trace_id in source_traces.items():
        added = client.post(
            f"/suites/{suite.pk}/", {"trace_id": trace_id, "name": key, "checks": json.dumps(CHECKS[key])}
        )
        assert added.status_code == 302
    page = client.get(f"/suites/{suite.pk}/").content.decode()
    assert TASKS["write"] in page and "file_exists: hello.txt" in page

    llm.script("scripted", [scripted_agent] * 24)
    with inline_worker():
        first = client.post(f"/suites/{suite.pk}/runs/", {"preset": "default"})
    baseline = SuiteRun.objects.get()
    assert first.url == f"/suites/runs/{baseline.pk}/"
    with inline_worker():
        client.post(f"/suites/{suite.pk}/runs/", {"preset": "explore", "baseline": baseline.pk})
    run = SuiteRun.objects.exclude(pk=baseline.pk).get()

    table = client.get(f"/suites/runs/{run.pk}/").content.decode()
    assert "2/3 passed" in table and "regressions: write" in table
    assert 'class="badge regression">regression' in table and "no such file in the workspace" in table
    assert 'http-equiv="refresh"' not in table  # finished: the page stops refreshing
    listing = client.get(f"/suites/{suite.pk}/").content.decode()
    assert f'data-run="{run.pk}"' in listing and "2/3" in listing


def test_a_bad_preset_is_said_on_the_page_and_runs_nothing(expert, source_traces):
    client = logged_in(expert)
    suite = Suite.objects.create(name="s")
    client.post(
        f"/suites/{suite.pk}/",
        {"trace_id": source_traces["sum"], "checks": '[{"kind": "answer_contains", "text": "4"}]'},
    )
    answer = client.post(f"/suites/{suite.pk}/runs/", {"preset": "nosuch"}, follow=True)
    assert "nosuch" in answer.content.decode() and not SuiteRun.objects.exists()
