"""Images and PDFs made on the spot for the L5 tests, and a media root per test."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


def png_bytes(width: int = 40, height: int = 30, color: str = "red") -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, "PNG")
    return out.getvalue()


def noisy_png(side: int) -> bytes:
    """A PNG that does not compress (random pixels): about 3 x side² bytes."""
    import os

    from PIL import Image

    out = io.BytesIO()
    Image.frombytes("RGB", (side, side), os.urandom(side * side * 3)).save(out, "PNG")
    return out.getvalue()


def pdf_bytes(pages: int = 2) -> bytes:
    from PIL import Image

    images = [Image.new("RGB", (200, 260), color) for color in ["white", "blue", "green"] * pages][:pages]
    out = io.BytesIO()
    images[0].save(out, "PDF", save_all=True, append_images=images[1:])
    return out.getvalue()


def data_url(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def image_part(data: bytes, mime: str = "image/png") -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": data_url(data, mime)}}


def pdf_part(data: bytes, filename: str = "report.pdf") -> dict[str, Any]:
    return {"type": "file", "file": {"filename": filename, "file_data": data_url(data, "application/pdf")}}


@pytest.fixture
def media_root(tmp_path: Path, settings: Any) -> Iterator[Path]:
    """AGENT_MEDIA_ROOT in the test's own directory."""
    settings.AGENT_MEDIA_ROOT = tmp_path / "media"
    yield settings.AGENT_MEDIA_ROOT
