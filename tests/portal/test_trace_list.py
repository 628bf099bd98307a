"""The trace list's "waiting for" line (P1): on the page and in the live refresh, without N+1."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.factories import make_trace
from traces.collaboration.humans import human_request_create
from traces.models import Approval, TraceStatus

pytestmark = pytest.mark.django_db


def waiting_traces(owner, count: int) -> list:
    """`count` waiting traces: half on an approval of bash, half on an ask_human question."""
    traces = []
    for index in range(count):
        trace = make_trace(owner, name=f"waiting {index}", status=TraceStatus.WAITING)
        if index % 2:
            human_request_create(
                parent=trace,
                trace_id=f"{trace.trace_id}@human-001",
                goal_id=None,
                tool_call_id="c1",
                question=f"question {index}?",
                to="expert",
            )
        else:
            Approval.objects.create(trace=trace, tool_call_id="c1", message_sequence=1, tool_name="bash")
        traces.append(trace)
    return traces


def test_the_list_says_what_each_waiting_row_waits_for(browser_client, integrator):
    waiting_traces(integrator, 2)
    make_trace(integrator, name="finished", status=TraceStatus.COMPLETED)
    page = browser_client(integrator).get("/").content.decode()
    assert "waiting: approval of bash" in page
    assert "waiting: answer to “question 1?”" in page
    assert page.count('data-col="waiting_for" hidden') == 1  # the finished row's line stays hidden


def test_the_live_refresh_reports_what_a_row_waits_for(browser_client, integrator):
    waiting, _ = waiting_traces(integrator, 2)
    running = make_trace(integrator, status=TraceStatus.RUNNING)
    data = (
        browser_client(integrator)
        .get("/traces/live.json", {"ids": f"{waiting.trace_id},{running.trace_id}"})
        .json()
    )
    by_id = {row["trace_id"]: row["waiting_for"] for row in data["traces"]}
    assert by_id == {waiting.trace_id: "waiting: approval of bash", running.trace_id: ""}


@pytest.mark.parametrize("path", ["/", "/traces/live.json"])
def test_saying_what_rows_wait_for_costs_the_same_queries_for_2_and_20_rows(browser_client, integrator, path):
    def queries(count: int) -> int:
        traces = waiting_traces(integrator, count)
        client = browser_client(integrator)
        params = {"ids": ",".join(t.trace_id for t in traces)} if "live" in path else {}
        with CaptureQueriesContext(connection) as captured:
            response = client.get(path, params)
        assert response.status_code == 200
        assert response.content.decode().count("waiting: ") == count
        for trace in traces:
            trace.delete()
        return len(captured)

    assert queries(2) == queries(20)
