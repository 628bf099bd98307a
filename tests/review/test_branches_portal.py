"""Branch comparison and edit-and-fork on the portal (X6, issue 23)."""

from __future__ import annotations

import pytest

from review.edits import message_edit_fork
from review.models import MessageEdit
from tests.factories import make_trace
from traces.models import Message

pytestmark = pytest.mark.django_db

CHAT = [("system", "be brief"), ("user", "hi"), ("assistant", "hello <script>alert(1)</script> there")]


def forked(owner):
    trace = make_trace(owner, messages=CHAT)
    message_edit_fork(user=owner, trace_id=trace.trace_id, sequence=3, content="hello <b>bold</b> friend")
    trace.refresh_from_db()
    return trace


@pytest.mark.parametrize(
    ("who", "status"), [("integrator", 200), ("expert", 200), ("stranger", 404), (None, 302)]
)
def test_compare_page_authorisation(request, browser_client, integrator, who, status):
    trace = forked(integrator)
    client = browser_client(request.getfixturevalue(who) if who else None)

    response = client.get(f"/traces/{trace.trace_id}/compare/", {"a": 3})
    across = client.get("/compare/", {"a": trace.trace_id, "b": trace.trace_id})

    assert (response.status_code, across.status_code) == (status, status)
    if status == 302:
        assert "/login/" in response["Location"]


def test_compare_page_shows_the_branches_side_by_side_sanitised(browser_client, integrator):
    trace = forked(integrator)

    page = browser_client(integrator).get(f"/traces/{trace.trace_id}/compare/", {"a": 3}).content.decode()

    assert "Both share the first 2 messages" in page
    assert "hello <del>&lt;script&gt;alert(1)&lt;/script&gt;</del> <del>there</del>" in page
    assert "hello <ins>&lt;b&gt;bold&lt;/b&gt;</ins> <ins>friend</ins>" in page
    assert "<script>alert(1)" not in page
    assert "side branch" in page and "stopped" in page


def test_compare_page_refuses_a_missing_message_in_words(browser_client, integrator):
    trace = forked(integrator)

    response = browser_client(integrator).get(f"/traces/{trace.trace_id}/compare/", {"a": 99})

    assert response.status_code == 400
    assert "has no message 99" in response.content.decode()


def test_the_trace_page_offers_edit_and_fork_and_the_form_forks(browser_client, integrator):
    trace = make_trace(integrator, messages=CHAT)
    client = browser_client(integrator)
    page = client.get(f"/traces/{trace.trace_id}/").content.decode()
    assert f'action="/traces/{trace.trace_id}/messages/2/edit/"' in page
    assert f'action="/traces/{trace.trace_id}/messages/1/edit/"' not in page  # not the system prompt

    response = client.post(f"/traces/{trace.trace_id}/messages/2/edit/", {"content": "hi again"})

    assert response.status_code == 302 and response["Location"].endswith("#m4")
    trace.refresh_from_db()
    assert trace.head_sequence == 4
    assert Message.objects.get(trace=trace, sequence=4).content == "hi again"
    assert Message.objects.get(trace=trace, sequence=2).content == "hi"
    edit = MessageEdit.objects.get()
    assert (edit.editor, edit.before, edit.after) == (integrator, {"content": "hi"}, {"content": "hi again"})


def test_a_strangers_or_bad_edit_writes_nothing(browser_client, integrator, stranger):
    trace = make_trace(integrator, messages=CHAT)

    refused = browser_client(stranger).post(f"/traces/{trace.trace_id}/messages/2/edit/", {"content": "x"})
    anonymous = browser_client().post(f"/traces/{trace.trace_id}/messages/2/edit/", {"content": "x"})
    unchanged = browser_client(integrator).post(
        f"/traces/{trace.trace_id}/messages/2/edit/", {"content": "hi"}, follow=True
    )

    assert refused.status_code == 302 and refused["Location"] == "/"
    assert "/login/" in anonymous["Location"]
    assert "changes nothing" in unchanged.content.decode()
    assert Message.objects.filter(trace=trace).count() == 3 and not MessageEdit.objects.exists()


def test_deleting_a_trace_takes_its_edits(integrator):
    from traces.services.delete import trace_delete

    trace = forked(integrator)

    trace_delete(user=integrator, trace_id=trace.trace_id)

    assert not MessageEdit.objects.exists() and not Message.objects.exists()
