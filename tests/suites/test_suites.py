"""Regression suites (issue 23, item 5): cases from traces, replayed against two presets,
scored by their checks and a reviewer run, a regression found against the baseline."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import CommandError, call_command

from review.models import QueueItem
from suites.models import CaseRun, Outcome, Suite
from suites.selectors import format_table, suite_run_table
from tests.scripted_llm import Reply
from tests.suites.agent import CHECKS, TASKS, scripted_agent, text
from traces.models import Trace

pytestmark = pytest.mark.django_db


def make_suite(client: Any, traces: dict[str, str]) -> int:
    suite = client.post("/api/suites", {"name": "basics", "description": "three small tasks"}, format="json")
    assert suite.status_code == 201, suite.json()
    suite_id = suite.json()["id"]
    for key, trace_id in traces.items():
        case = client.post(
            f"/api/suites/{suite_id}/cases",
            {"trace_id": trace_id, "name": key, "checks": CHECKS[key]},
            format="json",
        )
        assert case.status_code == 201, case.json()
        assert case.json()["messages"] == [{"role": "user", "content": TASKS[key]}]
    return suite_id


def run_suite(client: Any, llm: Any, inline_worker: Any, suite_id: int, **body: Any) -> dict[str, Any]:
    llm.script("scripted", [scripted_agent] * 12)
    with inline_worker():
        started = client.post(f"/api/suites/{suite_id}/runs", body, format="json")
    assert started.status_code == 201, started.json()
    run_id = started.json()["id"]
    # scored in the worker as each trace ended (the runner's after_run point), not by reading
    assert not CaseRun.objects.filter(suite_run_id=run_id, outcome=Outcome.RUNNING).exists()
    answer = client.get(f"/api/suite-runs/{run_id}")
    assert answer.status_code == 200
    return answer.json()


def test_a_suite_against_two_presets_finds_the_regression(
    api_client, expert, llm, inline_worker, source_traces
):
    client = api_client(expert)
    suite_id = make_suite(client, source_traces)

    baseline = run_suite(client, llm, inline_worker, suite_id, preset="default")
    explore = run_suite(client, llm, inline_worker, suite_id, preset="explore", baseline=baseline["id"])

    assert baseline["summary"] == {
        "cases": 3,
        "finished": 3,
        "passed": 3,
        "pass_rate": 1.0,
        "regressions": [],
        "fixed": [],
    }
    assert explore["summary"]["passed"] == 2 and explore["summary"]["regressions"] == ["write"]
    write = next(case for case in explore["cases"] if case["case"] == "write")
    assert write["outcome"] == "failed" and write["change"] == "regression"
    assert write["baseline"]["outcome"] == "passed"
    (status, file_check) = write["results"]
    assert (
        status["passed"]
        and not file_check["passed"]
        and file_check["detail"] == "no such file in the workspace"
    )
    listing = next(case for case in explore["cases"] if case["case"] == "list")
    rubric = listing["results"][-1]
    assert rubric["kind"] == "rubric" and rubric["passed"] and rubric["detail"].startswith("pass")
    assert Trace.objects.get(pk=listing["judge_trace_id"]).agent_type == "explore"
    # every replay is an ordinary trace of the preset asked for, gathered in a review queue
    replays = Trace.objects.filter(pk__in=[case["trace_id"] for case in explore["cases"]])
    assert {t.agent_type for t in replays} == {"explore"} and replays.count() == 3
    assert set(QueueItem.objects.filter(queue_id=explore["queue_id"]).values_list("trace_id", flat=True)) == {
        t.pk for t in replays
    }
    # the replays were given the case's task on the wire
    sent = [
        text(m["content"])
        for r in llm.requests_for("scripted")
        for m in r.body["messages"]
        if m.get("content")
    ]
    assert sum(TASKS["write"] in text for text in sent) >= 4
    table = format_table(suite_run_table(explore_run := Suite.objects.get(pk=suite_id).runs.first()))
    assert explore_run.pk == explore["id"]
    print(table)  # the closing note quotes it
    assert "regressions: write" in table


def test_a_case_that_waits_or_fails_is_a_failure_not_a_hang(
    api_client, expert, llm, inline_worker, source_traces
):
    client = api_client(expert)
    suite_id = make_suite(client, source_traces)
    llm.script("scripted", [Reply(status=400, error="bad request")] * 20)
    with inline_worker():
        started = client.post(f"/api/suites/{suite_id}/runs", {}, format="json")
    run = client.get(f"/api/suite-runs/{started.json()['id']}").json()
    assert run["finished_at"] is not None and run["summary"]["passed"] == 0
    assert {case["trace_status"] for case in run["cases"]} == {"failed"}


@pytest.mark.parametrize(
    ("checks", "reason"),
    [
        ([], "checks: a list of at least one check"),
        ([{"kind": "answer_matches", "pattern": "("}], "checks[0].pattern: not a regular expression"),
        ([{"kind": "file_exists", "path": "../etc/passwd"}], "checks[0].path: a path inside the workspace"),
        ([{"kind": "teleport"}], "checks[0]"),
    ],
)
def test_bad_checks_are_a_400_naming_the_field(api_client, expert, source_traces, checks, reason):
    client = api_client(expert)
    suite_id = client.post("/api/suites", {"name": "s"}, format="json").json()["id"]
    answer = client.post(
        f"/api/suites/{suite_id}/cases", {"trace_id": source_traces["sum"], "checks": checks}, format="json"
    )
    assert answer.status_code == 400
    assert set(answer.json()) == {"error", "code"} and reason in answer.json()["error"]


@pytest.mark.parametrize(("who", "code"), [("expert", 201), ("integrator", 403), (None, 401)])
def test_suites_are_for_experts(request, api_client, who, code):
    client = api_client(request.getfixturevalue(who) if who else None)
    answer = client.post("/api/suites", {"name": "mine"}, format="json")
    assert answer.status_code == code
    if code != 201:
        assert set(answer.json()) == {"error", "code"} and not Suite.objects.exists()


def test_unknown_suites_runs_and_traces_are_404s(api_client, expert, integrator, llm, inline_worker):
    client = api_client(expert)
    assert client.get("/api/suites/999").json()["code"] == "suite_not_found"
    assert client.get("/api/suite-runs/999").status_code == 404
    suite_id = client.post("/api/suites", {"name": "s"}, format="json").json()["id"]
    missing = client.post(
        f"/api/suites/{suite_id}/cases", {"trace_id": "nope", "checks": CHECKS["sum"]}, format="json"
    )
    assert missing.status_code == 404
    empty = client.post(f"/api/suites/{suite_id}/runs", {}, format="json")
    assert empty.status_code == 400 and "no cases" in empty.json()["error"]


@pytest.mark.django_db(transaction=True)
def test_run_suite_exits_by_pass_rate(expert, llm, workspace_root, source_traces_committed, capsys):
    llm.script("scripted", [scripted_agent] * 24)
    call_command("run_suite", "basics", "--preset", "default", "--user", "expert", "--inline")
    assert "3/3 passed (100%)" in capsys.readouterr().out

    with pytest.raises(SystemExit) as below:
        call_command("run_suite", "basics", "--preset", "explore", "--user", "expert", "--inline")
    out = capsys.readouterr().out
    assert below.value.code == 1 and "2/3 passed (67%); regressions: write" in out

    call_command(
        "run_suite", "basics", "--preset", "explore", "--user", "expert", "--inline", "--threshold", "0.6"
    )
    for argv, reason in [
        (["nosuch"], "no suite named"),
        (["basics", "--preset", "nosuch", "--user", "expert"], "preset"),
        (["basics", "--user", "nobody"], "no active user"),
    ]:
        with pytest.raises(CommandError, match=reason) as error:
            call_command("run_suite", *argv)
        assert error.value.returncode == 2


@pytest.fixture
def source_traces_committed(expert, llm, workspace_root) -> None:
    """The suite of the first test, made through the services in committed transactions."""
    from suites.services import case_from_trace, suite_create
    from traces.runner import AgentRunner, RunConfig

    llm.script("scripted", [scripted_agent] * 6)
    suite = suite_create(user=expert, name="basics")
    for key, task in TASKS.items():
        result = AgentRunner().run_result([{"role": "user", "content": task}], RunConfig(owner_id=expert.pk))
        case_from_trace(user=expert, suite=suite, trace_id=result.trace_id, name=key, checks=CHECKS[key])


def test_a_suite_runs_with_run_settings_and_a_bad_one_queues_nothing(
    api_client, expert, llm, inline_worker, source_traces
):
    client = api_client(expert)
    suite_id = make_suite(client, source_traces)
    bad = client.post(f"/api/suites/{suite_id}/runs", {"settings": {"temperature": "hot"}}, format="json")
    assert bad.status_code == 400 and "temperature" in bad.json()["error"]
    typo = client.post(
        f"/api/suites/{suite_id}/runs", {"settings": {"experiences": ["ex_nope"]}}, format="json"
    )
    assert typo.status_code == 400 and "no approved experience ex_nope" in typo.json()["error"]
    assert not Suite.objects.get(pk=suite_id).runs.exists()
    run = run_suite(client, llm, inline_worker, suite_id, settings={"enable_memory": False})
    assert run["run_settings"] == {"enable_memory": False} and run["summary"]["passed"] == 3
    replays = Trace.objects.filter(pk__in=[case["trace_id"] for case in run["cases"]])
    assert {t.run_settings.get("enable_memory") for t in replays} == {False}
