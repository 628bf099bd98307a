"""The MCP tools' bodies (traces/mcp/handlers.py) on the suite's database (SQLite and
PostgreSQL): the REST API's answers and refusals, word for word. The protocol itself is
driven end to end in tests/e2e/test_mcp_server.py."""

from __future__ import annotations

import pytest
from django.db import OperationalError

from tests.factories import make_trace
from traces.mcp import handlers
from traces.runner import RunConflict, TraceNotFound

CHAT = [("system", "sys"), ("user", "hi"), ("assistant", "hello"), ("user", "more"), ("assistant", "done")]


def refusal(exc: Exception) -> dict:
    error = handlers.api_error(exc)
    assert error is not None
    return error.body


def test_refusals_carry_the_apis_reason_code_and_status() -> None:
    assert refusal(TraceNotFound("trace 'x' does not exist")) == {
        "error": "trace 'x' does not exist",
        "code": "trace_not_found",
        "status": 404,
    }
    assert refusal(RunConflict("busy"))["status"] == 409
    assert refusal(OperationalError("server closed the connection"))["status"] == 503
    assert handlers.api_error(KeyError("a bug")) is None  # a bug stays a crash, not a refusal


def test_get_trace_pages_the_main_path(integrator) -> None:
    trace = make_trace(integrator, messages=CHAT)
    first = handlers.get_trace(integrator, trace.trace_id, limit=2)
    assert [m["content"] for m in first["main_path"]] == ["sys", "hi"]
    assert first["next_after"] == 2
    rest = handlers.get_trace(integrator, trace.trace_id, after=first["next_after"], limit=10)
    assert [m["content"] for m in rest["main_path"]] == ["hello", "more", "done"]
    assert rest["next_after"] is None
    assert first["trace"]["status"] == "completed" and first["pending_approvals"] == []


def test_a_bad_page_is_the_apis_400_naming_the_field(integrator) -> None:
    trace = make_trace(integrator, messages=CHAT)
    with pytest.raises(Exception) as raised:
        handlers.get_trace(integrator, trace.trace_id, after=-1)
    body = refusal(raised.value)
    assert body["status"] == 400 and body["code"] == "min_value" and "after" in body["fields"]


def test_list_traces_shows_only_what_the_user_may_see(integrator, stranger, expert) -> None:
    mine = [make_trace(integrator, name=f"mine {n}") for n in range(3)]
    make_trace(stranger, name="theirs")
    page = handlers.list_traces(integrator, {}, limit=2)
    assert page["count"] == 3 and page["next_offset"] == 2
    assert {t["trace_id"] for t in page["traces"]} <= {t.trace_id for t in mine}
    last = handlers.list_traces(integrator, {}, limit=2, offset=2)
    assert len(last["traces"]) == 1 and last["next_offset"] is None
    assert handlers.list_traces(expert, {"q": "theirs"})["count"] == 1
    assert handlers.list_traces(integrator, {"q": "theirs"})["count"] == 0


def test_a_stranger_gets_not_found_for_anothers_trace(integrator, stranger) -> None:
    trace = make_trace(integrator, messages=CHAT)
    with pytest.raises(TraceNotFound):
        handlers.get_trace(stranger, trace.trace_id)
    with pytest.raises(TraceNotFound):
        handlers.stop_run(stranger, trace.trace_id)
