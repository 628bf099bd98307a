"""The browser tools against pages this test serves on loopback, in a real Chromium."""

from __future__ import annotations

import ipaddress
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings

import tools.builtin.browser  # noqa: F401  (registers the browser tools)
from tests.media_samples import media_root
from tests.scripted_llm import Reply, ToolCall
from tools import browser as browsers
from tools.browser.session import MARKER_SWITCH, BrowserEnded, BrowserSession
from tools.netguard import IPAddress, blocked_reason
from tools.registry import default_registry
from traces.runner.config import RunConfig
from traces.runner.tool_api import ToolContext, ToolError, ToolResult

__all__ = ["media_root"]
pytestmark = pytest.mark.skipif(
    browsers.unavailable_reason() is not None,
    reason=f"browser tools unavailable: {browsers.unavailable_reason()} (scripts/install_system_packages.sh)",
)
TOOLS = {"browser_open", "browser_act", "browser_read", "browser_screenshot"}

FORM = """<html><head><title>Order</title></head><body>
<h1>Order a pizza</h1>
<form action="/order" method="post">
  <label>Name <input name="name"></label>
  <label>Size <select name="size"><option>small</option><option>large</option></select></label>
  <button type="submit">Place order</button>
</form></body></html>"""
DELAYED = """<html><head><title>Slow</title></head><body><div id="out">loading</div>
<script>setTimeout(() => { document.getElementById('out').textContent = 'Report ready: 42 rows'; }, 1200);</script>
</body></html>"""
DOWNLOAD = '<html><body><a href="/file.csv">Get the data</a></body></html>'
POPUPS = """<html><body><button onclick="for (let i = 0; i < 3; i++) window.open('/other?' + i)">Open three</button>
</body></html>"""


class Site(BaseHTTPRequestHandler):
    seen: list[str]
    slow: threading.Event

    def log_message(self, *args: Any) -> None:
        pass

    def _send(
        self, body: bytes, content_type: str = "text/html", extra: dict[str, str] | None = None
    ) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self.seen.append(f"GET {self.path}")
        pages = {"/form": FORM, "/delayed": DELAYED, "/download": DOWNLOAD, "/popups": POPUPS}
        if self.path in pages:
            self._send(pages[self.path].encode())
        elif self.path == "/login":  # logs in: a session cookie, then the order form
            self._send(FORM.encode(), extra={"Set-Cookie": "session=s3cret-login; Path=/; HttpOnly"})
        elif self.path == "/file.csv":
            self._send(b"a,b\n1,2\n", "text/csv", {"Content-Disposition": 'attachment; filename="data.csv"'})
        elif self.path == "/slow":
            self.slow.wait(30)
            self._send(b"<html><body>late</body></html>")
        elif self.path == "/private-embed":
            port = self.headers.get("X-Other-Port", "")
            self._send(
                f'<html><body><p>hi</p><img src="http://127.0.0.2:{port}/pixel.png"></body></html>'.encode()
            )
        else:
            self._send(b"<html><body>other</body></html>")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        form = self.rfile.read(length).decode()
        self.seen.append(f"POST {self.path} {form}")
        cookie = self.headers.get("Cookie")
        signed = f" as {cookie}" if cookie else ""
        self._send(
            f"<html><head><title>Thanks</title></head><body><p>Ordered: {form}{signed}</p></body></html>".encode()
        )


class Server:
    def __init__(self, host: str = "127.0.0.1") -> None:
        self.seen: list[str] = []
        self.slow = threading.Event()
        handler = type("Handler", (Site,), {"seen": self.seen, "slow": self.slow})
        self.httpd = ThreadingHTTPServer((host, 0), handler)
        self.url = f"http://{host}:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.slow.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def site() -> Iterator[Server]:
    server = Server()
    yield server
    server.close()


@pytest.fixture
def allow_private(settings: Any) -> None:
    settings.AGENT_WEBFETCH_ALLOW_PRIVATE = True


