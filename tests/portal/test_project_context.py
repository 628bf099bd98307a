"""The portal's side of M9: a user edits their own AGENTS text, the trace page shows
which files made a run's project context and its text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from traces.models import UserAgents
from traces.runner import AgentRunner, RunConfig

pytestmark = pytest.mark.django_db


@pytest.fixture
def runner(llm: Any, workspace_root: Any) -> AgentRunner:
    return AgentRunner()


@pytest.fixture
def shop(tmp_path: Path, settings: Any) -> Path:
    root = tmp_path / "shop"
    root.mkdir()
    (root / "AGENTS.md").write_text("Prices are in cents.\n")
    settings.AGENT_PROJECTS = {"shop": {"path": str(root), "writable": False}}
    settings.AGENT_USER_AGENTS_FILE = ""
    return root


def test_a_user_saves_their_agents_text_and_their_next_run_reads_it(
    browser_client, integrator, runner, llm, shop
):
    client = browser_client(integrator)
    assert "Your AGENTS text" in client.get("/agents/").content.decode()

    saved = client.post("/agents/", {"text": "Sign off as Ada."})

    assert saved.status_code == 302
    assert UserAgents.objects.get(user=integrator).text == "Sign off as Ada."
    llm.script("scripted", ["ok"])
    runner.run_result([{"role": "user", "content": "hi"}], RunConfig(project="shop", owner_id=integrator.pk))
    system = llm.requests_for("scripted")[0].messages[0]["content"]
    assert system.index("Prices are in cents.") < system.index("Sign off as Ada.")


def test_an_agents_text_over_the_cap_is_refused_clearly(browser_client, integrator, settings):
    settings.AGENT_PROJECT_CONTEXT_MAX_CHARS = 1000

    page = browser_client(integrator).post("/agents/", {"text": "x" * 1001})

    assert page.status_code == 200 and "at most 1,000 characters" in page.content.decode()
    assert not UserAgents.objects.exists()


def test_the_trace_page_shows_the_files_and_the_text_of_the_project_context(
    browser_client, integrator, stranger, runner, llm, shop
):
    UserAgents.objects.create(user=integrator, text="Sign off as <b>Ada</b>.")
    llm.script("scripted", ["ok"])
    result = runner.run_result(
        [{"role": "user", "content": "hi"}], RunConfig(project="shop", owner_id=integrator.pk)
    )
    client = browser_client(integrator)

    page = client.get(f"/traces/{result.trace_id}/").content.decode()
    panel = client.get(f"/traces/{result.trace_id}/panels.json?names=project").json()["panels"]["project"]

    for html in (page, panel):
        assert (
            'data-panel="project"' in html and 'Works in project <strong class="mono">shop</strong>' in html
        )
        assert "AGENTS.md" in html and "your own AGENTS text (portal)" in html
        assert "Prices are in cents." in html and "Sign off as &lt;b&gt;Ada&lt;/b&gt;." in html
    assert (
        browser_client(stranger).get(f"/traces/{result.trace_id}/panels.json?names=project").status_code
        == 404
    )
