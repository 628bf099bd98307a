"""The project setting in the portal's new-run and continue forms (M9): a select of the
configured projects plus an optional sub-directory, checked as the API checks it."""

from __future__ import annotations

from html import unescape
from pathlib import Path
from typing import Any

import pytest

from traces.models import Trace, TraceEvent

pytestmark = pytest.mark.django_db


@pytest.fixture
def shop(tmp_path: Path, settings: Any) -> Path:
    root = tmp_path / "srv" / "shop"
    (root / "backend").mkdir(parents=True)
    (tmp_path / "srv" / "lab").mkdir()
    settings.AGENT_PROJECTS = {
        "shop": {"path": str(root), "writable": False},
        "lab": {"path": str(tmp_path / "srv" / "lab"), "writable": True},
    }
    settings.AGENT_USER_AGENTS_FILE = ""
    return root


def test_no_project_field_when_none_is_configured(browser_client, integrator, settings):
    settings.AGENT_PROJECTS = {}
    assert 'name="project"' not in browser_client(integrator).get("/traces/new/").content.decode()


def test_a_new_run_works_in_the_chosen_project_directory(
    browser_client, integrator, llm, inline_worker, shop
):
    llm.script("scripted", ["ok"])
    client = browser_client(integrator)
    form = client.get("/traces/new/").content.decode()
    assert '<option value="shop" >shop (read-only)</option>' in form
    assert '<option value="lab" >lab</option>' in form and 'name="project_dir"' in form

    with inline_worker():
        client.post(
            "/traces/new/", {"task": "hi", "name": "in shop", "project": "shop", "project_dir": "/backend/"}
        )

    trace = Trace.objects.get(name="in shop")
    assert trace.run_settings["project"] == "shop/backend"
    assert trace.status == "completed"
    page = client.get(f"/traces/{trace.trace_id}/").content.decode()
    assert "keep (shop/backend)" in page  # the continue form's select


@pytest.mark.parametrize(
    ("fields", "refusal"),
    [
        ({"project": "nope"}, "project: unknown project 'nope'; known: lab, shop"),
        ({"project": "shop", "project_dir": "../lab"}, "'../lab' is not a directory inside project 'shop'"),
        ({"project_dir": "backend"}, "a project sub-directory needs a project"),
    ],
)
def test_a_bad_project_is_refused_as_a_sentence(browser_client, integrator, llm, shop, fields, refusal):
    page = browser_client(integrator).post("/traces/new/", {"task": "x", **fields}).content.decode()
    assert refusal in unescape(page)
    assert not Trace.objects.exists()


def test_continue_moves_the_trace_to_another_project_or_refuses_an_unknown_one(
    browser_client, integrator, llm, inline_worker, shop
):
    llm.script("scripted", ["first", "second"])
    client = browser_client(integrator)
    with inline_worker():
        client.post("/traces/new/", {"task": "hi", "name": "mover", "project": "shop"})
    trace = Trace.objects.get(name="mover")
    run_url = f"/traces/{trace.trace_id}/run/"

    page = client.post(run_url, {"text": "more", "project": "nope"}, follow=True).content.decode()
    assert "project: unknown project 'nope'" in unescape(page)
    with inline_worker():
        client.post(run_url, {"text": "more", "project": "lab"})

    trace.refresh_from_db()
    assert trace.run_settings["project"] == "lab"
    changed = TraceEvent.objects.get(trace=trace, type="settings_changed").payload
    assert changed["changed"]["project"] == {"from": "shop", "to": "lab"}