@pytest.fixture
def runner(llm: Any, tmp_path: Path, settings: Any) -> Any:
    from traces.runner import AgentRunner

    settings.AGENT_WORKSPACE_ROOT = tmp_path / "workspaces"
    return AgentRunner()


@pytest.fixture
def ctx(tmp_path: Path) -> Iterator[ToolContext]:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    trace: Any = type(
        "T", (), {"trace_id": f"browser-test-{os.getpid()}-{time.monotonic_ns()}", "model": ""}
    )()
    yield ToolContext(trace=trace, workspace=workspace)
    browsers.close_for_trace(trace.trace_id, "completed")


def call(ctx: ToolContext, tool: str, **arguments: Any) -> ToolResult:
    return default_registry.execute(tool, json.dumps(arguments), ctx, offered=TOOLS)


def chromium_descendants() -> list[int]:
    """Live processes below this test process that carry the browser's marker switch."""
    parents: dict[int, int] = {}
    marked: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if stat[0] == "Z":
                continue
            parents[int(entry.name)] = int(stat[1])
            if MARKER_SWITCH.encode() in (entry / "cmdline").read_bytes():
                marked.add(int(entry.name))
        except (OSError, IndexError):
            continue
    mine = set()
    for pid in marked:
        ancestor = pid
        while ancestor > 1:
            ancestor = parents.get(ancestor, 0)
            if ancestor == os.getpid():
                mine.add(pid)
                break
    return sorted(mine)


@pytest.mark.usefixtures("allow_private")
def test_a_form_is_filled_by_role_and_name_submitted_and_its_result_read_back(
    ctx: ToolContext, site: Server
) -> None:
    opened = call(ctx, "browser_open", url=f"{site.url}/form")
    assert not opened.is_error, opened.output
    assert 'textbox "Name"' in opened.output and 'button "Place order"' in opened.output
    assert opened.metadata["url"] == f"{site.url}/form"

    call(ctx, "browser_act", action="fill", role="textbox", name="Name", value="Ada")
    call(ctx, "browser_act", action="select", role="combobox", name="Size", value="large")
    done = call(ctx, "browser_act", action="click", role="button", name="Place order")

    assert not done.is_error, done.output
    assert "Ordered: name=Ada&size=large" in done.output
    assert "Title: Thanks" in done.output and "Acted on: button Place order" in done.output
    assert "POST /order name=Ada&size=large" in site.seen
    missing = call(ctx, "browser_act", action="click", role="button", name="Nope")
    assert missing.is_error and "No element matches button Nope" in missing.output


@pytest.mark.usefixtures("allow_private")
def test_reading_waits_for_text_a_page_renders_later(ctx: ToolContext, site: Server) -> None:
    opened = call(ctx, "browser_open", url=f"{site.url}/delayed")
    assert "Report ready" not in opened.output

    read = call(ctx, "browser_read", wait_for_text="Report ready")

    assert "Report ready: 42 rows" in read.output


@pytest.mark.usefixtures("allow_private")
def test_a_download_lands_in_the_workspace(ctx: ToolContext, site: Server) -> None:
    call(ctx, "browser_open", url=f"{site.url}/download")

    result = call(ctx, "browser_act", action="click", role="link", name="Get the data")

    assert "downloaded to the workspace: downloads/data.csv (8 bytes)" in result.output
    assert (ctx.workspace / "downloads" / "data.csv").read_bytes() == b"a,b\n1,2\n"


@pytest.mark.usefixtures("allow_private")
def test_a_download_over_the_size_limit_is_not_kept(ctx: ToolContext, site: Server, settings: Any) -> None:
    settings.AGENT_BROWSER_DOWNLOAD_MAX_BYTES = 4
    call(ctx, "browser_open", url=f"{site.url}/download")

    result = call(ctx, "browser_act", action="click", role="link", name="Get the data")

    # Cancelled as it came in or refused once finished: the download is small enough to race
    # the watcher's poll, and either way it is not kept and the model is told why.
    assert "download data.csv: not kept (8 bytes is over 4" in result.output
    assert not (ctx.workspace / "downloads" / "data.csv").exists()


