"""The portal's strategy settings (R11): chosen in the new-run form, shown in the trace page's header."""

from __future__ import annotations

import json

import pytest

from traces.models import Trace

pytestmark = pytest.mark.django_db


def test_a_new_run_takes_a_strategy_and_the_header_shows_the_route(
    browser_client, integrator, llm, inline_worker
):
    llm.script("utility", [json.dumps({"route": "DIRECT", "reason": "small talk"})])
    llm.script("scripted", ["hello"])
    client = browser_client(integrator)
    form = client.get("/traces/new/").content.decode()
    assert 'name="strategy"' in form and 'value="plan_execute"' in form and 'name="reflexion"' in form
    with inline_worker():
        client.post("/traces/new/", {"task": "hi", "name": "routed", "strategy": "routed", "reflexion": "on"})

    trace = Trace.objects.get(name="routed")
    assert trace.run_settings["strategy"] == "routed" and trace.run_settings["reflexion"] is True
    page = client.get(f"/traces/{trace.trace_id}/").content.decode()
    assert "routed → DIRECT" in page and 'title="small talk"' in page and "+ reflexion" in page


def test_an_unknown_strategy_is_refused_naming_the_field(browser_client, integrator, llm):
    page = (
        browser_client(integrator).post("/traces/new/", {"task": "x", "strategy": "guess"}).content.decode()
    )
    assert "guess is not one of the available choices" in page
    assert not Trace.objects.exists()
