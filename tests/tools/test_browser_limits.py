"""The browser's memory cgroup and its download size limit, against a real Chromium."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.tools.test_browser import allow_private, call, ctx, pytestmark  # noqa: F401  (fixtures, skip)
from tools import browser as browsers
from tools.browser import cgroup
from tools.browser.session import BrowserSession, kill_marked
from traces.runner.tool_api import ToolContext

BIG_BYTES = 50 * 1024 * 1024
CHUNK = 64 * 1024
HOG = b"""<html><head><title>hog</title></head><body><script>
const keep = [];
for (let i = 0; i < 400; i++) { const a = new Uint8Array(16 * 1024 * 1024); a.fill(i % 250 + 1); keep.push(a); }
document.title = 'survived';
</script></body></html>"""
BIG_PAGE = b'<html><body><a href="/big">Get the archive</a></body></html>'

needs_cgroup = pytest.mark.skipif(
    os.geteuid() != 0 or cgroup.memory_limit() is None,
    reason="the browser's memory cgroup needs root and a writable memory cgroup hierarchy "
    "(v1 memory, or v2 with memory delegated); the browser runs unbounded here",
)


class LimitSite(BaseHTTPRequestHandler):
    marker: list[str]
    sent: list[int]
    finished: threading.Event

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.path == "/kill":  # the browser dies while it waits for this page
            kill_marked(self.marker[0])
            time.sleep(2)
            return
        if self.path == "/big":
            self._stream()
            return
        body = {"/hog": HOG, "/big-page": BIG_PAGE}.get(
            self.path, b"<html><title>light</title><p>ok</p></html>"
        )
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _stream(self) -> None:
        """50 MB, slowly and without a Content-Length: the browser learns the size only as it comes."""
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Disposition", 'attachment; filename="archive.bin"')
        self.end_headers()
        try:
            while self.sent[0] < BIG_BYTES:
                self.wfile.write(b"x" * CHUNK)
                self.sent[0] += CHUNK
                time.sleep(0.01)  # about 6 MB/s: 8 s for the whole body
        except OSError:
            return  # the browser hung up
        self.finished.set()


@pytest.fixture
def limit_site() -> Iterator[Any]:
    sent = [0]
    finished = threading.Event()
    marker = [""]
    handler = type("Handler", (LimitSite,), {"sent": sent, "finished": finished, "marker": marker})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}"  # type: ignore[attr-defined]
    httpd.sent, httpd.finished, httpd.marker = sent, finished, marker  # type: ignore[attr-defined]
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


async def _noop() -> None:
    return None


def _cgroup_of(pid: int, controller: str) -> str:
    """The cgroup path of `pid` in the hierarchy of `controller` ("" for v2), as /proc shows it."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _id, controllers, path = line.split(":", 2)
        if controller in controllers.split(",") or (controller == "" and controllers == ""):
            return path
    raise AssertionError(f"pid {pid} has no {controller or 'v2'} cgroup")


@needs_cgroup
def test_chromium_runs_in_a_session_cgroup_with_the_memory_limit_removed_on_close(
    tmp_path: Path, settings: Any
) -> None:
    settings.AGENT_BROWSER_MEMORY_MB = 768
    session = BrowserSession("cgroup-test", tmp_path)
    try:
        session.call(_noop, timeout=30)
        assert session._cgroup is not None
        memory_dir = session._cgroup.memory_file.parent
        controller = "" if session._cgroup.memory_file.name == "memory.max" else "memory"
        pids = _marked(session.marker)
        assert pids, "no Chromium process found"
        for pid in pids:
            assert str(memory_dir).endswith(_cgroup_of(pid, controller)), pid
        assert int(session._cgroup.memory_file.read_text()) == 768 * 1024 * 1024
        assert [int(pid) for pid in (memory_dir / "cgroup.procs").read_text().split()] != []
        paths = list(session._cgroup.paths)
        assert any((path / "pids.max").exists() for path in paths)
    finally:
        session.close()

    assert [path for path in paths if path.exists()] == []