def test_a_private_address_is_refused_without_a_connection(ctx: ToolContext, site: Server) -> None:
    assert django_settings.AGENT_WEBFETCH_ALLOW_PRIVATE is False

    result = call(ctx, "browser_open", url=f"{site.url}/form")

    assert result.is_error and "a loopback address" in result.output
    assert site.seen == []


def only_127_0_0_1(address: IPAddress) -> str | None:
    return None if address == ipaddress.ip_address("127.0.0.1") else blocked_reason(address)


def test_requests_a_page_makes_pass_the_guard(tmp_path: Path, site: Server) -> None:
    other = Server("127.0.0.2")
    session = BrowserSession("guard-test", tmp_path)
    session.check = only_127_0_0_1  # the test page's own server is let through, nothing else
    try:
        from tools.browser import actions

        async def open_embedding() -> Any:
            await session._started(lambda: _noop())
            await session.page.set_extra_http_headers({"X-Other-Port": other.url.rsplit(":", 1)[1]})
            return await actions.navigate(session, f"{site.url}/private-embed")

        state = session.call(open_embedding, timeout=30)
    finally:
        session.close()
        other.close()

    assert other.seen == []
    assert any("127.0.0.2" in note and "a loopback address" in note for note in state.notes)


async def _noop() -> None:
    return None


@pytest.mark.usefixtures("allow_private")
def test_a_stop_during_a_slow_load_ends_the_browser_within_2_s(tmp_path: Path, site: Server) -> None:
    session = BrowserSession("stop-test", tmp_path)
    stop = threading.Event()
    from tools.browser import actions

    session.call(lambda: _noop(), timeout=30)  # launched
    assert chromium_descendants()
    threading.Timer(1.0, stop.set).start()
    started = time.monotonic()

    with pytest.raises(BrowserEnded, match="the run was asked to stop"):
        session.call(
            lambda: actions.navigate(session, f"{site.url}/slow"),
            timeout=60,
            interruption=lambda: "the run was asked to stop" if stop.is_set() else None,
        )

    assert time.monotonic() - started < 3.0  # 1 s before the stop + at most 2 s to end
    assert "GET /slow" in site.seen
    deadline = time.monotonic() + 2
    while chromium_descendants() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert chromium_descendants() == []


@pytest.mark.skipif(not django_settings.AGENT_SANDBOX, reason="AGENT_SANDBOX=off: Chromium runs unconfined")
def test_chromium_runs_in_the_sandbox_without_the_servers_files_or_secrets(
    tmp_path: Path, settings: Any
) -> None:
    os.environ["AGENT_TEST_SECRET"] = "s3cret"
    session = BrowserSession("sandbox-test", tmp_path)
    try:
        session.call(lambda: _noop(), timeout=30)
        browsers_seen = [pid for pid in chromium_descendants() if _exe(pid).endswith("/chromium")]
        assert browsers_seen
        for pid in browsers_seen:
            assert not Path(f"/proc/{pid}/root{Path.cwd()}/manage.py").exists()
            assert Path(f"/proc/{pid}/root/usr/bin").is_dir()
            assert b"AGENT_TEST_SECRET" not in Path(f"/proc/{pid}/environ").read_bytes()
            status = Path(f"/proc/{pid}/status").read_text()
            assert "CapEff:\t0000000000000000" in status  # no capabilities, even as root
    finally:
        del os.environ["AGENT_TEST_SECRET"]
        session.close()


