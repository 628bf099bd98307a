"""An image upload in a real browser (L5, P6): the new-run form sends it, the model gets
an image part, the trace page shows the thumbnail the authenticated view serves, and
nothing the model writes turns into an image.

The stack, the browser and the logged-in page come from test_browser.py; imported
here, its module-scoped fixtures start a stack for this module.
"""

from __future__ import annotations

import base64
import re
from typing import Any

from playwright.sync_api import expect

from tests.media_samples import png_bytes
from tests.portal import test_browser as browser
from tests.scripted_llm import ScriptedLLM

# test_browser's fixtures (this module gets its own stack) and its skips.
stack, chromium, model, page = browser.stack, browser.chromium, browser.model, browser.page
pytestmark = browser.pytestmark

# Markdown images, raw HTML and a data: URL in the model's answer: none may load anything.
ANSWER = (
    "A red rectangle. ![chart](/static/portal/portal.css) ![remote](http://127.0.0.1:9/x.png) "
    '<img src="/favicon.ico" onerror="window.pwned = 1"> '
    "![inline](data:image/png;base64,iVBORw0KGgo=)"
)


def test_an_uploaded_image_reaches_the_model_and_shows_as_a_served_thumbnail(
    page: Any, model: ScriptedLLM
) -> None:
    png = png_bytes(640, 480)
    model.script("scripted", [ANSWER])
    page.goto("/traces/new/")
    page.fill("textarea[name=task]", "What is in this picture?")
    page.fill("input[name=name]", "picture run")
    page.set_input_files(
        "input[name=attachments]", files=[{"name": "plot.png", "mimeType": "image/png", "buffer": png}]
    )
    page.click("button:has-text('Start')")
    page.wait_for_url(re.compile(r"/traces/[^/]+/$"))
    trace_id = page.url.rstrip("/").rsplit("/", 1)[-1]
    browser.wait_for_status(page, "completed")

    [request] = model.requests_for("scripted")
    [asked] = [m for m in request.messages if m["role"] == "user"]
    text, image = asked["content"]
    assert text == {"type": "text", "text": "What is in this picture?"}
    url = image["image_url"]["url"]
    assert url.startswith("data:image/png;base64,") and base64.b64decode(url.split(",", 1)[1]) == png

    images = browser.conversation(page).locator("img")
    # the thumbnail; the model's text made none (the panel may still be refreshing)
    expect(images).to_have_count(1)
    thumbnail = images.first
    thumbnail.scroll_into_view_if_needed()
    src = thumbnail.get_attribute("src") or ""
    assert re.fullmatch(rf"/traces/{trace_id}/messages/\d+/media/1", src)
    assert thumbnail.get_attribute("alt") == "plot.png"
    page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=thumbnail.element_handle())
    box = thumbnail.bounding_box()
    assert box is not None and box["width"] <= 162 and box["height"] <= 162  # 160 px and the border
    assert abs(box["width"] / box["height"] - 640 / 480) < 0.05
    assert thumbnail.evaluate("img => getComputedStyle(img).borderTopStyle") == "solid"
    served = page.request.get(src)
    assert served.status == 200 and served.headers["content-type"] == "image/jpeg"
    assert page.evaluate("window.pwned") is None
    expect(browser.conversation(page)).to_contain_text("A red rectangle.")
