"""The stored shape of an image part, and what reads it without touching bytes.

A stored image part is an OpenAI-style part whose URL is a reference into the
blob store, with what the portal shows beside it:

    {"type": "image_url", "image_url": {"url": "media:<sha256>"},
     "media": {"mime": "image/png", "bytes": 1234, "width": 800, "height": 600,
               "name": "plot.png", "pdf": {"name": "r.pdf", "page": 3, "pages": 34}}}

`pdf` only on the pages of a PDF. A user's http(s) image URL is kept as sent.
"""

from __future__ import annotations

from typing import Any

MEDIA_PREFIX = "media:"
# What an image costs in the context estimate, whatever its size: about what
# Anthropic charges for a full-size image (1568 px on the long side), above
# OpenAI's 765 for a 1024 px one in high detail.
IMAGE_TOKENS = 1600


def image_url(part: Any) -> str:
    """The URL of an image part ("" for anything else)."""
    if not isinstance(part, dict) or part.get("type") != "image_url":
        return ""
    inner = part.get("image_url")
    url = inner.get("url") if isinstance(inner, dict) else inner
    return url if isinstance(url, str) else ""


def stored_sha(part: Any) -> str | None:
    """The blob of a stored image part, or None."""
    url = image_url(part)
    return url[len(MEDIA_PREFIX) :] if url.startswith(MEDIA_PREFIX) else None


def media_info(part: dict[str, Any]) -> dict[str, Any]:
    info = part.get("media")
    return info if isinstance(info, dict) else {}


def describe(part: dict[str, Any]) -> str:
    """A short text standing for an image part: in summaries and for models without vision."""
    info = media_info(part)
    pdf = info.get("pdf")
    if isinstance(pdf, dict):
        what = f"page {pdf.get('page')} of {pdf.get('pages')} of the PDF {pdf.get('name') or ''}".rstrip()
    elif stored_sha(part):
        what = f"image {info.get('name') or ''}".rstrip()
    else:
        what = f"image at {image_url(part)[:200]}"
    size = f", {info['width']}x{info['height']} px" if info.get("width") and info.get("height") else ""
    return f"[{what}{size}]"


def has_images(messages: list[dict[str, Any]]) -> bool:
    return any(
        isinstance(m.get("content"), list) and any(image_url(p) for p in m["content"]) for m in messages
    )


def media_placeholders(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` with every image part replaced by a text part describing it
    (the compaction summary reads text, not images)."""
    if not has_images(messages):
        return messages
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list) and any(image_url(p) for p in content):
            content = [{"type": "text", "text": describe(p)} if image_url(p) else p for p in content]
            message = {**message, "content": content}
        out.append(message)
    return out


def image_parts(content: Any) -> list[tuple[int, dict[str, Any]]]:
    """(index, part) of each image part of a message's content."""
    if not isinstance(content, list):
        return []
    return [(index, part) for index, part in enumerate(content) if image_url(part)]