def _exe(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


def test_no_chromium_survives_a_killed_worker(tmp_path: Path) -> None:
    code = (
        "import django, sys; django.setup();"
        "from pathlib import Path; from tools.browser.session import BrowserSession;"
        "s = BrowserSession('w', Path(sys.argv[1]));"
        "import asyncio; s.call(lambda: asyncio.sleep(0), timeout=30);"
        "print(s.marker, flush=True); import time; time.sleep(60)"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "agentsite.settings", "PYTHONPATH": str(Path.cwd())}
    worker = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, env=env)
    assert worker.stdout is not None
    marker = worker.stdout.readline().decode().strip()
    needle = f"{MARKER_SWITCH}={marker}"
    assert marker and _processes_with(needle)

    os.kill(worker.pid, signal.SIGKILL)
    worker.wait()

    deadline = time.monotonic() + 5
    while _processes_with(needle) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _processes_with(needle) == []


def _processes_with(needle: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and needle.encode() in (entry / "cmdline").read_bytes():
                if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(entry.name))
        except (OSError, IndexError):
            continue
    return found


@pytest.mark.django_db
@pytest.mark.usefixtures("allow_private", "media_root")
def test_a_screenshot_reaches_the_model_as_an_image_and_no_chromium_survives_the_run(
    runner: Any, llm: Any, site: Server
) -> None:
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("browser_open", {"url": f"{site.url}/form"})]),
            Reply(tool_calls=[ToolCall("browser_screenshot", {})]),
            Reply(text="It shows an order form."),
        ],
    )

    result = runner.run_result([{"role": "user", "content": "look"}], RunConfig(tools=sorted(TOOLS)))

    assert result.status == "completed"
    last = llm.requests_for("scripted")[-1].body["messages"]
    images = [
        p
        for m in last
        if isinstance(m.get("content"), list)
        for p in m["content"]
        if p["type"] == "image_url"
    ]
    assert len(images) == 1 and images[0]["image_url"]["url"].startswith("data:image/png;base64,")
    assert [m["role"] for m in last[-3:]] == ["assistant", "tool", "user"]
    assert "saved to screenshots/" in last[-2]["content"]
    assert browsers.open_sessions() == []
    assert chromium_descendants() == []
    # the expert sees the screenshot in the conversation, served behind the trace's visibility
    from django.contrib.auth.models import User
    from django.test import Client

    client = Client()
    client.force_login(User.objects.create_user("screenshot-expert", is_staff=True))
    page = client.get(f"/traces/{result.trace_id}/").content.decode()
    thumbnail = re.search(r'<figure class="thumb"><a href="[^"]+"[^>]*><img src="([^"]+)"', page)
    assert thumbnail, "no screenshot thumbnail on the trace page"
    image = client.get(thumbnail.group(1))
    assert image.status_code == 200 and image["Content-Type"].startswith("image/")


@pytest.mark.usefixtures("allow_private")
def test_a_stop_of_a_real_run_during_a_slow_load_ends_it_and_its_browser_within_2_s(
    runner: Any, llm: Any, site: Server, transactional_db: Any
) -> None:
    from traces.models import Trace

    llm.script("scripted", [Reply(tool_calls=[ToolCall("browser_open", {"url": f"{site.url}/slow"})])])
    thread = threading.Thread(
        target=lambda: list(runner.run([{"role": "user", "content": "open"}], RunConfig(tools=sorted(TOOLS))))
    )
    thread.start()
    deadline = time.monotonic() + 30
    while "GET /slow" not in site.seen and time.monotonic() < deadline:
        time.sleep(0.05)
    assert chromium_descendants()

    started = time.monotonic()
    assert type(runner)().stop(Trace.objects.get().trace_id)  # the flag, as from another process
    thread.join(timeout=5)

    assert not thread.is_alive() and time.monotonic() - started < 2.0
    assert Trace.objects.get().status == "stopped"
    assert chromium_descendants() == [] and browsers.open_sessions() == []


