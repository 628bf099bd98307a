"""What a user may send as images and PDFs, checked and stored (L5).

`media_intake` runs where messages enter: `traces/services/runs.py` (API and
portal) and `run_agent`. It refuses, naming the part, anything but png / jpeg /
webp / gif images and PDFs given as base64 data URLs (or `file` parts), or
images at a public http(s) URL; it enforces the size and count limits of
settings.AGENT_MEDIA_*; it stores the bytes once (`blobs.py`) and returns the
messages with small reference parts (`parts.py`). A PDF becomes a text part
saying which pages follow, and one image part per page.
"""

from __future__ import annotations

import base64
import binascii
import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from django.conf import settings

from tools.netguard import blocked_reason, resolve_host
from traces.media.blobs import blob_put
from traces.media.parts import MEDIA_PREFIX
from traces.media.pdf import PdfUnreadable, render_pages
from traces.runner.config import InvalidRun
from traces.runner.tool_api import ToolError

IMAGE_TYPES = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif"}
PDF_TYPE = "application/pdf"
ACCEPTED = ", ".join([*IMAGE_TYPES.values(), PDF_TYPE])
MAX_PIXELS = 50_000_000  # Pillow's decompression-bomb guard, tightened
_DATA_URL = re.compile(r"^data:(?P<mime>[\w.+-]+/[\w.+-]+)(?P<params>(;[^,;]*)*?);base64,", re.IGNORECASE)


class InvalidMedia(InvalidRun):
    """An image or PDF part refused: `where` names the part, `reason` says why (400)."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where}: {reason}")
        self.where, self.reason = where, reason


@dataclass
class _Budget:
    """What one message has used of its limits so far."""

    parts: int = 0
    bytes: int = 0
    names: list[str] = field(default_factory=list)


def media_intake(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` with every image and PDF checked and stored as references."""
    out = []
    for index, message in enumerate(messages):
        content = message.get("content")
        if isinstance(content, list) and any(_is_media(p) for p in content):
            where = f"messages[{index}]"
            if message.get("role") != "user":
                raise InvalidMedia(where, "only user messages may carry images or PDFs")
            message = {**message, "content": _take_parts(content, where)}
        out.append(message)
    return out


