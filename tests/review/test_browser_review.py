"""Scores and a review queue in a real browser (X6, issue 23): an expert scores a trace
on its page, fills a queue from the list's filter, and works through it with the keys.

The stack, the browser and the logged-in page come from tests/portal/test_browser.py;
imported here, its module-scoped fixtures start a stack for this module.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.portal import test_browser as browser

stack, chromium, model, page = browser.stack, browser.chromium, browser.model, browser.page
pytestmark = browser.pytestmark


def define_quality(stack: Any) -> None:
    stack.manage(
        "shell",
        "-c",
        "from review.models import ScoreDefinition;"
        "ScoreDefinition.objects.get_or_create(name='quality', kind='numeric', minimum=1, maximum=5)",
    )


def test_an_expert_scores_and_works_through_a_queue_with_the_keys(
    page: Any, stack: Any, tmp_path: Path
) -> None:
    define_quality(stack)
    page.goto("/?status=completed")
    page.click("#queue-from-filter")
    page.fill("input[name=name]", "completed runs")
    page.check("input[name=definitions][value=quality]")
    page.click("#queue-new button[type=submit]")
    page.wait_for_url(re.compile(r"/review/\d+/$"))
    total = page.locator("tr[data-item]").count()
    assert total >= 2

    page.click("#start")
    page.wait_for_url(re.compile(r"/review/\d+/items/\d+/$"))
    first = page.url
    page.fill("form[data-definition=quality] input[name=value]", "4")
    page.fill("form[data-definition=quality] textarea[name=comment]", "clear and complete")
    page.click("form[data-definition=quality] button[type=submit]")
    page.wait_for_url(first)
    assert "clear and complete" in page.locator("#scores").inner_text()
    browser.shoot(page, "review-queue-item", tmp_path)

    page.keyboard.press("j")  # next
    page.wait_for_url(lambda url: url != first)
    page.keyboard.press("k")  # previous
    page.wait_for_url(first)
    page.fill("form[data-definition=quality] textarea[name=comment]", "typing j here does not move")
    page.keyboard.press("j")
    assert page.url == first
    page.locator("h1").click()
    page.keyboard.press("d")  # done & next
    page.wait_for_url(lambda url: url != first)

    page.goto(first.split("/items/")[0] + "/")
    assert f"1 done, 0 skipped, {total - 1} pending of {total}" in page.locator("#progress").inner_text()