def _marked(marker: str) -> list[int]:
    from tools.browser.session import MARKER_SWITCH

    needle = f"{MARKER_SWITCH}={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and needle in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@needs_cgroup
@pytest.mark.usefixtures("allow_private")
def test_a_page_allocating_past_the_memory_limit_crashes_with_a_clear_error(
    ctx: ToolContext,  # noqa: F811
    limit_site: Any,
    settings: Any,
) -> None:
    settings.AGENT_BROWSER_MEMORY_MB = 256
    started = time.monotonic()

    result = call(ctx, "browser_open", url=f"{limit_site.url}/hog")

    assert time.monotonic() - started < 20
    assert result.is_error, result.output
    # the kernel picks what to kill in the cgroup: the hog's renderer, or at times the browser
    assert "the page crashed" in result.output or "the browser crashed" in result.output, result.output
    assert "too much memory" in result.output
    assert "256 MB" in result.output
    again = call(ctx, "browser_open", url=f"{limit_site.url}/light")
    assert not again.is_error and "Title: light" in again.output


@pytest.mark.usefixtures("allow_private")
def test_a_browser_killed_under_a_call_fails_it_clearly_and_the_next_call_starts_a_new_one(
    ctx: ToolContext,  # noqa: F811
    limit_site: Any,
) -> None:
    first = call(ctx, "browser_open", url=f"{limit_site.url}/light")
    assert not first.is_error, first.output
    session = browsers.session_for(ctx)
    limit_site.marker[0] = session.marker
    old_cgroup = session._cgroup

    result = call(ctx, "browser_open", url=f"{limit_site.url}/kill")

    assert result.is_error
    assert "the browser crashed: its process was killed" in result.output, result.output
    assert _marked(session.marker) == []
    again = call(ctx, "browser_open", url=f"{limit_site.url}/light")
    assert not again.is_error and "Title: light" in again.output, again.output
    assert "crashed" not in again.output  # the note was told once, with the failure
    assert browsers.session_for(ctx) is session and _marked(session.marker) != []
    if old_cgroup is not None:
        assert not any(path.exists() for path in old_cgroup.paths)


@pytest.mark.usefixtures("allow_private")
def test_a_download_passing_the_limit_is_cancelled_while_it_comes_in(
    ctx: ToolContext,  # noqa: F811
    limit_site: Any,
    settings: Any,
) -> None:
    settings.AGENT_BROWSER_DOWNLOAD_MAX_BYTES = 1024 * 1024
    call(ctx, "browser_open", url=f"{limit_site.url}/big-page")

    result = call(ctx, "browser_act", action="click", role="link", name="Get the archive")

    assert not limit_site.finished.is_set(), "the server sent the whole body first"
    assert limit_site.sent[0] < BIG_BYTES
    assert "download archive.bin: not kept (" in result.output
    assert "is over 1048576; cancelled while it downloaded" in result.output
    assert not (ctx.workspace / "downloads").exists() or list((ctx.workspace / "downloads").iterdir()) == []
    scratch = browsers.session_for(ctx).scratch / "downloads"
    assert list(scratch.glob("*")) == []


@pytest.mark.usefixtures("allow_private")
def test_without_a_memory_cgroup_the_browser_works_unbounded_and_a_check_says_so(
    ctx: ToolContext,  # noqa: F811
    limit_site: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tools.checks import browser_status

    monkeypatch.setattr(cgroup, "cgroup_bases", lambda: ())  # as on a server that is not root

    result = call(ctx, "browser_open", url=f"{limit_site.url}/light")

    assert not result.is_error and "Title: light" in result.output
    assert browsers.session_for(ctx)._cgroup is None
    (warning,) = browser_status()
    assert warning.id == "tools.W005" and "memory is not bounded" in warning.msg
