"""A regression suite in a real browser (issue 23, item 5): an expert makes a suite from
a trace, runs it twice on the live workers and reads the comparison table, which finds
the regression. Screenshot: docs/screenshots/suite-run.png.

The stack, the browser and the logged-in page come from tests/portal/test_browser.py.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.portal import test_browser as browser

stack, chromium, model, page = browser.stack, browser.chromium, browser.model, browser.page
pytestmark = browser.pytestmark

CHECKS = '[{"kind": "answer_matches", "pattern": "\\\\b4\\\\b"}, {"kind": "tool_not_called", "tool": "bash"}]'


def scored(page: Any) -> None:
    """Until the run page stops refreshing itself: every case scored."""
    for _ in range(60):
        if page.locator("meta[http-equiv=refresh]").count() == 0:
            return
        page.wait_for_timeout(1000)
        page.reload()
    raise AssertionError("the suite run was not scored within a minute")


def test_an_expert_runs_a_suite_twice_and_sees_the_regression(page: Any, model: Any, tmp_path: Path) -> None:
    model.script("scripted", ["2+2 is 4"])
    trace_id = browser.start_run(page, "what is 2+2?", "arithmetic")
    browser.wait_for_status(page, "completed")

    page.goto("/suites/")
    page.fill("#suite-new input[name=name]", "arithmetic")
    page.click("#suite-new button[type=submit]")
    page.wait_for_url(re.compile(r"/suites/\d+/$"))
    page.fill("#case-new input[name=trace_id]", trace_id)
    page.fill("#case-new input[name=name]", "two plus two")
    page.fill("#case-new textarea[name=checks]", CHECKS)
    page.click("#case-new button[type=submit]")
    assert "answer_matches" in page.locator("#cases").inner_text()

    model.script("scripted", ["It is 4."])
    page.select_option("#suite-run-new select[name=baseline]", "")
    page.click("#suite-run-new button[type=submit]")
    page.wait_for_url(re.compile(r"/suites/runs/\d+/$"))
    page.wait_for_function(
        "() => !document.querySelector('meta[http-equiv=refresh]')", timeout=browser.TIMEOUT_MS
    )
    assert "1/1 passed" in page.locator("#summary").inner_text()

    model.script("scripted", ["I would rather not say."])
    page.click("h1 a")  # back to the suite; the last run is the default baseline
    page.click("#suite-run-new button[type=submit]")
    page.wait_for_url(re.compile(r"/suites/runs/\d+/$"))
    page.wait_for_function(
        "() => !document.querySelector('meta[http-equiv=refresh]')", timeout=browser.TIMEOUT_MS
    )
    summary = page.locator("#summary").inner_text()
    assert "0/1 passed" in summary and "regressions: two plus two" in summary
    assert page.locator("#comparison .badge.regression").count() == 1
    browser.shoot(page, "suite-run", tmp_path)
