"""PDF pages rendered to PNG (pypdfium2), so every vision model can read them."""

from __future__ import annotations

import io
from dataclasses import dataclass

# Anthropic scales anything larger down to 1568 px on the long side; OpenAI tiles
# at 2048. Rendering at most this size keeps text legible and bytes modest.
PAGE_SIDE = 1568


class PdfUnreadable(ValueError):
    """Not a PDF pdfium can open (damaged, encrypted, not a PDF at all)."""


@dataclass(frozen=True)
class RenderedPage:
    png: bytes
    width: int
    height: int


def render_pages(data: bytes, limit: int) -> tuple[list[RenderedPage], int]:
    """The first `limit` pages as PNG, and the PDF's page count."""
    import pypdfium2 as pdfium  # type: ignore[import-untyped]  # no stubs

    try:
        document = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        raise PdfUnreadable(str(exc)) from None
    try:
        total = len(document)
        pages = [_render(document[index]) for index in range(min(total, limit))]
    finally:
        document.close()
    return pages, total


def _render(page: object) -> RenderedPage:
    width, height = page.get_size()  # type: ignore[attr-defined]
    scale = min(2.0, PAGE_SIDE / max(width, height, 1))
    image = page.render(scale=scale).to_pil()  # type: ignore[attr-defined]
    out = io.BytesIO()
    image.save(out, "PNG")
    return RenderedPage(out.getvalue(), image.width, image.height)
