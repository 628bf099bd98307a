"""The `project` run setting through the API (W2, W6) and GET /api/projects (M9)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from traces.models import Trace

pytestmark = pytest.mark.django_db


@pytest.fixture
def projects(tmp_path: Path, settings: Any) -> Path:
    shop = tmp_path / "shop"
    shop.mkdir()
    (shop / "AGENTS.md").write_text("Prices are in cents.\n")
    lab = tmp_path / "lab"
    lab.mkdir()
    settings.AGENT_PROJECTS = {
        "shop": {"path": str(shop), "writable": False},
        "lab": {"path": str(lab), "writable": True},
    }
    return shop


def test_projects_are_listed_by_name_with_whether_writable_and_no_path(api_client, integrator, projects):
    response = api_client(integrator).get("/api/projects")

    assert response.status_code == 200
    assert response.json() == [{"name": "lab", "writable": True}, {"name": "shop", "writable": False}]
    assert str(projects) not in response.content.decode()
    assert api_client().get("/api/projects").status_code == 401


def test_an_unknown_project_is_a_400_naming_the_field_and_the_known_ones(api_client, integrator, projects):
    response = api_client(integrator).post("/api/traces", {"task": "x", "project": "mall"}, format="json")

    assert response.status_code == 400
    assert "project: unknown project 'mall'; known: lab, shop" in str(response.json())
    assert not Trace.objects.exists()


def test_a_run_started_in_a_project_works_there_and_a_continue_keeps_it(
    api_client, integrator, projects, llm, inline_worker
):
    llm.script("scripted", ["first", "second"])
    client = api_client(integrator)
    with inline_worker():
        started = client.post("/api/traces", {"task": "prices?", "project": "shop"}, format="json")
    assert started.status_code == 201, started.content
    trace_id = started.json()["trace_id"]
    with inline_worker():
        again = client.post(
            f"/api/traces/{trace_id}/run", {"messages": [{"role": "user", "content": "more"}]}, format="json"
        )
    assert again.status_code == 202, again.content

    assert Trace.objects.get(pk=trace_id).run_settings["project"] == "shop"
    shown = client.get(f"/api/traces/{trace_id}").json()["context"]["project_context"]
    assert [f["path"] for f in shown["files"]] == ["AGENTS.md"] and "Prices are in cents." in shown["text"]
    assert all("Prices are in cents." in r.messages[0]["content"] for r in llm.requests_for("scripted"))
    refused = client.post(
        f"/api/traces/{trace_id}/run",
        {"messages": [{"role": "user", "content": "x"}], "project": "mall"},
        format="json",
    )
    assert refused.status_code == 400 and "known: lab, shop" in str(refused.json())
