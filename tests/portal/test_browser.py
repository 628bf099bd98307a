"""The portal in a real headless browser (P6): Debian's chromium driven by Playwright,
against real daphne + qcluster processes (tests/e2e/stack.py) and the scripted model.

Set PORTAL_SCREENSHOTS=1 to (re)write the README's screenshots in docs/screenshots/.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.stack import ROOT, Stack
from tests.scripted_llm import Reply, ScriptedLLM, ToolCall

CHROMIUM = os.environ.get("PORTAL_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
EXPERT, PASSWORD = "expert", "expert-pw"
TIMEOUT_MS = 30_000

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not (shutil.which(CHROMIUM) or os.access(CHROMIUM, os.X_OK)),
        reason=f"no chromium at {CHROMIUM} (apt-get install -y chromium; .ci/run installs it)",
    ),
    pytest.mark.skipif(
        bool(os.environ.get("DATABASE_URL")),
        reason="browser tests start their own server on SQLite; they run once, in the SQLite pass",
    ),
]

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (requirements-dev.txt)"
)


@pytest.fixture(scope="module")
def stack(scripted_llm_server: ScriptedLLM) -> Iterator[Stack]:
    """daphne + one qcluster on a SQLite file, an expert account, and the demo data."""
    # a first-feedback pulse after 1 s without a token (default 8 s): the "thinking…" test
    # the watch sockets on a daphne of their own, as `manage.py serve` runs them
    stack = Stack(
        model_url=scripted_llm_server.url,
        redis=False,
        postgres=False,
        watch_server=True,
        AGENT_TIMEOUT_FIRST_FEEDBACK="1",
    )
    try:
        stack.manage(
            "shell",
            "-c",
            "from django.contrib.auth.models import User;"
            f"User.objects.create_user({EXPERT!r}, password={PASSWORD!r}, is_staff=True)",
        )
        stack.manage("load_demo", "--owner", EXPERT)
        yield stack
    finally:
        stack.stop()


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def model(scripted_llm_server: ScriptedLLM) -> Iterator[ScriptedLLM]:
    scripted_llm_server.reset()
    yield scripted_llm_server
    scripted_llm_server.reset()


@pytest.fixture
def page(chromium: Any, stack: Stack) -> Iterator[Any]:
    """A fresh browser context, logged in as the expert through the login form."""
    context = chromium.new_context(viewport={"width": 1400, "height": 900}, base_url=base(stack))
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page.dialogs = []  # every alert/confirm a page opens, recorded and dismissed
    page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))
    page.goto("/")
    assert "/login/" in page.url
    page.fill("input[name=username]", EXPERT)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/$"))
    yield page
    context.close()


def base(stack: Stack) -> str:
    return f"http://127.0.0.1:{stack.port}"


def start_run(page: Any, task: str, name: str) -> str:
    page.goto("/traces/new/")
    page.fill("textarea[name=task]", task)
    page.fill("input[name=name]", name)
    page.click("button:has-text('Start')")
    page.wait_for_url(re.compile(r"/traces/[^/]+/$"))
    return page.url.rstrip("/").rsplit("/", 1)[-1]


def wait_for_status(page: Any, status: str) -> None:
    """Until the run ended in `status` and the page reloaded itself into its final state."""
    page.wait_for_function(
        """s => document.getElementById('trace-status').textContent.trim() === s
               && document.querySelector('script[data-trace]').dataset.live === '0'
               && document.readyState === 'complete'
               && window.tracePage.settled()""",
        arg=status,
        timeout=TIMEOUT_MS,
    )


def conversation(page: Any) -> Any:
    return page.locator("#messages")


def shoot(page: Any, name: str, tmp_path: Path) -> None:
    folder = ROOT / "docs" / "screenshots" if os.environ.get("PORTAL_SCREENSHOTS") else tmp_path
    page.screenshot(path=str(folder / f"{name}.png"), full_page=True)


def test_the_main_pages_render_and_can_be_screenshotted(page: Any, tmp_path: Path) -> None:
    page.goto("/")
    # the two waiting (approval, answer) and the loop-flagged demo traces stand out
    assert page.locator("tr.attention").count() == 3
    shoot(page, "trace-list", tmp_path)

    page.click("text=Quarterly sales summary")
    page.wait_for_selector("ol.tree")
    assert page.locator(".branches a.chip").count() >= 3  # main, the rewound branch, the reflection
    assert page.locator(".goals li").count() == 4
    shoot(page, "trace-detail", tmp_path)

    page.goto("/experiences/")
    assert page.locator("article.experience").count() == 2
    shoot(page, "experiences", tmp_path)

    page.goto("/")
    page.click("text=Delete merged deployment branches")
    assert "git push origin --delete" in page.locator("#approvals textarea").input_value()
    shoot(page, "approval", tmp_path)
    assert page.dialogs == []


def test_start_a_run_watch_it_stream_then_rewind_at_message_3(
    page: Any, model: ScriptedLLM, stack: Stack
) -> None:
    sockets: list[str] = []
    page.on("websocket", lambda socket: sockets.append(socket.url))
    model.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("list_files", {})]),
            Reply(text="The workspace is empty, so there is nothing to summarise yet.", chunk_delay=0.25),
            Reply(text="Rewound: here is the **short** version."),
        ],
    )
    trace_id = start_run(page, "Summarise the files here", "browser run")

    # Tokens stream into the live box while the model answers, then the run completes.
    page.wait_for_function("document.getElementById('live-text').textContent.includes('workspace')")
    wait_for_status(page, "completed")
    page.wait_for_selector("text=nothing to summarise yet")
    assert conversation(page).locator(".toolcall .tool-name", has_text="list_files").count() == 1
    # the page watched on the watch sockets' own server (AGENT_WATCH_PORT), not on the page's
    assert sockets and all(
        url.startswith(f"ws://127.0.0.1:{stack.watch_port}/api/traces/") for url in sockets
    )

    third = page.locator("#m3")
    third.locator("summary", has_text="Rewind here").click()
    third.locator("textarea[name=text]").fill("Give me the short version instead")
    third.locator("button", has_text="Rewind with this text").click()
    page.wait_for_selector("text=Rewound to message 3")
    wait_for_status(page, "completed")
    conversation(page).locator("text=Rewound: here is the").wait_for()
    assert "nothing to summarise yet" not in conversation(page).inner_text()

    # The old answer stays on a branch of the tree, one click away.
    chips = page.locator(".branches a.chip")
    assert chips.count() >= 2
    chips.filter(has_not_text="main").first.click()
    page.wait_for_selector("text=not the main path")
    assert "nothing to summarise yet" in conversation(page).inner_text()
    assert trace_id in page.url


def test_the_live_box_says_thinking_until_the_first_token(page: Any, model: ScriptedLLM) -> None:
    model.script("scripted", [Reply(text="Here after a long think.", delay=4, chunk_delay=0.3)])
    start_run(page, "Think hard", "thinking run")

    # No token for 4 s: the first-feedback pulses (every 1 s here) show "thinking…".
    page.wait_for_function(
        """() => !document.getElementById('live').hidden
                 && document.getElementById('live-state').textContent.startsWith('thinking… ')"""
    )
    assert page.locator("#live-state.thinking").count() == 1
    assert page.locator("#live-text").inner_text() == ""
    # The first token turns it back into the stream, which the message then replaces.
    page.wait_for_function("document.getElementById('live-text').textContent.includes('Here')")
    assert page.locator("#live-state").inner_text() == "streaming…"
    wait_for_status(page, "completed")
    conversation(page).locator("text=Here after a long think.").wait_for()


def test_approve_a_draft_experience(page: Any, stack: Stack) -> None:
    code = stack.manage(
        "shell",
        "-c",
        "from memory.services import experience_create;"
        "print(experience_create(rule='Run the tests before **committing**.', condition='changing code').code)",
    ).split()[-1]
    page.goto("/experiences/")
    card = page.locator(f"article#{code}")
    assert "draft" in card.locator(".badge").first.inner_text()
    card.locator("button", has_text="Approve").click()
    page.wait_for_selector(f"text={code} approved")
    assert page.locator(f"article#{code}").count() == 0  # left the review queue
    page.goto("/experiences/?status=approved")
    assert page.locator(f"article#{code} .badge", has_text="approved").count() == 1


def test_deny_a_pending_tool_call(page: Any, model: ScriptedLLM) -> None:
    # The demo trace's model is openai/gpt-4o-mini; the scripted server answers it by that name.
    model.script("gpt-4o-mini", ["Understood: I will keep the branches."])
    page.goto("/?status=waiting")
    page.click("text=Delete merged deployment branches")
    page.fill("#approvals input[name=note]", "keep them for the audit")
    page.click("#approvals button:has-text('Deny')")
    page.wait_for_selector("text=Denied bash")
    wait_for_status(page, "completed")
    page.wait_for_selector("text=I will keep the branches")
    assert page.locator("#approvals").count() == 0


XSS = (
    "Look: <script>alert('script')</script> <img src=x onerror=\"alert('img')\"> "
    "[click me](javascript:alert('link')) <a href=\"javascript:alert('raw')\">raw link</a> "
    "<b onmouseover=\"alert('hover')\">hover me</b>"
)


def test_an_xss_payload_in_model_output_stays_inert(page: Any, model: ScriptedLLM) -> None:
    model.script("scripted", [Reply(text=XSS)])
    start_run(page, "Say something dangerous", "xss run")
    wait_for_status(page, "completed")
    messages = conversation(page)
    messages.locator("text=Look:").wait_for()
    assert messages.locator("script, img, iframe").count() == 0
    for link in ("click me", "raw link"):
        if messages.locator("a", has_text=link).count():
            messages.locator("a", has_text=link).click()
    messages.locator("text=hover me").hover()
    page.wait_for_timeout(500)
    assert page.dialogs == []
    hrefs = messages.locator("a[href]").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert not [h for h in hrefs if h.lower().startswith("javascript:")]


def figure(page: Any, name: str) -> str:
    return page.locator(f'[data-figure="{name}"]').inner_text().strip()


def test_the_header_and_the_plan_follow_a_run_without_a_reload(page: Any, model: ScriptedLLM) -> None:
    model.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("goal", {"action": "add", "description": "Count the files"})]),
            Reply(tool_calls=[ToolCall("list_files", {})]),
            Reply(text="There are no files here at all, so the count is zero.", chunk_delay=0.4),
        ],
    )
    start_run(page, "Count the files", "live header run")
    page.evaluate("window.loadedOnce = true")  # gone if the page reloads itself
    # While the last answer still streams: the plan, the figures and the tool result are in.
    page.wait_for_function("document.getElementById('live-text').textContent.includes('files')")
    assert figure(page, "messages") not in ("0", "")
    page.locator("#panel-plan", has_text="Count the files").wait_for()
    assert page.locator("#trace-status").inner_text().strip() == "running"
    assert int(figure(page, "messages")) >= 5
    assert figure(page, "tokens") != "0"
    assert conversation(page).locator(".toolcall .badge", has_text="no result yet").count() == 0
    assert conversation(page).locator(".toolcall .tool-name", has_text="list_files").count() == 1
    assert int(page.locator("#event-count").inner_text()) == page.locator("#events li").count()
    wait_for_status(page, "completed")
    page.wait_for_selector("text=the count is zero")
    # the goal the agent never closed says so, rather than "in progress" forever
    page.locator("#panel-plan li.goal", has_text="Count the files").locator(".badge.left-open").wait_for()
    open_goals = page.locator("#panel-plan li.goal:not(.goal-completed):not(.goal-abandoned)")
    assert open_goals.count() == page.locator("#panel-plan .badge.left-open").count() >= 1
    assert page.evaluate("window.loadedOnce") is True
    # the streamed tokens went into the message, none into the timeline
    assert page.locator("#events .ev-token").count() == 0


def test_a_reconnect_mid_run_misses_nothing_and_doubles_nothing(page: Any, model: ScriptedLLM) -> None:
    model.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("list_files", {})]),
            Reply(
                text="one two three four five six seven eight nine ten",
                tool_calls=[ToolCall("list_files", {})],
                chunk_delay=0.3,
            ),
            Reply(text="All done after the blip.", chunk_delay=0.2),
        ],
    )
    start_run(page, "Survey twice", "reconnect run")
    page.wait_for_function("document.getElementById('live-text').textContent.includes('two')")
    page.evaluate("window.tracePage.drop()")  # the socket drops mid-answer; events go on meanwhile
    wait_for_status(page, "completed")
    page.wait_for_selector("text=All done after the blip")
    live_ids = [text.strip() for text in page.locator("#events li .mono").all_inner_texts()]
    live_messages = page.locator("#messages [id^=m]").evaluate_all("els => els.map(e => e.id)")
    page.reload()
    assert [text.strip() for text in page.locator("#events li .mono").all_inner_texts()] == live_ids
    assert page.locator("#messages [id^=m]").evaluate_all("els => els.map(e => e.id)") == live_messages
    assert len(set(live_ids)) == len(live_ids)


def test_an_explore_with_three_children_is_watchable_on_the_parents_page(
    page: Any, model: ScriptedLLM
) -> None:
    def answer(request: dict[str, Any]) -> Reply:
        text = json.dumps(request.get("messages", []))
        if "Explore the three parts" in text:  # the parent, once its children are done
            return Reply(text="Merged: the three parts hold nothing.")
        for part in ("alpha", "beta", "gamma"):
            if f"Look at part {part}" in text and '"role": "tool"' not in text:
                return Reply(tool_calls=[ToolCall("list_files", {})], delay=0.5)
            if f"Look at part {part}" in text:
                return Reply(text=f"Part {part} holds nothing of note, I looked twice.", chunk_delay=0.5)
        return Reply(text="Merged: the three parts hold nothing.")

    model.script(
        "scripted",
        [
            Reply(
                tool_calls=[
                    ToolCall("agent", {"task": [f"Look at part {p}" for p in ("alpha", "beta", "gamma")]})
                ]
            )
        ]
        + [answer] * 7,
    )
    start_run(page, "Explore the three parts", "explore run")
    page.evaluate("window.loadedOnce = true")
    # Each child's messages and streamed text reach the parent's page while the parent runs.
    for part in ("alpha", "beta", "gamma"):
        page.locator("#panel-subtraces li[data-child]", has_text=f"Look at part {part}").wait_for()
    page.wait_for_function(
        """() => [...document.querySelectorAll('[data-child-live]')]
                 .some(box => box.textContent.includes('holds nothing'))"""
    )
    assert page.locator("#trace-status").inner_text().strip() == "running"
    page.locator("#panel-subtraces .child-messages .tool-name", has_text="list_files").first.wait_for()
    wait_for_status(page, "completed")
    page.wait_for_selector("text=Merged: the three parts")
    assert page.locator("#panel-subtraces li[data-child] > .badge", has_text="completed").count() == 3
    assert page.evaluate("window.loadedOnce") is True


def test_a_10000_message_trace_page_loads(page: Any, stack: Stack) -> None:
    trace_id = stack.manage(
        "shell",
        "-c",
        "import uuid; from bench.harness import populate_trace; from traces.models import Trace;"
        "from django.contrib.auth.models import User; t = str(uuid.uuid4()); populate_trace(t, 10000);"
        f"Trace.objects.filter(pk=t).update(owner=User.objects.get(username={EXPERT!r})); print(t)",
    ).split()[-1]
    response = page.goto(f"/traces/{trace_id}/")
    assert response.ok
    assert page.locator("#messages article.msg").count() <= 50
    page.locator(".pager", has_text="of 10,000 on this path").wait_for()
    page.locator("#panel-tree .branches a.chip").first.wait_for()  # the tree, loaded on demand
    assert page.locator("#panel-tree ol.tree li").count() < 40
    page.fill(".pager input[name=at]", "5000")
    page.click(".pager button:has-text('Go')")
    page.wait_for_url(re.compile(r"at=5000"))
    shown = page.locator("#messages article.msg").evaluate_all("els => els.map(e => +e.dataset.sequence)")
    assert any(4900 <= sequence <= 5100 for sequence in shown), shown
