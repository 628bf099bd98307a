"""Edit and fork, then compare the branches, in a real browser (X6, issue 23).

The stack, the browser and the logged-in page come from tests/portal/test_browser.py;
imported here, its module-scoped fixtures start a stack for this module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.portal import test_browser as browser
from tests.scripted_llm import Reply, ScriptedLLM, ToolCall

stack, chromium, model, page = browser.stack, browser.chromium, browser.model, browser.page
pytestmark = browser.pytestmark


def test_an_expert_edits_the_task_forks_reruns_and_compares(
    page: Any, model: ScriptedLLM, tmp_path: Path
) -> None:
    model.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("list_files", {})]),
            Reply(text="The workspace is empty, so there is **nothing** to summarise."),
            Reply(text="In French: l'espace de travail est vide."),
        ],
    )
    browser.start_run(page, "Summarise the files here", "fork run")
    browser.wait_for_status(page, "completed")

    task = page.locator("article.role-user").first
    task.locator("summary", has_text="Edit and fork").click()
    task.locator("textarea[name=content]").fill("Summarise the files here, in French")
    task.locator("input[name=rerun]").check()
    task.locator("button", has_text="Fork with this edit").click()
    page.wait_for_selector("text=a new branch and re-running from there")
    browser.wait_for_status(page, "completed")
    browser.conversation(page).locator(".md p", has_text="l'espace de travail est vide").wait_for()
    assert "nothing to summarise" not in browser.conversation(page).inner_text()
    assert model.requests_for("scripted")[-1].messages[-1]["content"] == "Summarise the files here, in French"

    page.click("text=compare branches")
    page.wait_for_selector("table.compare-rows")
    rows = page.locator("table.compare-rows").inner_text()
    assert "in French" in rows and "nothing to summarise" in rows
    assert page.locator("table.compare-rows ins", has_text="French").count() >= 1
    browser.shoot(page, "branch-compare", tmp_path)
