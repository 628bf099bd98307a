"""The browser tools: open, act, read and screenshot a web page in a real Chromium.

One browser per trace run (`tools/browser/`), kept across the run's calls (cookies,
the open page) and closed when the run ends, stops or loses its lease. Every
request a page makes passes the webfetch network policy. Each result ends with the
page's state: URL, title and its accessibility tree, cut to a limit. Offered only
where Chromium is installed (`tools/browser/__init__.py:unavailable_reason`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from django.conf import settings
from PIL import Image

from tools import browser as browsers
from tools.browser import actions
from tools.browser.actions import PageState
from tools.registry import tool
from traces.media.blobs import blob_put
from traces.media.request import accepts_images
from traces.runner.tool_api import ToolContext, ToolResult

T = TypeVar("T")
SCREENSHOTS_DIR = "screenshots"


def _run(ctx: ToolContext, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    session = browsers.session_for(ctx)
    return session.call(make, timeout=settings.AGENT_BROWSER_CALL_TIMEOUT, interruption=ctx.interruption)


def _result(title: str, state: PageState) -> ToolResult:
    output = state.render()
    # C3: a long page state is read once; later requests keep only this note (browser_read re-reads)
    long = len(output) > settings.AGENT_SHOWN_ONCE_CHARS
    memory = f"{title}: page {state.title or '(untitled)'!r}, {len(output):,} characters, shown once; "
    return ToolResult(
        title=title,
        output=output,
        long_term_memory=memory + "browser_read shows the page again" if long else None,
        include_output_only_once=long,
        metadata={"url": state.url, "page_title": state.title, "element": state.element},
    )


@tool(risk="safe", inline=True, unavailable=browsers.unavailable_reason)
def browser_open(ctx: ToolContext, url: str) -> ToolResult:
    """Open a web page in the browser and return its state.

    The state is the page's URL, title and accessibility tree (roles and names of
    its headings, links, buttons, fields and text), cut to a limit. The browser
    keeps cookies and the open page across calls of this run. Only public internet
    addresses can be reached; localhost and private networks are refused. Where the
    server bounds the browser's memory, a page that uses more crashes and the result
    says so.

    Args:
        url: The full address, starting with http:// or https://.
    """
    session = browsers.session_for(ctx)
    state = _run(ctx, lambda: actions.navigate(session, url))
    return _result(f"Opened {state.url}", state)


@tool(risk="risky", read_only=False, inline=True, unavailable=browsers.unavailable_reason)
def browser_act(
    ctx: ToolContext,
    action: str,
    role: str | None = None,
    name: str | None = None,
    text: str | None = None,
    selector: str | None = None,
    value: str | None = None,
) -> ToolResult:
    """Act on an element of the current page (click, type, choose) and return the page's state after.

    Name the element the way the page's accessibility tree shows it: a role and its
    accessible name (role="button", name="Sign in"; role="textbox", name="Email"),
    else its visible text, else a CSS selector as a last resort. When several
    elements match, the first is used and the result says so. Clicks that start a
    download save the file under downloads/ in the workspace.

    Args:
        action: One of click, fill (type into a field, replacing its text), select (choose an option
            by value or label), check, uncheck, press (a key such as "Enter"), hover.
        role: The element's ARIA role: button, link, textbox, checkbox, combobox, heading, ...
        name: The element's accessible name (its label or text), used with role.
        text: Visible text of the element, when it has no useful role.
        selector: A CSS selector, only when role/name and text cannot name it.
        value: The text for fill, the option for select, the key for press.
    """
    session = browsers.session_for(ctx)
    state = _run(
        ctx,
        lambda: actions.act(session, action, role=role, name=name, text=text, selector=selector, value=value),
    )
    return _result(f"{action} {state.element} on {state.url}", state)


@tool(risk="safe", inline=True, unavailable=browsers.unavailable_reason)
def browser_read(ctx: ToolContext, wait_for_text: str | None = None) -> ToolResult:
    """Read the current page's state again, optionally waiting until some text appears.

    Use it after an action whose effect comes later (a page that loads content),
    or to check that an action did what you meant.

    Args:
        wait_for_text: Visible text to wait for (up to the action timeout) before reading.
    """
    session = browsers.session_for(ctx)
    state = _run(ctx, lambda: actions.read(session, wait_for_text))
    return _result(f"Read {state.url}", state)


@tool(risk="safe", inline=True, unavailable=browsers.unavailable_reason)
def browser_screenshot(ctx: ToolContext, full_page: bool = False) -> ToolResult:
    """Take a screenshot of the current page: you see the image when your model accepts images,
    and it is saved as a PNG file in the workspace either way.

    Use it when the layout matters (a chart, a visual check, something the
    accessibility tree does not explain); reading the page is cheaper.

    Args:
        full_page: Capture the whole scrollable page instead of the visible window.
    """
    session = browsers.session_for(ctx)
    data, state = _run(ctx, lambda: actions.screenshot(session, full_page))
    name = f"screenshot-{time.strftime('%Y%m%d-%H%M%S')}-{len(data) % 10000:04d}.png"
    saved = None
    if ctx.workspace_writable:
        target = ctx.workspace / SCREENSHOTS_DIR / name
        target.parent.mkdir(exist_ok=True)
        target.write_bytes(data)
        saved = f"{SCREENSHOTS_DIR}/{name}"
    result = _result(f"Screenshot of {state.url}" + (f", saved to {saved}" if saved else ""), state)
    result.metadata["screenshot"] = saved
    model = (ctx.config.model if ctx.config else None) or getattr(ctx.trace, "model", None) or ""
    if accepts_images(model):
        result.images.append(_image_part(data, name))
    else:
        result.output = (
            f"[{model} does not accept images: the screenshot is only in the file]\n" + result.output
        )
    return result


def _image_part(data: bytes, name: str) -> dict[str, Any]:
    import io

    with Image.open(io.BytesIO(data)) as image:
        width, height = image.size
    return {
        "type": "image_url",
        "image_url": {"url": f"media:{blob_put(data)}"},
        "media": {"mime": "image/png", "bytes": len(data), "width": width, "height": height, "name": name},
    }
