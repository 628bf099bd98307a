"""The timing waterfall and "what the model saw" in a real browser (issue 22).

The stack, the browser and the logged-in page come from test_browser.py; imported
here, its module-scoped fixtures start a stack for this module. PORTAL_SCREENSHOTS=1
writes docs/screenshots/waterfall.png.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.portal import test_browser as browser
from tests.scripted_llm import Reply, ScriptedLLM, ToolCall

stack, chromium, model, page = browser.stack, browser.chromium, browser.model, browser.page
pytestmark = browser.pytestmark


def test_the_waterfall_shows_a_run_and_leads_to_what_the_model_saw(
    page: Any, model: ScriptedLLM, tmp_path: Path
) -> None:
    model.script(
        "scripted",
        [
            Reply(
                tool_calls=[ToolCall("list_files", {}), ToolCall("agent", {"task": "count the files"})],
                delay=0.4,
            ),
            Reply(
                tool_calls=[ToolCall("bash", {"command": "sleep 0.5; ls | wc -l"})], delay=0.3
            ),  # the sub-agent
            Reply(text="0 files", delay=0.2),
            Reply(text="The workspace holds **0** files.", delay=0.5),
        ],
    )
    trace_id = browser.start_run(page, "Count the files here", "timed run")
    browser.wait_for_status(page, "completed")

    page.click("text=timing waterfall")
    page.wait_for_url(re.compile(rf"/traces/{re.escape(trace_id)}/waterfall/$"))
    rows = page.locator(".wf-row")
    kinds = [rows.nth(i).get_attribute("data-kind") for i in range(rows.count())]
    assert kinds.count("model") == 2 and kinds.count("tool") == 2 and kinds.count("subtrace") == 1
    sub_bar = page.locator(".wf-subtrace .wf-bar").bounding_box()
    assert sub_bar is not None and sub_bar["width"] > 50  # a second of the run's few, drawn to scale
    assert page.locator(".wf-total caption", has_text="By tool").count() == 1
    browser.shoot(page, "waterfall", tmp_path)

    last_model = page.locator(".wf-model").last
    sequence = last_model.get_attribute("data-sequence")
    last_model.locator("a", has_text="request").click()
    page.wait_for_url(re.compile(rf"/messages/{sequence}/request/$"))
    shown = page.locator(".seen-messages pre").all_inner_texts()
    [request] = [r for r in model.requests_for("scripted") if "0 files" in str(r.messages)]
    assert len(shown) == len(request.messages)
    assert '"role": "tool"' in shown[-1] and "0 files" in shown[-1]  # the agent tool's result, last
    assert page.dialogs == []
