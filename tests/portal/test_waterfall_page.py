"""The timing waterfall page (issue 22): built from stored messages, sub-traces and events."""

from __future__ import annotations

import re

import pytest

from tests.scripted_llm import Reply, ToolCall
from traces.models import Approval, Message, Trace, TraceEvent
from traces.runner import AgentRunner, RunConfig
from traces.services.approvals import approval_decide

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(llm, workspace_root, integrator, expert, inline_worker):
    """Tools, a sub-agent, an approval wait, and a tool name with markup in its result."""
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("list_files", {}), ToolCall("agent", {"task": "count the files"})]),
            Reply(text="3 files", delay=0.05),  # the sub-agent
            Reply(tool_calls=[ToolCall("write", {"path": "x.txt", "content": "<script>alert(1)</script>"})]),
            "written",
        ],
    )
    result = AgentRunner().run_result(
        [{"role": "user", "content": "count, then write"}],
        RunConfig(confirm_policy="ask-risky", owner_id=integrator.pk, stream=False),
    )
    with inline_worker():
        approval = Approval.objects.get(trace_id=result.trace_id)
        approval_decide(user=expert, trace_id=result.trace_id, approval_id=approval.pk, decision="approve")
    trace = Trace.objects.get(pk=result.trace_id)
    assert trace.status == "completed"
    return trace


def rows(text: str) -> list[tuple[str, str]]:
    return re.findall(
        r'class="wf-row wf-(\w+)[^"]*" role="row" data-kind="\w+"(?: data-sequence="(\d+)")?', text
    )


def test_the_waterfall_shows_calls_sub_traces_and_waits_with_totals(
    run, browser_client, integrator, django_assert_max_num_queries
):
    client = browser_client(integrator)
    with django_assert_max_num_queries(12):
        page = client.get(f"/traces/{run.trace_id}/waterfall/")
    assert page.status_code == 200
    text = page.content.decode()
    drawn = rows(text)
    kinds = [kind for kind, _ in drawn]
    replies = Message.objects.filter(trace=run, role="assistant", kind="").count()
    assert kinds.count("model") == replies == 3
    assert kinds.count("tool") == 3 and kinds.count("subtrace") == 1 and kinds.count("wait") == 1
    child = Trace.objects.get(parent_trace_id=run.trace_id)
    assert f'href="/traces/{child.trace_id}/"' in text  # click through to the sub-trace
    for _kind, sequence in drawn:
        if sequence:
            assert f"?at={sequence}#m{sequence}" in text  # click through to the message
    assert f"/traces/{run.trace_id}/messages/" in text and "/request/" in text
    assert "By model" in text and "By tool" in text and "By sub-trace" in text
    assert "<script>alert(1)</script>" not in text
    trace_page = client.get(f"/traces/{run.trace_id}/").content.decode()
    assert f"/traces/{run.trace_id}/waterfall/" in trace_page


def test_the_waterfall_is_for_who_sees_the_trace(run, browser_client, stranger):
    url = f"/traces/{run.trace_id}/waterfall/"
    assert browser_client().get(url).status_code == 302
    assert browser_client(stranger).get(url).status_code == 404


def test_a_compaction_is_an_instant_on_the_axis(llm, workspace_root, integrator, browser_client, settings):
    """A run that outgrows a 1,000-token window is summarised (level 2): the compaction is a
    marker at the moment its event was stored, with the tokens before and after, not a bar."""
    settings.AGENT_CONTEXT_TOKENS = 1000
    settings.AGENT_COMPACTION_REFLECT = False

    def answer(body: dict) -> Reply:
        last = (body.get("messages") or [{}])[-1]
        if isinstance(last.get("content"), str) and last["content"].startswith("[COMPACT REQUEST]"):
            return Reply(text="1. Primary request: print digits. 9. Next step: finish.")
        return next(replies, Reply(text="finished"))

    replies = iter(
        Reply(tool_calls=[ToolCall("bash", {"command": f"python3 -c \"print('{i}' * 1200)\""})])
        for i in range(6)
    )
    llm.script("scripted", [answer] * 30)
    result = AgentRunner().run_result(
        [{"role": "user", "content": "print big digits six times"}],
        RunConfig(owner_id=integrator.pk, stream=False, skills=["planning", "research"]),
    )
    assert result.status == "completed"
    events = TraceEvent.objects.filter(trace_id=result.trace_id, type="compaction", payload__level=2)
    assert events.exists()

    text = browser_client(integrator).get(f"/traces/{result.trace_id}/waterfall/").content.decode()
    compactions = re.findall(
        r'data-kind="compaction">.*?<span class="wf-track" role="cell">(.*?)</span>\s*'
        r'<span class="wf-figures small muted" role="cell">(.*?)</span>',
        text,
        re.S,
    )
    assert len(compactions) == TraceEvent.objects.filter(trace_id=result.trace_id, type="compaction").count()
    first = (
        TraceEvent.objects.filter(trace_id=result.trace_id, type="compaction").order_by("event_id").first()
    )
    assert first is not None
    marker, figures = compactions[0]
    assert 'class="wf-instant"' in marker and "wf-bar" not in marker
    assert figures == f"instant · {first.payload['tokens_before']} → {first.payload['tokens_after']} tokens"
