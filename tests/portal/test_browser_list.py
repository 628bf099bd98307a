"""The trace list's live refresh and the admin's trace list in a real browser (P1, P6).

The stack, the browser and the logged-in page come from test_browser.py; imported
here, its module-scoped fixtures start a second stack for this module.
"""

from __future__ import annotations

import re
from typing import Any

from tests.e2e.stack import Stack
from tests.portal import test_browser as browser
from tests.scripted_llm import Reply, ScriptedLLM, ToolCall

# test_browser's fixtures (this module gets its own stack) and its skips.
stack, chromium, model, page = browser.stack, browser.chromium, browser.model, browser.page
pytestmark = browser.pytestmark
EXPERT, TIMEOUT_MS = browser.EXPERT, browser.TIMEOUT_MS


def row(page: Any, trace_id: str) -> Any:
    return page.locator(f'tr[data-trace="{trace_id}"]')


def test_a_listed_run_turns_waiting_and_says_for_what_without_a_reload(page: Any, model: ScriptedLLM) -> None:
    # The model takes a while to answer, so the run is listed while it is still running.
    write = ToolCall("write", {"path": "notes.md", "content": "# Notes"})
    model.script("scripted", [Reply(tool_calls=[write], delay=6)])
    page.goto("/traces/new/")
    page.fill("textarea[name=task]", "Write notes.md")
    page.fill("input[name=name]", "live list run")
    page.click("details.advanced summary")
    page.select_option("select[name=confirm_policy]", "ask-risky")
    page.click("button:has-text('Start')")
    page.wait_for_url(re.compile(r"/traces/[^/]+/$"))
    trace_id = page.url.rstrip("/").rsplit("/", 1)[-1]

    page.goto("/")
    listed = row(page, trace_id)
    status = listed.locator("[data-col=status]")
    assert status.inner_text() in ("queued", "running")  # queued until a worker claims it
    page.wait_for_function(  # the list follows a queued run to running without a reload
        """id => document.querySelector(`tr[data-trace="${id}"] [data-col=status]`).textContent === 'running'""",
        arg=trace_id,
        timeout=TIMEOUT_MS,
    )
    assert listed.locator("[data-col=waiting_for]").is_hidden()
    tokens_before = listed.locator("[data-col=tokens]").inner_text()
    page.evaluate("window.notReloaded = true")

    page.wait_for_function(
        """id => document.querySelector(`tr[data-trace="${id}"] [data-col=status]`).textContent === 'waiting'""",
        arg=trace_id,
        timeout=TIMEOUT_MS,
    )
    waiting_for = listed.locator("[data-col=waiting_for]")
    waiting_for.wait_for(state="visible")
    assert waiting_for.inner_text() == "waiting: approval of write"
    assert "attention" in (listed.get_attribute("class") or "")
    assert listed.locator("[data-col=tokens]").inner_text() != tokens_before
    assert page.evaluate("window.notReloaded") is True


def test_the_admin_trace_list_fits_1400_pixels(page: Any, stack: Stack) -> None:
    stack.manage(
        "shell",
        "-c",
        "from django.contrib.auth.models import User;"
        f"User.objects.filter(username={EXPERT!r}).update(is_superuser=True)",
    )
    page.goto("/admin/traces/trace/")
    table = page.locator("#result_list")
    table.wait_for()
    # Nothing is cut: the results fit their box without a horizontal scroll.
    assert page.evaluate("(e => e.scrollWidth <= e.clientWidth + 1)(document.querySelector('.results'))")
    line = page.evaluate("parseFloat(getComputedStyle(document.querySelector('#result_list td')).lineHeight)")
    lines_allowed = {
        "short_name": 2,
        "short_id": 1,
        "message_count": 1,
        "tokens": 1,
        "total_cost": 1,
        "updated": 1,
    }
    for column, allowed in lines_allowed.items():
        heights = table.locator(f"td.field-{column}, th.field-{column}").evaluate_all(
            "cells => cells.map(c => { const r = document.createRange(); r.selectNodeContents(c);"
            " return r.getBoundingClientRect().height; })"
        )
        assert heights and max(heights) <= allowed * line + 1, (column, heights, line)
