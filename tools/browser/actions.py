"""What the browser tools do on a session's page (run on the session's loop), and the
compact page state every result ends with."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from tools.browser.session import BrowserSession
from traces.runner.tool_api import ToolError

ACTIONS = ("click", "fill", "select", "check", "uncheck", "press", "hover")
NEEDS_VALUE = frozenset({"fill", "select", "press"})


@dataclass
class PageState:
    url: str
    title: str
    text: str
    cut: bool = False
    element: str | None = None
    notes: list[str] = field(default_factory=list)

    def render(self) -> str:
        lines = [f"URL: {self.url}", f"Title: {self.title or '(none)'}"]
        if self.element:
            lines.append(f"Acted on: {self.element}")
        lines += [f"[{note}]" for note in self.notes]
        body = self.text + (f"\n[cut at {len(self.text)} characters]" if self.cut else "")
        return "\n".join(lines) + "\n\nPage (accessibility tree):\n" + body


async def page_state(session: BrowserSession, element: str | None = None) -> PageState:
    page = session.page
    limit = settings.AGENT_BROWSER_TEXT_LIMIT
    try:
        text = await page.locator("body").aria_snapshot(timeout=2000)
    except Exception:
        text = "(the page has no readable body yet)"
    notes = list(session.notes) + [f"refused {item}" for item in session.refused]
    session.notes.clear()
    notes += [f"downloaded to the workspace: {item}" for item in session.downloads]
    session.refused.clear()
    session.downloads.clear()
    try:
        title = await page.title()
    except Exception:
        title = ""
    return PageState(page.url, title, text[:limit], len(text) > limit, element, notes)


async def navigate(session: BrowserSession, url: str) -> PageState:
    if not url.startswith(("http://", "https://")):
        raise ToolError("url must start with http:// or https://")
    refusal = session.refusal(url)
    if refusal:
        raise ToolError(f"Refused {url}: {refusal}")
    try:
        await session.page.goto(url, wait_until="domcontentloaded")
    except Exception as exc:
        if "net::ERR_ABORTED" not in str(exc):  # a download answers a navigation this way
            raise ToolError(f"Could not open {url}: {await _failure(session, exc)}") from None
    await session.settle(1.0)
    return await page_state(session)


def locate(
    session: BrowserSession, role: str | None, name: str | None, text: str | None, selector: str | None
) -> tuple[Any, str]:
    """The element a call names (role + accessible name, then visible text, then CSS) and how it was named."""
    page = session.page
    if role:
        return page.get_by_role(role, name=name) if name else page.get_by_role(
            role
        ), f"{role} {name or ''}".strip()
    if text:
        return page.get_by_text(text), f"text {text!r}"
    if selector:
        return page.locator(selector), f"selector {selector!r}"
    raise ToolError("name the element: role (with name), text, or selector.")


async def act(
    session: BrowserSession,
    action: str,
    *,
    role: str | None,
    name: str | None,
    text: str | None,
    selector: str | None,
    value: str | None,
) -> PageState:
    if action not in ACTIONS:
        raise ToolError(f"action must be one of {', '.join(ACTIONS)}.")
    if action in NEEDS_VALUE and value is None:
        raise ToolError(f"{action} needs a value.")
    locator, described = locate(session, role, name, text, selector)
    count = await locator.count()
    if count == 0:
        raise ToolError(f"No element matches {described} on {session.page.url}; read the page first.")
    note = f"{count} elements matched {described}; used the first" if count > 1 else None
    target = locator.first
    try:
        if action == "fill":
            await target.fill(value or "")
        elif action == "select":
            await target.select_option(value)
        elif action == "press":
            await target.press(value or "Enter")
        else:
            await getattr(target, action)()
    except Exception as exc:
        raise ToolError(f"{action} on {described} failed: {await _failure(session, exc)}") from None
    await session.settle(settings.AGENT_BROWSER_ACTION_TIMEOUT)
    state = await page_state(session, element=described)
    if note:
        state.notes.insert(0, note)
    return state


async def read(session: BrowserSession, wait_for_text: str | None) -> PageState:
    if session.page is None or session.page.url == "about:blank":
        raise ToolError("No page is open; use browser_open first.")
    if wait_for_text:
        try:
            await session.page.get_by_text(wait_for_text).first.wait_for(state="visible")
        except Exception:
            state = await page_state(session)
            state.notes.insert(
                0, f"{wait_for_text!r} did not appear within {settings.AGENT_BROWSER_ACTION_TIMEOUT:g} s"
            )
            return state
    return await page_state(session)


async def screenshot(session: BrowserSession, full_page: bool) -> tuple[bytes, PageState]:
    if session.page is None or session.page.url == "about:blank":
        raise ToolError("No page is open; use browser_open first.")
    data = await session.page.screenshot(full_page=full_page, type="png")
    return data, await page_state(session)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


async def _failure(session: BrowserSession, exc: BaseException) -> str:
    """Why an action failed: the page's or browser's crash in words (`BrowserSession._on_crash`,
    `_on_disconnected`), else the error.

    A call on a page that crashed fails with "crashed", or with "has been closed" when
    the crash handler replaced (closed) the page or the whole browser was killed; the
    event saying so can come just after the call's own error, so it is waited for.
    """
    if "crashed" in str(exc) or "has been closed" in str(exc):
        note = await session.crash_note()
        if note:
            return note
    return _first_line(exc)
