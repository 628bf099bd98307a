"""Output shown once (C3, seed 004 「双层记忆管理」): a long webfetch page or browser page state
reaches the model once, then stands in the history as its short long-term memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.scripted_llm import Reply, ToolCall
from tests.tools.test_browser import TOOLS, Server, site  # noqa: F401 (fixture)
from tests.tools.test_web import WebServer, web  # noqa: F401 (fixture)
from tools import browser as browsers
from traces.models import Message
from traces.runner import AgentRunner, RunConfig

pytestmark = pytest.mark.django_db
ONCE = "[output shown once; kept as] "


@pytest.fixture
def runner(llm: Any, tmp_path: Path, settings: Any) -> AgentRunner:
    settings.AGENT_WORKSPACE_ROOT = tmp_path / "workspaces"
    settings.AGENT_WEBFETCH_ALLOW_PRIVATE = True  # the local test servers
    return AgentRunner()


def tool_contents(request: Any) -> list[str]:
    return [str(m["content"]) for m in request.body["messages"] if m["role"] == "tool"]


def test_a_long_page_is_shown_once_and_a_short_one_stays(runner, llm, web: WebServer, settings):  # noqa: F811
    settings.AGENT_SHOWN_ONCE_CHARS = 3000
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("webfetch", {"url": web.url("/big?bytes=5000")})]),
            Reply(tool_calls=[ToolCall("webfetch", {"url": web.url("/big?bytes=200")})]),
            Reply(text="read both"),
        ],
    )

    result = runner.run_result([{"role": "user", "content": "read"}], RunConfig(tools=["webfetch"]))

    assert result.status == "completed"
    second, third = llm.requests_for("scripted")[1:]
    assert "x" * 5000 in tool_contents(second)[0]  # the call right after the fetch sees the page
    long, short = tool_contents(third)
    assert long.startswith(ONCE + "webfetch read http://") and "5,000 characters, shown once" in long
    assert "x" * 200 in short  # short pages stay as they are
    stored = Message.objects.filter(trace_id=result.trace_id, role="tool").order_by("sequence")
    assert [m.kind for m in stored] == ["once", ""]
    assert "x" * 5000 in stored[0].content  # the store keeps the page; only requests drop it


@pytest.mark.skipif(browsers.unavailable_reason() is not None, reason="no Chromium here")
def test_a_long_browser_page_state_is_shown_once(runner, llm, site: Server, settings):  # noqa: F811
    settings.AGENT_SHOWN_ONCE_CHARS = 100
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("browser_open", {"url": f"{site.url}/form"})]),
            Reply(tool_calls=[ToolCall("browser_read", {})]),
            Reply(text="seen"),
        ],
    )

    result = runner.run_result([{"role": "user", "content": "look"}], RunConfig(tools=sorted(TOOLS)))

    assert result.status == "completed"
    second, third = llm.requests_for("scripted")[1:]
    assert "Page (accessibility tree):" in tool_contents(second)[0]
    opened, read = tool_contents(third)
    assert opened.startswith(ONCE + "Opened http://") and "browser_read shows the page again" in opened
    assert "Page (accessibility tree):" in read  # the newest read is shown in full
