"""L5 in the portal: uploads on the new-run and continue forms, thumbnails served by an
authenticated view, and a trace page that stays small with a large image."""

from __future__ import annotations

import re

from django.core.files.uploadedfile import SimpleUploadedFile

from tests.media_samples import media_root, noisy_png, pdf_bytes, png_bytes
from traces.models import Message, Trace

__all__ = ["media_root"]


def _start(client, inline_worker, files, task="look at these"):
    with inline_worker():
        return client.post(
            "/traces/new/", {"task": task, "preset": "default", "name": "pics", "attachments": files}
        )


def test_an_uploaded_image_and_pdf_reach_the_model_and_show_as_thumbnails(
    browser_client, integrator, stranger, llm, inline_worker, media_root
):
    client = browser_client(integrator)
    image = SimpleUploadedFile("plot.png", noisy_png(1200), content_type="image/png")  # ~4 MB
    pdf = SimpleUploadedFile("report.pdf", pdf_bytes(3), content_type="application/pdf")

    response = _start(client, inline_worker, [image, pdf])

    assert response.status_code == 302
    trace = Trace.objects.get(name="pics")
    user = Message.objects.get(trace=trace, role="user")
    assert [p["type"] for p in user.content] == [
        "text",
        "image_url",
        "text",
        "image_url",
        "image_url",
        "image_url",
    ]
    (request,) = llm.requests_for("scripted")
    sent = next(m for m in request.messages if m["role"] == "user")["content"]
    assert sent[1]["image_url"]["url"].startswith("data:image/png;base64,")

    page = client.get(f"/traces/{trace.trace_id}/")
    html = page.content.decode()
    thumb = f"/traces/{trace.trace_id}/messages/{user.sequence}/media/1"
    assert f'src="{thumb}"' in html and 'alt="plot.png"' in html
    assert "[PDF report.pdf: 3 pages; pages 1-3 follow as images]" in html
    assert 'alt="report.pdf, page 2 of 3"' in html
    assert '<figcaption class="pdf-note">report.pdf, page 2 of 3</figcaption>' in html
    assert html.count('class="pdf-note"') == 3  # the PDF's pages, not the image
    assert len(page.content) < 100_000  # the 4 MB image is not in the page

    small = client.get(thumb)
    assert small.status_code == 200 and small["Content-Type"] == "image/jpeg" and len(small.content) < 60_000
    full = client.get(thumb + "?full=1")
    assert full["Content-Type"] == "image/png" and len(full.content) > 4_000_000
    assert browser_client(stranger).get(thumb).status_code == 404
    assert (
        client.get(f"/traces/{trace.trace_id}/messages/{user.sequence}/media/0").status_code == 404
    )  # text part


def test_continue_with_an_upload(browser_client, integrator, llm, inline_worker, media_root):
    client = browser_client(integrator)
    _start(client, inline_worker, [])
    trace = Trace.objects.get(name="pics")

    with inline_worker():
        response = client.post(
            f"/traces/{trace.trace_id}/run/",
            {"text": "and this one", "attachments": [SimpleUploadedFile("b.png", png_bytes(), "image/png")]},
        )

    assert response.status_code == 302
    last = Message.objects.filter(trace=trace, role="user").order_by("-sequence").first()
    assert last is not None and last.content[1]["media"]["name"] == "b.png"


def test_a_refused_upload_is_a_sentence_naming_the_file(browser_client, integrator, llm, media_root):
    bad = SimpleUploadedFile("notes.png", b"just text", content_type="image/png")

    page = (
        browser_client(integrator)
        .post("/traces/new/", {"task": "look", "attachments": [bad]}, follow=True)
        .content.decode()
    )

    assert "That could not be done. notes.png: not a readable image" in page
    assert not Trace.objects.exists()


def test_model_text_with_an_img_tag_stays_stripped(
    browser_client, integrator, llm, inline_worker, media_root
):
    llm.script(
        "scripted",
        ['Look: <img src="https://evil.example/x.png" onerror="alert(1)"> ![x](https://evil.example/y.png)'],
    )
    client = browser_client(integrator)
    _start(client, inline_worker, [])
    trace = Trace.objects.get(name="pics")

    page = client.get(f"/traces/{trace.trace_id}/").content.decode()
    # the Edit-and-fork forms hold the raw text to edit, escaped, in inert <template>s
    forms = re.findall(r"<template>.*?</template>", page, re.S)
    assert any("&lt;img src=&quot;https://evil.example/x.png&quot;" in form for form in forms)
    assert not any("<img" in form for form in forms)
    html = re.sub(r"<template>.*?</template>", "", page, flags=re.S)

    assert "evil.example/x.png" not in html and "onerror" not in html
    assert "<img" not in html  # P5: model text never becomes an image the browser loads
