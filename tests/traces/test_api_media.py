"""L5 through the API: images and PDFs in posted messages, their refusals (W6), and
listings that carry references, not bytes."""

from __future__ import annotations

from typing import Any

import pytest

from tests.media_samples import image_part, media_root, noisy_png, pdf_bytes, pdf_part, png_bytes
from traces.models import Message, Trace

__all__ = ["media_root"]
pytestmark = pytest.mark.usefixtures("media_root")


def _with(*parts: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "text", "text": "Describe these."}, *parts]}]


def test_an_image_and_a_pdf_run_and_the_listing_stays_small(api_client, integrator, llm, inline_worker):
    big = noisy_png(600)  # ~1 MB of pixels
    client = api_client(integrator)

    with inline_worker():
        response = client.post(
            "/api/traces", {"messages": _with(image_part(big), pdf_part(pdf_bytes(2)))}, format="json"
        )

    assert response.status_code == 201, response.json()
    trace_id = response.json()["trace_id"]
    assert client.get(f"/api/traces/{trace_id}").json()["status"] == "completed"
    (request,) = llm.requests_for("scripted")
    user = next(m for m in request.messages if m["role"] == "user")
    kinds = [p["type"] for p in user["content"]]
    assert kinds[:5] == ["text", "image_url", "text", "image_url", "image_url"]
    assert user["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    listing = client.get(f"/api/traces/{trace_id}/messages")
    assert len(listing.content) < 20_000
    stored = next(m for m in listing.json() if m["role"] == "user")
    assert stored["content"][1]["image_url"]["url"].startswith("media:")
    assert stored["content"][1]["media"]["bytes"] == len(big)
    assert (
        Trace.objects.get(pk=trace_id).task
        == "Describe these.\n[PDF report.pdf: 2 pages; pages 1-2 follow as images]"
    )


def test_continue_with_an_image(api_client, integrator, llm, inline_worker):
    client = api_client(integrator)
    with inline_worker():
        trace_id = client.post("/api/traces", {"task": "start"}, format="json").json()["trace_id"]
    with inline_worker():
        response = client.post(
            f"/api/traces/{trace_id}/run", {"messages": _with(image_part(png_bytes()))}, format="json"
        )

    assert response.status_code == 202, response.json()
    last_user = Message.objects.filter(trace_id=trace_id, role="user").order_by("-sequence").first()
    assert last_user is not None and last_user.content[1]["image_url"]["url"].startswith("media:")


@pytest.mark.parametrize(
    ("part", "field", "reason"),
    [
        (
            image_part(png_bytes(), "image/bmp"),
            "messages[0].content[1].image_url.url",
            "image/bmp is not accepted",
        ),
        (
            {"type": "image_url", "image_url": {"url": "file:///etc/passwd"}},
            "messages[0].content[1].image_url.url",
            "http(s) URL",
        ),
        (
            {"type": "image_url", "image_url": {"url": "http://localhost:8000/x.png"}},
            "messages[0].content[1].image_url.url",
            "a loopback address",
        ),
        (image_part(noisy_png(100)), "messages[0].content[1].image_url.url", "over the limit of"),
    ],
)
def test_a_refused_part_is_a_400_naming_the_field(api_client, integrator, llm, settings, part, field, reason):
    settings.AGENT_MEDIA_IMAGE_BYTES = 20_000

    response = api_client(integrator).post("/api/traces", {"messages": _with(part)}, format="json")

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_media"
    assert body["error"].startswith(f"{field}: ") and reason in body["error"]
    assert Trace.objects.count() == 0


def test_too_many_parts_is_a_400(api_client, integrator, llm, settings):
    settings.AGENT_MEDIA_PARTS = 2
    parts = [image_part(png_bytes(color=c)) for c in ("red", "green", "blue")]

    response = api_client(integrator).post("/api/traces", {"messages": _with(*parts)}, format="json")

    assert response.status_code == 400
    assert response.json()["error"] == "messages[0].content[3]: a message may carry at most 2 images or PDFs"
