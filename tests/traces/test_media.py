"""L5: images and PDF pages, checked and stored at intake, inlined on the wire for
OpenAI- and Anthropic-style models through the real litellm client."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from tests.media_samples import image_part, media_root, noisy_png, pdf_bytes, pdf_part, png_bytes
from tests.scripted_llm import ScriptedLLM
from traces.llm import LLMClient, ModelSettings
from traces.media.blobs import blob_read, thumbnail
from traces.media.intake import InvalidMedia, media_intake
from traces.media.parts import IMAGE_TOKENS, media_placeholders, stored_sha
from traces.runner.compaction import estimate_tokens

__all__ = ["media_root"]  # the fixture, imported for its side of pytest
pytestmark = pytest.mark.usefixtures("media_root")

KEY = "sk-test-not-a-secret"


def _user(*parts: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "text", "text": "What is in these?"}, *parts]}]


def test_an_image_is_stored_once_and_the_message_keeps_a_small_reference() -> None:
    png = png_bytes()

    first = media_intake(_user(image_part(png)))
    second = media_intake(_user(image_part(png)))

    part = first[0]["content"][1]
    sha = stored_sha(part)
    assert sha is not None and blob_read(sha) == png
    assert part["media"] == {"mime": "image/png", "bytes": len(png), "width": 40, "height": 30}
    assert len(str(part)) < 300
    assert second[0]["content"][1] == part


def test_a_pdf_becomes_a_note_and_one_png_per_page_up_to_the_limit(settings: Any) -> None:
    settings.AGENT_MEDIA_PDF_PAGES = 2

    (message,) = media_intake(_user(pdf_part(pdf_bytes(3))))

    note, *pages = message["content"][1:]
    assert note == {
        "type": "text",
        "text": "[PDF report.pdf: 3 pages; pages 1-2 follow as images (only the first 2 are included)]",
    }
    assert [p["media"]["pdf"]["page"] for p in pages] == [1, 2]
    assert all(p["media"]["pdf"]["pages"] == 3 and p["media"]["mime"] == "image/png" for p in pages)
    assert blob_read(stored_sha(pages[0]) or "").startswith(b"\x89PNG")


@pytest.mark.parametrize(
    ("part", "field", "reason"),
    [
        (
            image_part(b"BM....", "image/bmp"),
            "messages[0].content[1].image_url.url",
            "image/bmp is not accepted",
        ),
        (image_part(b"not an image"), "messages[0].content[1].image_url.url", "is not a readable image"),
        (
            {"type": "image_url", "image_url": {"url": "file:///etc/passwd"}},
            "messages[0].content[1].image_url.url",
            "must be a data: URL or an http(s) URL",
        ),
        (
            {"type": "image_url", "image_url": {"url": "http://127.0.0.1:8000/admin.png"}},
            "messages[0].content[1].image_url.url",
            "127.0.0.1 is a loopback address",
        ),
        (
            {"type": "image_url", "image_url": {"url": "https://10.1.2.3/x.png"}},
            "messages[0].content[1].image_url.url",
            "a private network address",
        ),
        (
            pdf_part(b"%PDF-1.4 broken"),
            "messages[0].content[1].file.file_data",
            "is not a PDF this service can read",
        ),
        ({"type": "input_audio", "input_audio": {}}, "messages[0].content[1].type", "is not a content part"),
    ],
)
def test_intake_refuses_naming_the_field(part: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(InvalidMedia) as refused:
        media_intake(_user(part))

    assert refused.value.where == field
    assert reason in refused.value.reason


def test_intake_refuses_too_big_and_too_many(settings: Any) -> None:
    settings.AGENT_MEDIA_IMAGE_BYTES = 10_000
    with pytest.raises(InvalidMedia, match=r"content\[1\].*over the limit of"):
        media_intake(_user(image_part(noisy_png(100))))

    settings.AGENT_MEDIA_PARTS = 2
    with pytest.raises(InvalidMedia, match=r"content\[3\].*at most 2 images or PDFs"):
        media_intake(_user(*[image_part(png_bytes(color=c)) for c in ("red", "blue", "green")]))

    settings.AGENT_MEDIA_IMAGE_BYTES, settings.AGENT_MEDIA_MESSAGE_BYTES = 100_000, 40_000
    with pytest.raises(InvalidMedia, match=r"content\[2\].*over 0.03\d* MiB together"):
        media_intake(_user(image_part(noisy_png(100)), image_part(noisy_png(100))))


def test_only_user_messages_carry_images() -> None:
    with pytest.raises(InvalidMedia, match=r"messages\[0\]: only user messages"):
        media_intake([{"role": "assistant", "content": [image_part(png_bytes())]}])


def test_a_public_image_url_is_kept_as_sent() -> None:
    part = {"type": "image_url", "image_url": {"url": "https://93.184.216.34/cat.png", "detail": "low"}}

    (message,) = media_intake(_user(part))

    assert message["content"][1] == part


def _data_of(url: str) -> bytes:
    head, _, encoded = url.partition(",")
    assert head == "data:image/png;base64"
    return base64.b64decode(encoded)


def test_an_image_and_a_pdf_page_reach_an_openai_model_as_image_url_parts(llm: ScriptedLLM) -> None:
    png = png_bytes()
    stored = media_intake(_user(image_part(png), pdf_part(pdf_bytes(1))))

    LLMClient()(stored, model=ModelSettings("openai/scripted", llm.url, KEY))

    (request,) = llm.requests
    assert request.path == "/v1/chat/completions"
    text, image, note, page = request.messages[0]["content"]
    assert text == {"type": "text", "text": "What is in these?"}
    assert image == {"type": "image_url", "image_url": {"url": image["image_url"]["url"]}}
    assert _data_of(image["image_url"]["url"]) == png
    assert note["text"].startswith("[PDF report.pdf: 1 page; page 1 follow")
    assert _data_of(page["image_url"]["url"]).startswith(b"\x89PNG")


def test_an_image_and_a_pdf_page_reach_an_anthropic_model_as_image_blocks(llm: ScriptedLLM) -> None:
    png = png_bytes()
    stored = media_intake(_user(image_part(png), pdf_part(pdf_bytes(1))))

    LLMClient()(stored, model=ModelSettings("anthropic/scripted-claude", llm.root, KEY))

    (request,) = llm.requests
    assert request.path == "/v1/messages"
    blocks = request.messages[0]["content"]
    assert [b["type"] for b in blocks] == ["text", "image", "text", "image"]
    image, page = blocks[1], blocks[3]
    assert image["source"]["type"] == "base64" and image["source"]["media_type"] == "image/png"
    assert base64.b64decode(image["source"]["data"]) == png
    assert base64.b64decode(page["source"]["data"]).startswith(b"\x89PNG")


def test_a_model_without_vision_gets_a_text_note_instead(llm: ScriptedLLM) -> None:
    stored = media_intake(_user(image_part(png_bytes())))

    LLMClient()(stored, model=ModelSettings("openai/gpt-3.5-turbo", llm.url, KEY))

    (request,) = llm.requests
    assert request.messages[0]["content"][1] == {
        "type": "text",
        "text": "[image, 40x30 px] (not shown: openai/gpt-3.5-turbo does not accept images)",
    }


def test_images_count_a_fixed_estimate_and_the_summary_reads_a_placeholder() -> None:
    stored = media_intake(_user(image_part(noisy_png(200))))

    assert estimate_tokens(stored[0]) == len("What is in these?") // 4 + IMAGE_TOKENS + 4
    (placeholder,) = media_placeholders(stored)
    assert placeholder["content"][1] == {"type": "text", "text": "[image, 200x200 px]"}


def test_a_thumbnail_is_a_small_jpeg() -> None:
    (message,) = media_intake(_user(image_part(noisy_png(800))))

    small = thumbnail(stored_sha(message["content"][1]) or "")

    assert small.startswith(b"\xff\xd8") and len(small) < 60_000