def _is_media(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") != "text"


def _take_parts(content: list[dict[str, Any]], where: str) -> list[dict[str, Any]]:
    budget = _Budget()
    parts: list[dict[str, Any]] = []
    for index, part in enumerate(content):
        here = f"{where}.content[{index}]"
        kind = part.get("type")
        if kind == "text":
            parts.append(part)
            continue
        budget.parts += 1
        if budget.parts > settings.AGENT_MEDIA_PARTS:
            raise InvalidMedia(
                here, f"a message may carry at most {settings.AGENT_MEDIA_PARTS} images or PDFs"
            )
        if kind == "image_url":
            parts.extend(_image_part(part, here, budget))
        elif kind == "file":
            parts.extend(_file_part(part, here, budget))
        else:
            raise InvalidMedia(
                f"{here}.type", f"{kind!r} is not a content part this service takes (text, image_url, file)"
            )
    return parts


def _image_part(part: dict[str, Any], where: str, budget: _Budget) -> list[dict[str, Any]]:
    inner = part.get("image_url")
    url = inner.get("url") if isinstance(inner, dict) else inner
    if not isinstance(url, str) or not url:
        raise InvalidMedia(f"{where}.image_url.url", "must be a data: URL or an http(s) URL")
    detail = inner.get("detail") if isinstance(inner, dict) else None
    if url.startswith("data:"):
        mime, data = _decode(url, f"{where}.image_url.url", budget)
        name = str(part.get("name") or "")[:200]
        if mime == PDF_TYPE:
            return _pdf_parts(data, name or "document.pdf", f"{where}.image_url.url")
        return [_stored_image(data, f"{where}.image_url.url", name=name, detail=detail)]
    _check_public_url(url, f"{where}.image_url.url")
    return [{"type": "image_url", "image_url": {"url": url, **({"detail": detail} if detail else {})}}]


def _file_part(part: dict[str, Any], where: str, budget: _Budget) -> list[dict[str, Any]]:
    inner = part.get("file")
    data_url = inner.get("file_data") if isinstance(inner, dict) else None
    if not isinstance(data_url, str) or not data_url.startswith("data:"):
        raise InvalidMedia(
            f"{where}.file.file_data", "must be a base64 data: URL (file ids are not supported)"
        )
    mime, data = _decode(data_url, f"{where}.file.file_data", budget)
    name = str(inner.get("filename") or "")[:200] if isinstance(inner, dict) else ""
    if mime == PDF_TYPE:
        return _pdf_parts(data, name or "document.pdf", f"{where}.file.file_data")
    return [_stored_image(data, f"{where}.file.file_data", name=name, detail=None)]


def _decode(data_url: str, where: str, budget: _Budget) -> tuple[str, bytes]:
    match = _DATA_URL.match(data_url)
    if match is None:
        raise InvalidMedia(where, "must be a base64 data: URL (data:<type>;base64,...)")
    mime = match["mime"].lower()
    if mime not in (*IMAGE_TYPES.values(), PDF_TYPE):
        raise InvalidMedia(where, f"{mime} is not accepted ({ACCEPTED})")
    encoded = data_url[match.end() :]
    limit = settings.AGENT_MEDIA_PDF_BYTES if mime == PDF_TYPE else settings.AGENT_MEDIA_IMAGE_BYTES
    if len(encoded) * 3 // 4 > limit + 2:  # refused before decoding
        raise InvalidMedia(where, f"{mime} is over the limit of {_mib(limit)} (decoded)")
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidMedia(where, "is not valid base64") from None
    if len(data) > limit:
        raise InvalidMedia(where, f"{mime} is over the limit of {_mib(limit)} (decoded)")
    budget.bytes += len(data)
    if budget.bytes > settings.AGENT_MEDIA_MESSAGE_BYTES:
        raise InvalidMedia(
            where,
            f"the message's images and PDFs are over {_mib(settings.AGENT_MEDIA_MESSAGE_BYTES)} together",
        )
    return mime, data


def _stored_image(data: bytes, where: str, *, name: str, detail: Any) -> dict[str, Any]:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            fmt, width, height = image.format, image.width, image.height
            if width * height > MAX_PIXELS:
                raise InvalidMedia(where, f"the image is {width}x{height} px, over {MAX_PIXELS:,} pixels")
            image.verify()
    except (UnidentifiedImageError, OSError, SyntaxError, Image.DecompressionBombError):
        raise InvalidMedia(where, f"is not a readable image ({ACCEPTED})") from None
    mime = IMAGE_TYPES.get(fmt or "")
    if mime is None:
        raise InvalidMedia(where, f"the bytes are a {fmt} image, which is not accepted ({ACCEPTED})")
    image_url: dict[str, Any] = {"url": MEDIA_PREFIX + blob_put(data)}
    if detail in ("low", "high", "auto"):
        image_url["detail"] = detail
    info = {"mime": mime, "bytes": len(data), "width": width, "height": height}
    return {
        "type": "image_url",
        "image_url": image_url,
        "media": {**info, **({"name": name} if name else {})},
    }


def _pdf_parts(data: bytes, name: str, where: str) -> list[dict[str, Any]]:
    limit = settings.AGENT_MEDIA_PDF_PAGES
    try:
        pages, total = render_pages(data, limit)
    except PdfUnreadable:
        raise InvalidMedia(where, "is not a PDF this service can read (damaged or encrypted)") from None
    if not pages:
        raise InvalidMedia(where, "the PDF has no pages")
    shown = f"pages 1-{len(pages)}" if len(pages) > 1 else "page 1"
    more = f" (only the first {limit} are included)" if total > len(pages) else ""
    note = f"[PDF {name}: {total} page{'s' if total != 1 else ''}; {shown} follow as images{more}]"
    parts: list[dict[str, Any]] = [{"type": "text", "text": note}]
    for number, page in enumerate(pages, start=1):
        parts.append(
            {
                "type": "image_url",
                "image_url": {"url": MEDIA_PREFIX + blob_put(page.png)},
                "media": {
                    "mime": "image/png",
                    "bytes": len(page.png),
                    "width": page.width,
                    "height": page.height,
                    "pdf": {"name": name, "page": number, "pages": total, "bytes": len(data)},
                },
            }
        )
    return parts


def _check_public_url(url: str, where: str) -> None:
    """http(s) only, and a host that resolves to public addresses only: litellm
    downloads image URLs for some providers (Anthropic), from this server."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError):
        raise InvalidMedia(where, "is not a valid URL") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise InvalidMedia(where, "must be a data: URL or an http(s) URL")
    try:
        addresses = resolve_host(parsed, None)
    except ToolError:
        raise InvalidMedia(where, f"the host {parsed.host} does not resolve") from None
    if settings.AGENT_MEDIA_ALLOW_PRIVATE_URLS:
        return
    for address in addresses:
        reason = blocked_reason(address)
        if reason:
            raise InvalidMedia(
                where, f"{parsed.host} is {reason}; only public internet addresses are fetched"
            )


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):g} MiB"


LOCAL_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp"}
LOCAL_TYPES |= {".gif": "image/gif", ".pdf": PDF_TYPE}


def local_file_part(path: Path) -> dict[str, Any]:
    """A content part for a file on this machine (run_agent --image); media_intake checks it.
    OSError when it cannot be read; InvalidMedia (naming the path) for another kind of file."""
    mime = LOCAL_TYPES.get(path.suffix.lower())
    if mime is None:
        raise InvalidMedia(str(path), f"not an image or a PDF by its name ({', '.join(sorted(LOCAL_TYPES))})")
    url = f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"
    if mime == PDF_TYPE:
        return {"type": "file", "file": {"filename": path.name, "file_data": url}}
    return {"type": "image_url", "image_url": {"url": url}, "name": path.name}
