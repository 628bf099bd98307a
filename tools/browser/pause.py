"""A browser kept across a pause: a run that ends `waiting` (an approval, an answer)
saves its session's state, and the trace's next run segment restores it on its first
browser call.

The state is Playwright's `storage_state()` (cookies, localStorage), each open page's
URL and which is current, and the values the model typed into the current page's form
fields. It holds cookies, i.e. the run's logins, so it lives in a private file under
AGENT_BROWSER_STATE_ROOT (outside every workspace: no tool can read it), mode 0600,
read once and deleted by the restore, and deleted as well when the run ends any other
way (`discard`). Pages are reloaded on restore, so what is not captured here (a POST's
result, scripts' memory, a password typed) is gone.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from django.conf import settings

logger = logging.getLogger(__name__)

# Fields whose value differs from the page's default, addressed by id, else name (and
# position among fields of that name), else a CSS path of nth-of-type steps. Hidden
# fields (tokens the reload renews), passwords and files are left out.
COLLECT_FIELDS = """() => {
  const skip = new Set(['hidden', 'password', 'file', 'submit', 'button', 'reset', 'image']);
  const path = (el) => {
    if (el.id) return '#' + CSS.escape(el.id);
    if (el.name) return el.tagName.toLowerCase() + '[name="' + CSS.escape(el.name) + '"]';
    const steps = [];
    for (let node = el; node && node.nodeType === 1 && node !== document.documentElement; node = node.parentElement) {
      let n = 1;
      for (let s = node.previousElementSibling; s; s = s.previousElementSibling) if (s.tagName === node.tagName) n++;
      steps.unshift(node.tagName.toLowerCase() + ':nth-of-type(' + n + ')');
    }
    return steps.join(' > ');
  };
  const fields = [];
  for (const el of document.querySelectorAll('input, textarea, select')) {
    if (el.tagName === 'INPUT' && skip.has(el.type)) continue;
    const selector = path(el);
    const index = Array.from(document.querySelectorAll(selector)).indexOf(el);
    if (el.tagName === 'SELECT') {
      const options = Array.from(el.options);
      const values = options.filter(o => o.selected).map(o => o.value);
      let defaults = options.filter(o => o.defaultSelected).map(o => o.value);
      if (!defaults.length && !el.multiple && options.length) defaults = [options[0].value];
      if (JSON.stringify(values) !== JSON.stringify(defaults)) fields.push({selector, index, values});
    } else if (el.type === 'checkbox' || el.type === 'radio') {
      if (el.checked !== el.defaultChecked) fields.push({selector, index, checked: el.checked});
    } else if (el.value !== el.defaultValue) {
      fields.push({selector, index, value: el.value});
    }
  }
  return fields;
}"""

REFILL_FIELDS = """(fields) => {
  let filled = 0;
  for (const f of fields) {
    let el;
    try { el = document.querySelectorAll(f.selector)[f.index]; } catch (e) { continue; }
    if (!el) continue;
    if (f.values) { for (const o of el.options) o.selected = f.values.includes(o.value); }
    else if ('checked' in f && f.checked !== undefined) el.checked = f.checked;
    else el.value = f.value;
    el.dispatchEvent(new Event('input', {bubbles: true}));
    el.dispatchEvent(new Event('change', {bubbles: true}));
    filled++;
  }
  return filled;
}"""


def state_path(trace_id: str) -> Path:
    """Where a paused run of `trace_id` keeps its browser (trace ids are UUID-like)."""
    safe = "".join(c for c in trace_id if c.isalnum() or c in "-_") or "trace"
    return Path(settings.AGENT_BROWSER_STATE_ROOT) / f"{safe}.json"


async def capture(context: Any, current: Any) -> dict[str, Any]:
    """The state of a context and its current page (on the session's loop)."""
    pages = [page for page in context.pages if not page.is_closed()]
    try:
        fields = await current.evaluate(COLLECT_FIELDS)
    except Exception:  # a page mid-navigation: no fields to keep
        fields = []
    return {
        "storage_state": await context.storage_state(),
        "urls": [page.url for page in pages],
        "current": pages.index(current) if current in pages else 0,
        "fields": fields,
    }


def save(trace_id: str, state: dict[str, Any]) -> None:
    """Write the state privately: a 0600 file in a 0700 directory, replaced atomically."""
    target = state_path(trace_id)
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    partial = target.with_suffix(".part")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(state, out)
    os.replace(partial, target)


def take(trace_id: str) -> dict[str, Any] | None:
    """The saved state of `trace_id`, deleted as it is read (it is restored once), or None."""
    target = state_path(trace_id)
    try:
        text = target.read_text()
    except FileNotFoundError:
        return None
    finally:
        target.unlink(missing_ok=True)
    try:
        state: dict[str, Any] = json.loads(text)
    except ValueError:
        logger.warning("unreadable saved browser state of %s dropped", trace_id)
        return None
    return state


def discard(trace_id: str) -> None:
    """Drop a saved state: the run ended without a pause, its cookies end with it."""
    state_path(trace_id).unlink(missing_ok=True)


async def reopen(context: Any, state: dict[str, Any]) -> tuple[Any, str]:
    """Open the saved pages in `context` (made with the saved storage state), re-fill the
    current one's fields; the current page and a note for the model."""
    urls: list[str] = state.get("urls") or ["about:blank"]
    pages, failed = [], []
    for url in urls[: settings.AGENT_BROWSER_MAX_PAGES]:
        page = await context.new_page()
        pages.append(page)
        if url.startswith(("http://", "https://")):
            try:
                await page.goto(url, wait_until="domcontentloaded")
            except Exception as exc:
                failed.append(f"{url[:200]}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
    current = pages[min(int(state.get("current") or 0), len(pages) - 1)]
    filled = 0
    if state.get("fields"):
        try:
            filled = int(await current.evaluate(REFILL_FIELDS, state["fields"]))
        except Exception:
            filled = 0
    note = (
        f"the browser was restored after a pause: {len(pages)} page(s) reloaded with the run's cookies"
        f" and local storage, {filled} form field value(s) re-filled on the current page; anything else"
        " the page held (script state, a password typed, a POST's result) is gone, so read the page first"
    )
    if failed:
        note += "; could not reload " + "; ".join(failed)
    return current, note
