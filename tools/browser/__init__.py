"""The browser the `browser_*` tools drive (tools/builtin/browser.py): one Chromium per
trace run (`session.py`), what the tools do on its page (`actions.py`).

Sessions are kept here by trace id for the run's calls and closed by the runner's
`after_run` extension point however the run ends (end, stop, lease loss, crash); a
run that pauses (`waiting`) saves its browser first, for the trace's next run segment
(`pause.py`). `close_all` runs at interpreter exit as well.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import threading
from typing import Any

from django.conf import settings

from tools import sandbox
from tools.browser import pause
from tools.browser.session import BrowserSession
from traces.models import TraceStatus
from traces.runner.tool_api import ToolContext

ENDED = frozenset({TraceStatus.COMPLETED, TraceStatus.FAILED, TraceStatus.STOPPED})
_sessions: dict[str, BrowserSession] = {}
_lock = threading.Lock()


def unavailable_reason() -> str | None:
    """Why the browser tools cannot run here, or None."""
    chromium = settings.AGENT_BROWSER_CHROMIUM
    if not os.access(chromium, os.X_OK):
        return f"Chromium is not installed at {chromium} (Debian: apt-get install chromium)"
    if shutil.which("setpriv") is None:
        return "setpriv (util-linux) is missing"
    if importlib.util.find_spec("playwright") is None:
        return "the playwright package is not installed"
    if settings.AGENT_SANDBOX:  # Chromium runs under bubblewrap like bash's commands
        reason = sandbox.unavailable_reason()
        if reason:
            return f"the sandbox cannot run here ({reason})"
    return None


def session_for(ctx: ToolContext) -> BrowserSession:
    """The browser of the run making this call, started on first use."""
    with _lock:
        session = _sessions.get(ctx.trace_id)
        if session is None or session.closed:
            session = BrowserSession(ctx.trace_id, ctx.workspace, writable=ctx.workspace_writable)
            _sessions[ctx.trace_id] = session
        return session


def close_for_trace(trace_id: str, status: str) -> None:
    """A run of `trace_id` ended in `status`: a pause (`waiting`) saves its browser for the
    next run segment (`pause.py`); any other end drops a saved one; either way the
    browser closes. A lost lease or a crash (status still `running`) leaves saved state
    to the run that owns the trace now."""
    with _lock:
        session = _sessions.pop(trace_id, None)
    if status == TraceStatus.WAITING:
        if session is not None:
            session.save_for_pause()
    elif status in ENDED:
        pause.discard(trace_id)
    if session is not None:
        session.close()


def close_all() -> None:
    with _lock:
        sessions = list(_sessions.values())
        _sessions.clear()
    for session in sessions:
        session.close()


def open_sessions() -> list[str]:
    with _lock:
        return [trace_id for trace_id, session in _sessions.items() if not session.closed]


atexit.register(close_all)


def forget_traces(sender: Any = None, *, trace_ids: list[str], **kwargs: Any) -> None:
    """The traces are being deleted (traces/services/delete.py): drop their paused browser state."""
    for trace_id in trace_ids:
        pause.discard(trace_id)
