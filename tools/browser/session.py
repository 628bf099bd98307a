"""One Chromium per trace run, driven by Playwright (async API) on a thread of its own.

Playwright objects belong to the event loop that made them, while a run's tool calls
come from whatever thread runs them; so each session owns a loop thread and a call
submits a coroutine to it (`BrowserSession.call`), waiting while it polls the run's
interruption (stop, lease loss) and the whole-call timeout. Ending the session from
any thread closes the browser, which makes an in-flight navigation fail at once.

Chromium runs headless under bubblewrap (`chromium-sandboxed.sh`; `chromium.sh`
with AGENT_SANDBOX=off), through setpriv --pdeathsig KILL: it dies with Playwright's
driver, which exits when this process's pipe to it closes. As root it runs in a
cgroup of the session's own (`cgroup.py`: memory and task limits), removed on close;
a renderer the limit kills shows as a crashed page, and a browser process it kills
(the kernel picks) as a crashed browser, started anew on the next call. Its environment is
scrubbed (no secrets of the server), and every request a page makes, websockets
included, passes `tools.netguard` first. A download is watched while it comes in and
cancelled once its file passes AGENT_BROWSER_DOWNLOAD_MAX_BYTES.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import secrets
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
from django.conf import settings

from tools.browser import downloads, pause
from tools.browser.cgroup import BrowserCgroup
from tools.browser.proxy import GuardedProxy
from tools.netguard import blocked_reason, resolve_host
from traces.runner.tool_api import ToolError

T = TypeVar("T")
HERE = Path(__file__).resolve().parent
WRAPPER = HERE / "chromium.sh"  # AGENT_SANDBOX=off: setpriv only
SANDBOXED_WRAPPER = HERE / "chromium-sandboxed.sh"  # bubblewrap, see the script
MARKER_SWITCH = "--agentsite-browser"  # an unknown switch Chromium ignores: finds our processes in /proc
POLL_SECONDS = 0.2
NO_NETWORK_SCHEMES = frozenset({"data", "blob", "about"})
CRASHED = "the page crashed:"  # starts the note `_on_crash` leaves
BROWSER_CRASHED = "the browser crashed:"  # starts the note `_on_disconnected` leaves
CRASH_NOTE_WAIT = 2.0  # how long a failed call waits for the crash event that explains it


class BrowserEnded(ToolError):
    """The session was closed under a call (stop, lease loss, timeout)."""


class BrowserSession:
    """The browser of one trace's run: one context, its pages, its downloads."""

    def __init__(self, trace_id: str, workspace: Path, *, writable: bool = True) -> None:
        self.trace_id = trace_id
        self.workspace = workspace
        self.writable = writable
        self.marker = secrets.token_hex(8)
        self.check = None if settings.AGENT_WEBFETCH_ALLOW_PRIVATE else blocked_reason
        self.refused: list[str] = []  # requests the guard refused since the last call read them
        self.downloads: list[str] = []  # workspace paths of finished downloads, likewise
        self.notes: list[str] = []  # other news for the next result (a restore after a pause)
        self.page: Any = None
        self._browser: Any = None
        self._context: Any = None
        self._playwright: Any = None
        self._proxy: GuardedProxy | None = None
        self._cgroup: BrowserCgroup | None = None
        self._replacing: asyncio.Task[None] | None = None  # a new page for one that crashed
        self.partials: set[Path] = set()  # in-progress download files a watcher has claimed (`downloads.py`)
        self._pending: set[asyncio.Task[None]] = set()
        self.scratch = Path(tempfile.mkdtemp(prefix="agentsite-browser-"))
        self._closed = False
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"browser-{trace_id}", daemon=True
        )
        self._thread.start()

    @property
    def closed(self) -> bool:
        return self._closed

    # --- calls from the run's thread ---------------------------------------------

    def call(
        self,
        make: Callable[[], Coroutine[Any, Any, T]],
        *,
        timeout: float,
        interruption: Callable[[], str | None] | None = None,
    ) -> T:
        """Run `make()` on the browser's loop; BrowserEnded when the run is interrupted
        or `timeout` passes (the browser is closed then: a hung page cannot be trusted)."""
        if self._closed:
            raise BrowserEnded("the browser was closed; open the page again")
        future = asyncio.run_coroutine_threadsafe(self._started(make), self._loop)
        deadline = time.monotonic() + timeout
        while True:
            try:
                return future.result(timeout=max(0.0, min(POLL_SECONDS, deadline - time.monotonic())))
            except concurrent.futures.TimeoutError:
                reason = interruption() if interruption is not None else None
                if reason is None and time.monotonic() < deadline:
                    continue
                future.cancel()
                self.close()
                why = reason or f"the call took longer than {timeout:g} s"
                raise BrowserEnded(f"browser closed: {why}. Open the page again to go on.") from None

    def save_for_pause(self) -> bool:
        """Save the browser's state for the trace's next run segment (`pause.py`); False when
        there is nothing to save (never launched, closed) or it could not be read."""
        if self._closed or self._context is None:
            return False

        async def snapshot() -> dict[str, Any]:
            return await pause.capture(self._context, self.page)

        try:
            state = self.call(snapshot, timeout=settings.AGENT_BROWSER_ACTION_TIMEOUT)
        except Exception:
            return False
        pause.save(self.trace_id, state)
        return True

    def close(self) -> None:
        """Close the browser and end the loop thread; safe from any thread, idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._loop.is_running():
            try:
                asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout=3)
            except Exception:  # a wedged driver: the processes go by force below
                pass
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=2)
        kill_marked(self.marker)
        if self._cgroup is not None:
            self._cgroup.remove()
        shutil.rmtree(self.scratch, ignore_errors=True)

    # --- on the loop ---------------------------------------------------------------

    async def _started(self, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
        if self._browser is not None and not self._browser.is_connected():
            await self._discard()  # killed under us (`_on_disconnected`): a new one below
        if self._browser is None:
            await self._launch()
        if self._replacing is not None:
            with contextlib.suppress(Exception):
                await self._replacing
            self._replacing = None
        return await make()

    async def _launch(self) -> None:
        from playwright.async_api import async_playwright

        self._cgroup = BrowserCgroup.create() if os.geteuid() == 0 else None
        self._proxy = GuardedProxy(self.check, refused=self.refused)
        proxy_url = await self._proxy.start()
        self._playwright = await async_playwright().start()
        args = [
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",  # WebRTC's UDP bypasses the route guard
            f"{MARKER_SWITCH}={self.marker}",
        ]
        if os.geteuid() == 0:
            args.append("--no-sandbox")  # Chromium refuses its own sandbox as root
        self._browser = await self._playwright.chromium.launch(
            executable_path=str(SANDBOXED_WRAPPER if settings.AGENT_SANDBOX else WRAPPER),
            headless=True,
            args=args,
            env=self._environment(),
            downloads_path=str(self.scratch / "downloads"),
            proxy={"server": proxy_url},  # every connection to a host name goes to a checked address
            handle_sigint=False,
            handle_sigterm=False,
            handle_sighup=False,
        )
        self._browser.on("disconnected", self._on_disconnected)
        saved = pause.take(self.trace_id)  # a paused run's browser, read once
        context = await self._browser.new_context(
            accept_downloads=True,
            service_workers="block",
            storage_state=saved["storage_state"] if saved and saved.get("storage_state") else None,
        )
        context.set_default_timeout(settings.AGENT_BROWSER_ACTION_TIMEOUT * 1000)
        context.set_default_navigation_timeout(settings.AGENT_BROWSER_ACTION_TIMEOUT * 1000)
        await context.route("**/*", self._guard)
        await context.route_web_socket("**/*", self._guard_websocket)
        context.on("page", self._on_page)
        self._context = context
        if saved:
            self.page, note = await pause.reopen(context, saved)
            self.notes.append(note)
        else:
            self.page = await context.new_page()

    def _environment(self) -> dict[str, str]:
        home = self.scratch / "home"
        home.mkdir(exist_ok=True)
        return {
            "PATH": "/usr/bin:/bin",
            "HOME": str(home),
            "LANG": "C.UTF-8",
            "AGENT_BROWSER_CHROMIUM": settings.AGENT_BROWSER_CHROMIUM,
            "AGENT_BROWSER_SCRATCH": str(self.scratch),
        } | (self._cgroup.environment() if self._cgroup is not None else {})

    async def _discard(self) -> None:
        """Drop a browser that died under us: its driver, proxy, leftover processes and cgroup."""
        with contextlib.suppress(Exception):
            await self._stop_driver()
        kill_marked(self.marker)
        if self._cgroup is not None:
            self._cgroup.remove()
        self._browser = self._context = self.page = self._playwright = self._proxy = self._cgroup = None
        self._replacing = None

    async def _shutdown(self) -> None:
        for task in asyncio.all_tasks(self._loop):
            if task is not asyncio.current_task():
                task.cancel()
        try:
            if self._browser is not None:
                await asyncio.wait_for(self._browser.close(), timeout=2)
        finally:
            await self._stop_driver()

    async def _stop_driver(self) -> None:
        """Close the guard proxy and stop Playwright's driver (`_shutdown`, `_discard`)."""
        try:
            if self._proxy is not None:
                await self._proxy.close()
        finally:
            if self._playwright is not None:
                await asyncio.wait_for(self._playwright.stop(), timeout=1)

    async def _guard(self, route: Any) -> None:
        url = route.request.url
        reason = await asyncio.to_thread(self.refusal, url)
        try:
            if reason:
                self.refused.append(f"{url[:200]}: {reason}")
                await route.abort("blockedbyclient")
            else:
                await route.continue_()
        except Exception:  # the page went away meanwhile
            pass

    async def _guard_websocket(self, socket: Any) -> None:
        url = socket.url
        reason = await asyncio.to_thread(self.refusal, "http" + url[2:] if url.startswith("ws") else url)
        if reason:
            self.refused.append(f"{url[:200]}: {reason}")
            await socket.close(code=1008, reason="refused by the server's network policy")
        else:
            socket.connect_to_server()

    def refusal(self, url: str) -> str | None:
        """Why a page may not request `url` (the webfetch policy), or None."""
        scheme = urlsplit(url).scheme.lower()
        if scheme in NO_NETWORK_SCHEMES:
            return None
        if scheme not in ("http", "https"):
            return f"the {scheme}: scheme is not allowed"
        if self.check is None:
            return None
        try:
            resolve_host(httpx.URL(url), self.check)
        except (ToolError, httpx.InvalidURL) as exc:
            return str(exc)
        return None

    def _on_page(self, page: Any) -> None:
        if len(self._context.pages) > settings.AGENT_BROWSER_MAX_PAGES:
            self.refused.append(f"a new tab: at most {settings.AGENT_BROWSER_MAX_PAGES} pages are open")
            self._track(page.close())
            return
        page.on("download", lambda download: self._track(downloads.save(self, download)))
        page.on("crash", self._on_crash)
        self.page = page  # a popup the page opened becomes the current page

    def _on_crash(self, page: Any) -> None:
        self.notes.append(
            f"{CRASHED} {page.url[:200]}: its renderer was killed, most likely for using too much "
            f"memory{self._bound()}; a blank page replaces it"
        )
        if page is self.page:
            self._replacing = self._loop.create_task(self._replace_crashed(page))

    def _on_disconnected(self, browser: Any) -> None:
        if self._closed or browser is not self._browser:
            return  # closed by us
        self.notes.append(
            f"{BROWSER_CRASHED} its process was killed, most likely for using too much memory"
            f"{self._bound()}; the next call starts a new browser, without the open pages or their cookies"
        )

    def _bound(self) -> str:
        return f" (the browser may use {settings.AGENT_BROWSER_MEMORY_MB} MB)" if self._cgroup else ""

    async def _replace_crashed(self, page: Any) -> None:
        await self._context.new_page()  # becomes the current page (`_on_page`)
        with contextlib.suppress(Exception):
            await page.close()

    async def crash_note(self, wait: float = CRASH_NOTE_WAIT) -> str | None:
        """Take the note of a page or browser that crashed since the last result, if any,
        waiting up to `wait` s for it: a call's own error can come back before the event."""
        deadline = time.monotonic() + wait
        while True:
            for note in self.notes:
                if note.startswith((CRASHED, BROWSER_CRASHED)):
                    self.notes.remove(note)
                    return note
            if time.monotonic() >= deadline:
                return None
            await asyncio.sleep(0.05)

    def _track(self, coro: Coroutine[Any, Any, None]) -> None:
        task = self._loop.create_task(coro)
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def settle(self, timeout: float) -> None:
        """Let the page react to an action: its load, and downloads it started."""
        await asyncio.sleep(0.3)
        try:
            await self.page.wait_for_load_state("domcontentloaded", timeout=timeout * 1000)
        except Exception:
            pass
        if self._pending:
            await asyncio.wait(set(self._pending), timeout=timeout)


def kill_marked(marker: str) -> int:
    """SIGKILL every process of this machine started with our marker switch; how many."""
    killed = 0
    needle = f"{MARKER_SWITCH}={marker}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "cmdline").read_bytes():
                os.kill(int(entry.name), signal.SIGKILL)
                killed += 1
        except (OSError, ProcessLookupError):
            continue
    return killed