@pytest.mark.usefixtures("allow_private")
def test_a_call_over_its_time_limit_closes_the_browser_and_says_so(
    ctx: ToolContext, site: Server, settings: Any
) -> None:
    settings.AGENT_BROWSER_CALL_TIMEOUT = 1.5

    result = call(ctx, "browser_open", url=f"{site.url}/slow")

    assert result.is_error and "the call took longer than 1.5 s" in result.output
    assert "Open the page again" in result.output
    assert chromium_descendants() == []


@pytest.mark.usefixtures("allow_private")
def test_a_model_without_vision_gets_the_screenshot_as_a_file_only(ctx: ToolContext, site: Server) -> None:
    ctx.trace.model = "gpt-3.5-turbo"  # litellm knows it has no vision
    call(ctx, "browser_open", url=f"{site.url}/form")

    result = call(ctx, "browser_screenshot")

    assert result.images == []
    assert "does not accept images: the screenshot is only in the file" in result.output
    saved = result.metadata["screenshot"]
    assert (ctx.workspace / saved).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_without_chromium_the_tools_are_not_offered_and_a_check_says_why(settings: Any) -> None:
    from tools.checks import browser_status

    settings.AGENT_BROWSER_CHROMIUM = "/nonexistent/chromium"

    offered = {t.name for t in default_registry.select(allowed=None, denied=None)}
    (warning,) = browser_status()

    assert not offered & TOOLS
    assert warning.id == "tools.W004" and "Chromium is not installed at /nonexistent/chromium" in warning.msg
    with pytest.raises(ValueError, match="browser_open is not available on this server"):
        default_registry.check_requested(["browser_open"])


