"""Microcompact (seed 001 layer 2) through the runner, real litellm and the scripted server."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.scripted_llm import Reply, ToolCall, pairing_error
from tests.traces.test_compaction import big_output, is_compact_request, request_tokens, user
from tests.traces.test_runner_rules import registry_with
from traces.models import Message, Trace, TraceEvent
from traces.runner import AgentRunner, RunConfig
from traces.runner.compaction import estimate_tokens
from traces.runner.config import InvalidRun
from traces.runner.microcompact import STUB_PREFIX
from traces.runner.run_settings import check_request
from traces.runner.tool_api import ToolResult

pytestmark = pytest.mark.django_db

STUB_SEQUENCE = re.compile(r"read_result\(sequence=(\d+)\)")


@pytest.fixture
def always(settings: Any, llm: Any) -> None:
    """Microcompact from the first request on (the seed's layer 2), pairing checked."""
    settings.AGENT_MICROCOMPACT_THRESHOLD = 0
    settings.AGENT_COMPACTION_REFLECT = False
    llm.check_pairing = True


def digits(count: int, chars: int = 1200) -> list[Reply]:
    """`count` steps, each printing about `chars` characters of its number."""
    return [Reply(tool_calls=[big_output(n, chars // len(str(n)))]) for n in range(count)]


def tool_contents(request: Any) -> list[str]:
    return [str(m.get("content")) for m in request.messages if m["role"] == "tool"]


def microcompact_events(trace_id: str) -> list[dict[str, Any]]:
    events = TraceEvent.objects.filter(trace_id=trace_id, type="compaction").order_by("event_id")
    return [e.payload for e in events if e.payload.get("level") == "microcompact"]


def test_results_older_than_the_newest_five_are_stubs_in_the_request_and_stay_stored(runner, llm, always):
    llm.script("scripted", [*digits(8), Reply(text="done")])

    result = runner.run_result(user("print digits eight times"), RunConfig(stream=False))

    assert result.status == "completed"
    requests = llm.requests_for("scripted")
    assert all(r.status == 200 for r in requests)  # every request paired (the server checks)
    last = tool_contents(requests[-1])
    assert [c.startswith(STUB_PREFIX) for c in last] == [True] * 3 + [False] * 5
    stored = list(Message.objects.filter(trace_id=result.trace_id, role="tool").order_by("sequence"))
    assert all(str(n) * 1200 in m.content for n, m in enumerate(stored))  # originals untouched
    for stub, original in zip(last[:3], stored[:3], strict=True):
        assert f"read_result(sequence={original.sequence})" in stub
        assert "bash(" in stub and "print(" in stub and f"{len(original.content):,} characters" in stub
    for n, content in enumerate(last[3:], start=3):
        assert str(n) * 1200 in content
    events = microcompact_events(result.trace_id)
    stubbed = [s for e in events for s in e["stubbed_sequences"]]
    assert stubbed == [m.sequence for m in stored[:3]]  # each result stubbed once, in order
    assert all(e["tools"] == {"bash": e["stubbed_count"]} and e["keep"] == 5 for e in events)
    saved = sum(e["chars_saved"] for e in events)
    assert saved == sum(len(m.content) for m in stored[:3]) - sum(len(s) for s in last[:3])
    assert all(e["tokens_after"] < e["tokens_before"] for e in events)


def test_read_result_shows_a_stubbed_original_once(runner, llm, always):
    def read_back(body: dict[str, Any]) -> Reply:
        stubs = [m["content"] for m in body["messages"] if str(m.get("content")).startswith(STUB_PREFIX)]
        sequence = int(STUB_SEQUENCE.search(stubs[0]).group(1))
        return Reply(tool_calls=[ToolCall("read_result", {"sequence": sequence})])

    llm.script("scripted", [*digits(7), read_back, Reply(tool_calls=[big_output(9)]), Reply(text="ok")])

    result = runner.run_result(user("print, then look back"), RunConfig(stream=False))

    assert result.status == "completed"
    requests = llm.requests_for("scripted")
    shown = tool_contents(requests[8])[-1]
    assert shown.startswith("Result ") and "0" * 1200 in shown  # the first result, as stored
    assert "0" * 1200 not in str(requests[9].messages)  # shown once, then what it left
    assert "read_result showed message" in str(requests[9].messages)


def test_read_result_reads_only_its_own_trace(runner, llm, always):
    llm.script("scripted", [Reply(tool_calls=[ToolCall("bash", {"command": "echo SECRET-OF-A"})]), "done"])
    first = runner.run_result(user("a"), RunConfig(stream=False))
    foreign = Message.objects.get(trace_id=first.trace_id, role="tool")
    llm.script(
        "scripted", [Reply(tool_calls=[ToolCall("read_result", {"sequence": foreign.sequence})]), "done"]
    )

    second = runner.run_result(user("b"), RunConfig(stream=False))

    answer = Message.objects.get(trace_id=second.trace_id, role="tool")
    assert answer.kind == "tool_error" and "not a tool result of this trace" in answer.content
    assert "SECRET-OF-A" not in answer.content


@pytest.mark.parametrize("how", ["run setting", "environment"])
def test_keep_zero_turns_microcompact_off(runner, llm, always, settings, how):
    llm.script("scripted", [*digits(8), Reply(text="done")])
    config = RunConfig(stream=False)
    if how == "run setting":
        config.microcompact_keep = 0
    else:
        settings.AGENT_MICROCOMPACT_KEEP = 0

    result = runner.run_result(user("print digits"), config)

    assert not any(c.startswith(STUB_PREFIX) for c in tool_contents(llm.requests_for("scripted")[-1]))
    assert microcompact_events(result.trace_id) == []
    assert Trace.objects.get(pk=result.trace_id).run_settings["microcompact_keep"] == 0


def test_a_kept_setting_holds_for_the_next_run_and_is_checked():
    stored = check_request({"microcompact_keep": 2}, baseline_policy="auto", may_loosen=False)
    assert stored == {"microcompact_keep": 2}
    for bad in (-1, True, "5", 1.5):
        with pytest.raises(InvalidRun, match="microcompact_keep"):
            check_request({"microcompact_keep": bad}, baseline_policy="auto", may_loosen=False)


def test_one_steps_results_are_never_split(runner, llm, always):
    many = Reply(tool_calls=[big_output(n) for n in range(2, 9)])  # one step, seven results
    llm.script("scripted", [Reply(tool_calls=[big_output(1)]), many, Reply(text="done")])

    runner.run_result(user("print in parallel"), RunConfig(stream=False))

    last = tool_contents(llm.requests_for("scripted")[-1])
    assert last[0].startswith(STUB_PREFIX)  # the older step
    assert not any(c.startswith(STUB_PREFIX) for c in last[1:])  # the newest step whole, all seven


def test_a_shown_once_result_keeps_its_long_term_memory_not_a_stub(llm, always, workspace_root):
    def fetch_page() -> ToolResult:
        """Returns a long page that is worth reading once."""
        return ToolResult(
            title="page",
            output="PAGE-BODY " * 100,
            long_term_memory="a page about X",
            include_output_only_once=True,
        )

    llm.script("scripted", [Reply(tool_calls=[ToolCall("fetch_page", {})]), *digits(6), Reply(text="ok")])

    result = AgentRunner(tool_registry=registry_with(fetch_page)).run_result(
        user("read"), RunConfig(stream=False)
    )

    first = tool_contents(llm.requests_for("scripted")[-1])[0]
    assert first.startswith("[output shown once; kept as] a page about X")
    once = Message.objects.get(trace_id=result.trace_id, name="fetch_page")
    assert once.sequence not in [
        s for e in microcompact_events(result.trace_id) for s in e["stubbed_sequences"]
    ]


def test_below_half_the_context_nothing_is_stubbed(runner, llm, settings):
    settings.AGENT_CONTEXT_TOKENS = 100_000
    llm.script("scripted", [*digits(8), Reply(text="done")])

    result = runner.run_result(user("print digits"), RunConfig(stream=False))

    assert not any(c.startswith(STUB_PREFIX) for c in tool_contents(llm.requests_for("scripted")[-1]))
    assert microcompact_events(result.trace_id) == []


def test_a_long_run_stays_under_the_summary_threshold_with_stubs_alone(runner, llm, settings):
    settings.AGENT_CONTEXT_TOKENS = limit = 6000  # summary above 4,800 tokens, microcompact above 3,000
    settings.AGENT_COMPACTION_REFLECT = False
    llm.check_pairing = True
    llm.script("scripted", [*digits(20), Reply(text="done")])

    result = runner.run_result(user("print digits twenty times"), RunConfig(stream=False))

    assert result.status == "completed"
    requests = llm.requests_for("scripted")
    threshold = int(limit * settings.AGENT_COMPACTION_THRESHOLD)
    assert all(r.status == 200 and request_tokens(r) <= threshold for r in requests)
    assert not any(is_compact_request(r.body) for r in requests)  # no summary call
    assert not TraceEvent.objects.filter(
        trace_id=result.trace_id, type="compaction", payload__level=2
    ).exists()
    stored = Message.objects.filter(trace_id=result.trace_id).order_by("sequence")
    originals = sum(estimate_tokens(m.to_llm_dict()) for m in stored if m.sequence < stored.last().sequence)
    assert originals > threshold  # without the stubs the last request would have needed a summary
    assert microcompact_events(result.trace_id)


def test_the_scripted_server_refuses_a_dangling_tool_message(llm):
    dangling = [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "call_1", "content": "x"}]
    assert "must be a response to a preceeding message with 'tool_calls'" in pairing_error(dangling)
    call = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    assert "call_1" in pairing_error([{"role": "assistant", "content": None, "tool_calls": [call]}])
    llm.check_pairing = True
    body = json.dumps({"model": "scripted", "messages": dangling}).encode()
    request = urllib.request.Request(
        f"{llm.url}/chat/completions", data=body, headers={"content-type": "application/json"}
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=5)
    assert refused.value.code == 400
