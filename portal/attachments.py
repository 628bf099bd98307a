"""Files attached to a new run or a continue (L5): uploads become the user message's
content parts, checked by the same intake as the API's; its refusals name the file."""

from __future__ import annotations

import base64
import re
from typing import Any

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile

from traces.media.intake import PDF_TYPE, InvalidMedia
from traces.runner import InvalidRun

FIELD = "attachments"
_PART = re.compile(r"^messages\[0\]\.content\[(\d+)\]")


def user_message(text: str, files: list[UploadedFile]) -> list[dict[str, Any]]:
    """The one user message a portal form sends: its text, then a part per file ([] when empty)."""
    if not files:
        return [{"role": "user", "content": text}] if text else []
    if len(files) > settings.AGENT_MEDIA_PARTS:
        raise InvalidRun(f"Attach at most {settings.AGENT_MEDIA_PARTS} files to one message.")
    limit = max(settings.AGENT_MEDIA_PDF_BYTES, settings.AGENT_MEDIA_IMAGE_BYTES)
    parts: list[dict[str, Any]] = [{"type": "text", "text": text or "(see the attached files)"}]
    for upload in files:
        if (upload.size or 0) > limit:
            raise InvalidRun(f"{upload.name}: the file is too large (over {limit // (1024 * 1024)} MiB).")
        url = f"data:{_mime(upload)};base64,{base64.b64encode(upload.read()).decode('ascii')}"
        if _mime(upload) == PDF_TYPE:
            parts.append({"type": "file", "file": {"filename": upload.name, "file_data": url}})
        else:
            parts.append({"type": "image_url", "image_url": {"url": url}, "name": upload.name})
    return [{"role": "user", "content": parts}]


def refusal_for_files(exc: InvalidMedia, files: list[UploadedFile]) -> InvalidRun:
    """The intake's refusal, naming the file instead of the JSON field."""
    match = _PART.match(exc.where)
    index = int(match[1]) - 1 if match else -1
    name = files[index].name if 0 <= index < len(files) else "An attached file"
    return InvalidRun(f"{name}: {exc.reason.removeprefix('is ').rstrip('.')}.")


def _mime(upload: UploadedFile) -> str:
    """What the browser says the file is; the intake checks the bytes."""
    name = (upload.name or "").lower()
    if name.endswith(".pdf"):
        return PDF_TYPE
    return (upload.content_type or "application/octet-stream").split(";")[0].strip().lower()
