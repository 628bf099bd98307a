"""Downloads a page starts: watched while they come in, kept in the workspace when small enough.

Chromium writes a download to `<guid>.crdownload` in the session's scratch directory
(Playwright's downloads_path) and renames it when done. A watcher polls that file's
size every DOWNLOAD_POLL_SECONDS and cancels the download (`Download.cancel`) once it
passes AGENT_BROWSER_DOWNLOAD_MAX_BYTES, removing the partial file; a finished one is
checked again and moved to `downloads/` in the workspace. What happened goes to the
next result as a note.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings

if TYPE_CHECKING:
    from tools.browser.session import BrowserSession

DOWNLOADS_DIR = "downloads"
DOWNLOAD_POLL_SECONDS = 0.1
PARTIAL_SUFFIX = ".crdownload"  # Chromium's name for a download's file while it comes in


async def save(session: BrowserSession, download: Any) -> None:
    """Watch `download` as it comes in; keep it under downloads/ in the workspace or say why not."""
    name = Path(download.suggested_filename or "download").name.lstrip(".") or "download"
    limit = settings.AGENT_BROWSER_DOWNLOAD_MAX_BYTES
    finished = asyncio.ensure_future(download.path())
    passed = await _watch(session, finished, limit)
    if passed is not None:  # cancelled as it came in, so at most a poll's worth past the limit
        partial, size = passed
        await download.cancel()
        with contextlib.suppress(Exception):
            await finished
        partial.unlink(missing_ok=True)
        session.refused.append(
            f"download {name}: not kept ({size} bytes is over {limit}; cancelled while it downloaded)"
        )
        return
    try:
        source: Path | None = finished.result()
    except Exception:
        source = None
    size = source.stat().st_size if source is not None else 0
    if source is None or size > limit or not session.writable:
        why = "it failed" if source is None else f"{size} bytes is over {limit}"
        session.refused.append(
            f"download {name}: not kept ({why if session.writable else 'read-only workspace'})"
        )
        with contextlib.suppress(Exception):
            await download.delete()
        return
    target = session.workspace / DOWNLOADS_DIR / name
    target.parent.mkdir(exist_ok=True)
    await download.save_as(target)
    await download.delete()
    session.downloads.append(f"{DOWNLOADS_DIR}/{name} ({size} bytes)")


async def _watch(
    session: BrowserSession, finished: asyncio.Future[Path], limit: int
) -> tuple[Path, int] | None:
    """Until the download finishes, poll its growing file; (file, size) once it passes `limit`."""
    partial: Path | None = None
    try:
        while not finished.done():
            partial = partial or _claim_partial(session)
            size = _size(partial)
            if partial is not None and size > limit:
                return partial, size
            await asyncio.wait({finished}, timeout=DOWNLOAD_POLL_SECONDS)
    finally:
        if partial is not None:
            session.partials.discard(partial)
    return None


def _claim_partial(session: BrowserSession) -> Path | None:
    """An in-progress download file no other watcher has (Chromium names it `<guid>.crdownload`;
    Playwright does not say which is whose, so downloads started at once may swap files, and
    then the size check after the download still holds)."""
    try:
        found = sorted(
            path
            for path in (session.scratch / "downloads").glob(f"*{PARTIAL_SUFFIX}")
            if path not in session.partials
        )
    except OSError:
        return None
    if not found:
        return None
    session.partials.add(found[0])
    return found[0]


def _size(path: Path | None) -> int:
    try:
        return path.stat().st_size if path is not None else 0
    except OSError:
        return 0  # renamed as it finished, or not there yet