def test_a_host_whose_address_changes_after_the_check_is_refused_at_connect(tmp_path: Path) -> None:
    """DNS rebinding: the route guard's lookup passes, the connection's lookup is refused.

    Chromium connects through the session's proxy, which resolves and checks again and
    dials the address it checked, so the changed answer reaches nothing.
    """
    import socket

    host = socket.gethostname()
    try:
        address = socket.getaddrinfo(host, 80, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
    except OSError:
        pytest.skip(f"this machine's name {host} does not resolve")
    target = Server(address)
    answers: list[str] = []

    def rebinding(checked: IPAddress) -> str | None:
        answers.append(str(checked))
        # the tool's own check and the route guard see the first answer, the connection a new one
        return None if len(answers) <= 2 else "a private network address (a later answer)"

    session = BrowserSession("rebinding-test", tmp_path)
    session.check = rebinding
    try:
        from tools.browser import actions

        port = target.url.rsplit(":", 1)[1]
        with pytest.raises(ToolError, match="Could not open"):
            session.call(lambda: actions.navigate(session, f"http://{host}:{port}/form"), timeout=30)
        refused = list(session.refused)
    finally:
        session.close()
        target.close()

    assert target.seen == []
    assert len(answers) >= 3
    assert any(f"a connection to {host}:{port}" in note for note in refused)


def test_the_proxy_tunnels_to_a_checked_address_and_refuses_others(site: Server) -> None:
    import asyncio

    from tools.browser.proxy import GuardedProxy

    other = Server("127.0.0.2")
    refused: list[str] = []

    async def exchange(proxy_url: str, target: str) -> bytes:
        host, port = proxy_url.rsplit("/", 1)[1].split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        answer = await reader.readuntil(b"\r\n\r\n")
        if b" 200 " in answer:
            writer.write(b"GET /form HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer += await reader.read()
        writer.close()
        return answer

    async def scenario() -> tuple[bytes, bytes]:
        proxy = GuardedProxy(only_127_0_0_1, refused=refused)
        url = await proxy.start()
        try:
            allowed = await exchange(url, site.url.removeprefix("http://"))
            denied = await exchange(url, other.url.removeprefix("http://"))
        finally:
            await proxy.close()
        return allowed, denied

    try:
        allowed, denied = asyncio.run(scenario())
    finally:
        other.close()

    assert b"200 Connection established" in allowed and b"Order a pizza" in allowed
    assert denied.startswith(b"HTTP/1.1 403") and other.seen == []
    assert "a loopback address" in refused[0]


@pytest.mark.usefixtures("allow_private")
def test_tabs_past_the_page_limit_are_closed_with_a_note(
    ctx: ToolContext, site: Server, settings: Any
) -> None:
    settings.AGENT_BROWSER_MAX_PAGES = 2
    call(ctx, "browser_open", url=f"{site.url}/popups")

    result = call(ctx, "browser_act", action="click", role="button", name="Open three")

    assert "refused a new tab: at most 2 pages are open" in result.output
    session = browsers.session_for(ctx)
    assert session.call(lambda: _page_count(session), timeout=10) == 2


async def _page_count(session: BrowserSession) -> int:
    return len(session._context.pages)


@pytest.mark.usefixtures("allow_private")
def test_a_paused_run_keeps_its_browser_cookie_and_typed_value_until_the_approved_click(
    runner: Any,
    llm: Any,
    site: Server,
    settings: Any,
    tmp_path: Path,
    monkeypatch: Any,
    django_capture_on_commit_callbacks: Any,
    db: Any,
) -> None:
    from django_q.conf import Conf

    from tests.factories import make_user
    from tools.browser import pause
    from traces.models import Approval, Message, Trace
    from traces.services.approvals import approval_decide

    monkeypatch.setattr(Conf, "SYNC", True)  # the approval's resume runs here (tests/traces/conftest.py)
    settings.AGENT_BROWSER_STATE_ROOT = tmp_path / "browser-state"
    owner, expert = make_user("integrator"), make_user("expert", staff=True)
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("browser_open", {"url": f"{site.url}/login"})]),
            Reply(
                tool_calls=[
                    ToolCall(
                        "browser_act", {"action": "fill", "role": "textbox", "name": "Name", "value": "Ada"}
                    )
                ]
            ),
            Reply(
                tool_calls=[
                    ToolCall("browser_act", {"action": "click", "role": "button", "name": "Place order"})
                ]
            ),
            Reply(text="Ordered."),
        ],
    )

    def approve_and_resume(trace_id: str) -> Trace:
        saved = pause.state_path(trace_id)
        assert saved.exists() and saved.stat().st_mode & 0o777 == 0o600
        assert settings.AGENT_WORKSPACE_ROOT not in saved.parents  # no tool of the run can read it
        assert browsers.open_sessions() == [] and chromium_descendants() == []
        approval = Approval.objects.get(trace_id=trace_id, status="pending")
        with django_capture_on_commit_callbacks(execute=True):
            approval_decide(user=expert, trace_id=trace_id, approval_id=approval.pk, decision="approve")
        return Trace.objects.get(pk=trace_id)

    result = runner.run_result(
        [{"role": "user", "content": "order for Ada"}],
        RunConfig(tools=sorted(TOOLS), confirm_policy="ask-risky", owner_id=owner.pk),
    )
    assert result.status == "waiting"  # the fill waits for an expert
    trace = approve_and_resume(result.trace_id)
    assert trace.status == "waiting"  # the fill ran on the restored page; the click waits
    trace = approve_and_resume(trace.trace_id)

    assert trace.status == "completed"
    posts = [line for line in site.seen if line.startswith("POST")]
    assert posts == ["POST /order name=Ada&size=small"]
    results = list(Message.objects.filter(trace=trace, role="tool").order_by("sequence"))
    fill, click = results[1].content, results[2].content
    assert "restored after a pause" in fill and "reloaded" in fill
    assert "restored after a pause" in click and "1 form field value(s) re-filled" in click
    assert "Ordered: name=Ada&size=small as session=s3cret-login" in click  # the server's answer
    assert not pause.state_path(trace.trace_id).exists()  # the completed run dropped it
    assert not list((settings.AGENT_WORKSPACE_ROOT / trace.trace_id).rglob("*.json"))
    assert browsers.open_sessions() == [] and chromium_descendants() == []
