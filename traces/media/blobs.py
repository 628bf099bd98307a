"""Image bytes stored once, by content, under AGENT_MEDIA_ROOT (L5).

`<root>/<sha[:2]>/<sha>` holds the bytes; thumbnails are cached beside them
(`<sha>.thumb.jpg`). Files are written to a temporary name and renamed, so a
reader never sees half a file, and the same image sent twice is stored once.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import tempfile
from pathlib import Path

from django.conf import settings

THUMBNAIL_SIDE = 320
_SHA = re.compile(r"^[0-9a-f]{64}$")


class MediaMissing(LookupError):
    """No stored bytes under that name (never stored, or the media root was lost)."""


def blob_path(sha: str) -> Path:
    if not _SHA.match(sha):
        raise MediaMissing(f"not a media reference: {sha[:80]!r}")
    return Path(settings.AGENT_MEDIA_ROOT) / sha[:2] / sha


def blob_put(data: bytes) -> str:
    """Store `data` (once) and return its sha256."""
    sha = hashlib.sha256(data).hexdigest()
    path = blob_path(sha)
    if not path.exists():
        _write(path, data)
    return sha


def blob_read(sha: str) -> bytes:
    try:
        return blob_path(sha).read_bytes()
    except FileNotFoundError:
        raise MediaMissing(f"media {sha} is not in AGENT_MEDIA_ROOT") from None


def thumbnail(sha: str) -> bytes:
    """A JPEG at most THUMBNAIL_SIDE px on its long side, made once and cached."""
    path = blob_path(sha).with_suffix(".thumb.jpg")
    if path.exists():
        return path.read_bytes()
    from PIL import Image

    with Image.open(io.BytesIO(blob_read(sha))) as image:
        image.thumbnail((THUMBNAIL_SIDE, THUMBNAIL_SIDE))
        flat = Image.new("RGB", image.size, "white")
        rgba = image.convert("RGBA")
        flat.paste(rgba, mask=rgba.getchannel("A"))
    out = io.BytesIO()
    flat.save(out, "JPEG", quality=80)
    _write(path, out.getvalue())
    return out.getvalue()


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
