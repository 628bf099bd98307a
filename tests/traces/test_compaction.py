"""Context management (C1-C5) through the runner and real litellm."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.scripted_llm import Reply, ToolCall
from tests.traces.test_runner_rules import registry_with
from traces.models import Message, Trace, TraceEvent
from traces.runner import AgentRunner, RunConfig
from traces.runner.compaction import SUMMARY_MARKER, estimate_tokens
from traces.runner.tool_api import ToolResult
from traces.selectors import trace_main_path

pytestmark = pytest.mark.django_db

LIMIT = 1000  # the scripted model's context in these tests; compaction starts at 800
# The system prompt's skills, named at the call site: a 1,000-token window has room for
# these two beside the history, not for every skill a run with all tools would get.
SKILLS = ["planning", "research"]


@pytest.fixture
def small_context(settings: Any) -> None:
    settings.AGENT_CONTEXT_TOKENS = LIMIT
    settings.AGENT_COMPACTION_REFLECT = False


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def big_output(n: int, chars: int = 1200) -> ToolCall:
    return ToolCall("bash", {"command": f"python3 -c \"print('{n}' * {chars})\""})


def is_compact_request(body: dict[str, Any]) -> bool:
    last = (body.get("messages") or [{}])[-1]
    return isinstance(last.get("content"), str) and last["content"].startswith("[COMPACT REQUEST]")


def scripted(replies: list[Reply], summary: Reply | None = None) -> Any:
    """Answers compaction requests with `summary`, everything else from `replies` in order."""
    queue = list(replies)

    def answer(body: dict[str, Any]) -> Reply:
        if is_compact_request(body):
            return summary or Reply(text="1. Primary request: print digits. 9. Next step: finish.")
        return queue.pop(0) if queue else Reply(text="finished")

    return answer


def request_tokens(request: Any) -> int:
    return sum(estimate_tokens(m) for m in request.messages)


def test_a_long_run_is_summarised_and_every_request_stays_under_the_limit(runner, llm, small_context):
    llm.script("scripted", [scripted([Reply(tool_calls=[big_output(i)]) for i in range(8)])] * 40)

    result = runner.run_result(user("print big digits eight times"), RunConfig(stream=False, skills=SKILLS))

    assert result.status == "completed"
    requests = llm.requests_for("scripted")
    assert all(request_tokens(r) <= LIMIT for r in requests)
    trace = Trace.objects.get(pk=result.trace_id)
    summaries = list(Message.objects.filter(trace=trace, kind="summary").order_by("sequence"))
    assert summaries and all(s.parent_sequence == 2 for s in summaries)  # hung off the task
    assert summaries[0].content.startswith(SUMMARY_MARKER)
    event = TraceEvent.objects.filter(trace=trace, type="compaction", payload__level=2).first()
    assert (
        event.payload["compressed_count"] > 0
        and event.payload["tokens_after"] < event.payload["tokens_before"]
    )
    first, last = event.payload["compressed_sequences"]
    assert Message.objects.filter(trace=trace, sequence__range=(first, last)).count() == last - first + 1
    path = trace_main_path(trace_id=trace.trace_id)
    assert [m.sequence for m in path][:2] == [1, 2] and summaries[-1] in path
    assert not {first, last} & {m.sequence for m in path}  # compressed originals are off the main path


def test_rewinding_into_a_compressed_range_restores_the_originals(runner, llm, small_context, settings):
    llm.script("scripted", [scripted([Reply(tool_calls=[big_output(i)]) for i in range(6)])] * 40)
    result = runner.run_result(user("print big digits"), RunConfig(stream=False))
    event = TraceEvent.objects.filter(trace_id=result.trace_id, type="compaction", payload__level=2).first()
    first, last = event.payload["compressed_sequences"]
    cut = Message.objects.filter(trace_id=result.trace_id, sequence__range=(first, last), role="tool").first()
    llm.script("scripted", ["redone"])
    settings.AGENT_CONTEXT_TOKENS = 4 * LIMIT  # room for the restored originals this time

    runner.run_result(
        user("again from here"),
        RunConfig(trace_id=result.trace_id, after_sequence=cut.sequence, stream=False),
    )

    path = trace_main_path(trace_id=result.trace_id)
    sequences = [m.sequence for m in path]
    assert sequences[: cut.sequence] == list(range(1, cut.sequence + 1))  # originals back on the main path
    assert not [m for m in path if m.kind == "summary"]
    new_input = next(m for m in path if m.content == "again from here")
    assert new_input.parent_sequence == cut.sequence
    sent = llm.requests_for("scripted")[-1].messages
    assert any("0" * 1200 in str(m.get("content")) for m in sent)  # the model sees the original output again


def test_level_one_leaves_out_finished_goals_and_shows_their_summaries(runner, llm, settings):
    def steps() -> list[Reply]:
        return [
            Reply(tool_calls=[ToolCall("goal", {"action": "add", "description": "Collect digits"})]),
            Reply(tool_calls=[big_output(7, 2000)]),
            Reply(tool_calls=[ToolCall("goal", {"action": "done", "summary": "collected 2000 sevens"})]),
            Reply(tool_calls=[ToolCall("goal", {"action": "add", "description": "Report"})]),
            Reply(text="reported"),
        ]

    settings.AGENT_COMPACTION_REFLECT = False
    settings.AGENT_CONTEXT_TOKENS = 100_000
    llm.script("scripted", [scripted(steps())] * 10)
    runner.run_result(user("collect and report"), RunConfig(stream=False))
    sizes = [request_tokens(r) for r in llm.requests_for("scripted")]
    # a context where the goal is still open at the "done" request, and over the threshold at the end
    settings.AGENT_CONTEXT_TOKENS = int((sizes[2] + sizes[4]) / 2 / settings.AGENT_COMPACTION_THRESHOLD)
    llm.reset()
    llm.script("scripted", [scripted(steps())] * 10)

    result = runner.run_result(user("collect and report"), RunConfig(stream=False))

    assert result.status == "completed"
    last = llm.requests_for("scripted")[-1]
    text = " ".join(str(m.get("content")) for m in last.messages)
    assert "7777777777" not in text  # the finished goal's big output was left out
    assert "## Plan so far" in text and "collected 2000 sevens" in text
    assert request_tokens(last) < sizes[4]
    assert not Message.objects.filter(trace_id=result.trace_id, kind="summary").exists()  # level 1 sufficed
    event = TraceEvent.objects.get(trace_id=result.trace_id, type="compaction", payload__level=1)
    assert event.payload["dropped_sequences"]
    stored = Message.objects.filter(trace_id=result.trace_id, role="tool")
    assert any("7777777777" in str(m.content) for m in stored)  # still stored


def test_three_failed_summaries_open_the_circuit_breaker(runner, llm, small_context):
    llm.script(
        "scripted",
        [
            scripted(
                [Reply(tool_calls=[big_output(i)]) for i in range(8)],
                summary=Reply(status=400, error="summarizer down"),
            )
        ]
        * 40,
    )
    result = runner.run_result(user("print big digits"), RunConfig(stream=False, skills=SKILLS))

    assert result.status == "completed"  # the run goes on without compaction
    compact_requests = [r for r in llm.requests_for("scripted") if is_compact_request(r.body)]
    assert len(compact_requests) == 3
    failures = [e.payload for e in TraceEvent.objects.filter(trace_id=result.trace_id, type="compaction")]
    assert [f["failures"] for f in failures if "failed" in f] == [1, 2, 3]
    assert Trace.objects.get(pk=result.trace_id).context["compaction_failures"] == 3
    # ... and falls back to truncation: no request over the limit, the originals stored.
    agent_requests = [r for r in llm.requests_for("scripted") if not is_compact_request(r.body)]
    assert all(request_tokens(r) <= LIMIT for r in agent_requests)
    cuts = [f for f in failures if f.get("level") == "truncate"]
    assert cuts and all(c["tokens_after"] < c["tokens_before"] for c in cuts)
    dropped = cuts[-1]["dropped_sequences"]
    assert Message.objects.filter(trace_id=result.trace_id, sequence__in=dropped).count() == len(dropped)
    last = agent_requests[-1].messages
    assert last[0]["role"] == "system" and last[1]["content"].startswith("print big digits")
    assert last[2]["content"].startswith("## Plan so far (older messages were left out)")
    assert last[3]["role"] != "tool"  # the window opens at a turn, not between a call and its results


def test_oversized_tool_results_spill_to_the_workspace_with_a_readable_reference(
    runner, llm, settings, workspace_root
):
    settings.AGENT_TOOL_SPILL_CHARS = 1000
    llm.script("scripted", [Reply(tool_calls=[big_output(3, 3000)]), Reply(text="seen")])
    result = runner.run_result(user("print"), RunConfig(stream=False))

    tool = Message.objects.get(trace_id=result.trace_id, role="tool")
    assert "output too large" in tool.content and len(tool.content) < 3000
    spilled = workspace_root / result.trace_id / ".agentsite" / "spill" / f"{tool.message_id}.txt"
    assert "3" * 3000 in spilled.read_text()
    assert f".agentsite/spill/{tool.message_id}.txt" in tool.content


def test_a_shown_once_result_is_replaced_by_its_long_term_memory_after_first_use(llm, workspace_root):
    def fetch_page() -> ToolResult:
        """Returns a long page that is worth reading once."""
        return ToolResult(
            title="page",
            output="PAGE-BODY " * 50,
            long_term_memory="a page about X",
            include_output_only_once=True,
        )

    runner = AgentRunner(tool_registry=registry_with(fetch_page))
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("fetch_page", {})]),
            Reply(tool_calls=[ToolCall("list_files", {})]),
            Reply(text="ok"),
        ],
    )
    result = runner.run_result(user("read the page"), RunConfig(stream=False))

    first, second, third = llm.requests_for("scripted")
    assert "PAGE-BODY" not in str(first.messages)
    assert "PAGE-BODY" in str(second.messages)  # seen once
    assert "PAGE-BODY" not in str(third.messages) and "a page about X" in str(third.messages)
    llm.script("scripted", ["again"])
    runner.run_result(user("more"), RunConfig(trace_id=result.trace_id, stream=False))
    reloaded = llm.requests_for("scripted")[-1]
    assert "PAGE-BODY" not in str(reloaded.messages) and "a page about X" in str(reloaded.messages)
    stored = Message.objects.get(trace_id=result.trace_id, name="fetch_page")
    assert "PAGE-BODY" in stored.content  # the original stays stored


def test_a_reflection_side_branch_comes_before_the_summary(runner, llm, settings):
    import json

    settings.AGENT_CONTEXT_TOKENS = LIMIT
    settings.AGENT_COMPACTION_REFLECT = True
    lesson = {
        "category": "tool_usage",
        "tags": {"state": ["big output"], "intent": ["print digits"]},
        "condition": "a command prints a lot",
        "rule": "Print less: pipe long output through head.",
        "evidence": [3],
    }

    steps = scripted([Reply(tool_calls=[big_output(i)]) for i in range(4)])

    def answer(body: dict[str, Any]) -> Reply:
        last = str((body.get("messages") or [{}])[-1].get("content"))
        if last.startswith("Pause the task and reflect"):
            return Reply(text=json.dumps({"experiences": [lesson]}))
        return steps(body)

    llm.script("scripted", [answer] * 40)
    result = runner.run_result(user("print big digits"), RunConfig(stream=False))

    from memory.models import Experience

    trace = Trace.objects.get(pk=result.trace_id)
    reflect = list(Message.objects.filter(trace=trace, kind="reflect").order_by("sequence"))
    summary = Message.objects.filter(trace=trace, kind="summary").order_by("sequence").first()
    assert reflect and summary and reflect[0].sequence < summary.sequence
    assert not {m.sequence for m in reflect} & {m.sequence for m in trace_main_path(trace_id=trace.trace_id)}
    experience = Experience.objects.filter(rule=lesson["rule"]).first()
    assert experience is not None and experience.status == "draft"
    assert experience.evidence["trace_id"] == trace.trace_id


@pytest.mark.parametrize(
    "calls",
    [
        [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "read", "arguments": '{"path": "a.txt"}'},
            }
        ],
        [
            {
                "id": f"call_{n}",
                "type": "function",
                "function": {"name": "bash", "arguments": '{"command": "ls"}'},
            }
            for n in range(5)
        ],
        [
            {
                "id": "x",
                "type": "function",
                "function": {"name": "write", "arguments": "{" + '"a": 1, ' * 500 + "}"},
            }
        ],
    ],
)
def test_tool_call_estimate_is_the_serialised_size_without_escapes(calls):
    message = {"role": "assistant", "content": None, "tool_calls": calls}
    serialised = json.dumps(calls)
    unescaped = len(serialised) - serialised.count("\\")

    assert unescaped // 4 + 4 - len(calls) <= estimate_tokens(message) <= len(serialised) // 4 + 4


def test_tool_call_estimate_takes_malformed_calls():
    odd = [None, "call", {"id": 3, "function": "bash"}, {"function": {"name": None, "arguments": {"a": 1}}}]
    assert estimate_tokens({"role": "assistant", "content": "", "tool_calls": odd}) > 4


def test_truncation_keeps_the_head_the_plan_and_the_newest_turns_that_fit():
    from traces.runner.compaction import PathInfo, truncate

    call = {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
    messages = [
        {"role": "system", "content": "s" * 40},
        {"role": "user", "content": "task " * 10},
        *[{"role": "assistant", "content": f"step {n} " * 20} for n in range(5)],
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "r" * 200},
        {"role": "assistant", "content": "nearly done"},
    ]
    infos = [PathInfo(n + 1, None, "", estimate_tokens(m)) for n, m in enumerate(messages)]
    keep_last_three = sum(i.tokens for i in infos[:2]) + sum(i.tokens for i in infos[-3:]) + 40

    out, dropped = truncate(messages, infos, "1. [in_progress] Finish", keep_last_three)

    assert out[:2] == messages[:2] and out[2]["content"].endswith("1. [in_progress] Finish")
    assert out[3:] == messages[-3:]  # the call, its result and the newest answer
    assert dropped == [3, 4, 5, 6, 7]
    assert sum(estimate_tokens(m) for m in out) <= keep_last_three
    # A budget that would open the window on the tool result takes its call too.
    out, _ = truncate(messages, infos, "plan", keep_last_three - infos[-3].tokens)
    assert out[3:] == messages[-3:]
