"""The browser's download size limit, against a real Chromium."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.tools.test_browser import allow_private, call, ctx, pytestmark  # noqa: F401  (fixtures, skip)
from tools import browser as browsers
from traces.runner.tool_api import ToolContext

BIG_BYTES = 50 * 1024 * 1024
CHUNK = 64 * 1024
BIG_PAGE = b'<html><body><a href="/big">Get the archive</a></body></html>'


class LimitSite(BaseHTTPRequestHandler):
    sent: list[int]
    finished: threading.Event

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.path == "/big":
            self._stream()
            return
        body = {"/big-page": BIG_PAGE}.get(self.path, b"<html><title>light</title><p>ok</p></html>")
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
    handler = type("Handler", (LimitSite,), {"sent": sent, "finished": finished})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}"  # type: ignore[attr-defined]
    httpd.sent, httpd.finished = sent, finished  # type: ignore[attr-defined]
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


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
