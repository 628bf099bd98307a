"""run_agent --image (L5): local images and PDFs attached to the task, refusals exit 2."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from tests.media_samples import media_root, pdf_bytes, png_bytes
from traces.models import Message

__all__ = ["media_root"]
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media_root", "workspace_root")]


def test_images_and_a_pdf_reach_the_model(llm, tmp_path: Path):
    (tmp_path / "a.png").write_bytes(png_bytes())
    (tmp_path / "doc.pdf").write_bytes(pdf_bytes(2))

    call_command(
        "run_agent", "--image", str(tmp_path / "a.png"), "--image", str(tmp_path / "doc.pdf"), "describe",
        stdout=io.StringIO(),
    )  # fmt: skip

    (request,) = llm.requests_for("scripted")
    sent = next(m for m in request.messages if m["role"] == "user")["content"]
    assert [p["type"] for p in sent] == ["text", "image_url", "text", "image_url", "image_url"]
    assert sent[1]["image_url"]["url"].startswith("data:image/png;base64,")
    stored = Message.objects.get(role="user").content
    assert stored[1]["media"]["name"] == "a.png" and stored[3]["media"]["pdf"]["pages"] == 2


def test_a_refused_file_exits_2_naming_it(llm, tmp_path: Path):
    notes = tmp_path / "notes.png"
    notes.write_bytes(b"not an image")

    with pytest.raises(CommandError) as refused:
        call_command("run_agent", "--image", str(notes), "describe", stdout=io.StringIO())

    assert refused.value.returncode == 2
    assert (
        str(refused.value)
        == f"--image {notes}: is not a readable image (image/png, image/jpeg, image/webp, image/gif, application/pdf)"
    )
    with pytest.raises(CommandError, match=r"--image: .*No such file.*missing.png"):
        call_command("run_agent", "--image", str(tmp_path / "missing.png"), "x", stdout=io.StringIO())
    assert not Message.objects.exists()
