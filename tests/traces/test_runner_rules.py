"""Runner rules: safe truncation, goal rebuild on rewind, stop, healing, stats, errors."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import connection

from tests.scripted_llm import Reply, ToolCall
from tools.registry import ToolRegistry, build_tool, load_builtin_tools
from traces.models import Goal, Message, Trace, TraceEvent
from traces.runner import AgentRunner, LeaseLost, RunConfig, RunConflict
from traces.runner.prepare import safe_cut
from traces.runner.tool_api import ToolContext
from traces.selectors import trace_main_path

pytestmark = pytest.mark.django_db


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def registry_with(*funcs: Any) -> ToolRegistry:
    """The built-in tools plus test tools, in a private registry."""
    registry = ToolRegistry()
    for name in load_builtin_tools().names():
        registry.register(load_builtin_tools().get(name))
    for func in funcs:
        registry.register(build_tool(func, inline=True))
    return registry


def goal_call(action: str, **kwargs: Any) -> ToolCall:
    return ToolCall("goal", {"action": action, **kwargs})


def test_after_sequence_on_an_assistant_with_tool_calls_extends_past_its_results(runner, llm):
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("list_files", {}), ToolCall("list_files", {"path": "."})]),
            Reply(text="listed"),
        ],
    )
    first = runner.run_result(user("list"), RunConfig())
    path = trace_main_path(trace_id=first.trace_id)
    assistant = next(m for m in path if m.role == "assistant" and m.tool_calls)
    assert safe_cut(path, path.index(assistant)) == path.index(assistant) + 2
    llm.script("scripted", ["redo"])

    runner.run_result(user("again"), RunConfig(trace_id=first.trace_id, after_sequence=assistant.sequence))

    new_path = trace_main_path(trace_id=first.trace_id)
    new_user = next(m for m in new_path if m.content == "again")
    assert new_user.parent_sequence == assistant.sequence + 2  # after both tool results
    requests = llm.requests_for("scripted")[-1].messages
    tool_ids = [m["tool_call_id"] for m in requests if m["role"] == "tool"]
    assert tool_ids == [c["id"] for c in assistant.tool_calls]


def test_rewind_keeps_goals_created_before_the_cut_and_snapshots_the_tree(runner, llm):
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[goal_call("add", description="Read the spec")]),
            Reply(tool_calls=[goal_call("add", description="Write the code")]),
            Reply(tool_calls=[goal_call("focus", target="2")]),
            Reply(text="planned"),
        ],
    )
    first = runner.run_result(user("plan"), RunConfig())
    goals = {g.description: g for g in Goal.objects.filter(trace_id=first.trace_id)}
    assert goals["Read the spec"].status == "in_progress"  # focused by add
    assert goals["Write the code"].status == "in_progress"  # focused later
    path = trace_main_path(trace_id=first.trace_id)
    first_tool = next(m for m in path if m.role == "tool")  # after goal 1 was added
    llm.script("scripted", ["replanned"])

    runner.run_result(user("replan"), RunConfig(trace_id=first.trace_id, after_sequence=first_tool.sequence))

    kept = list(Goal.objects.filter(trace_id=first.trace_id))
    assert [g.description for g in kept] == ["Read the spec"]
    assert kept[0].status == "pending"  # in_progress goals are reset
    trace = Trace.objects.get(pk=first.trace_id)
    assert trace.current_goal_id is None
    rewind = TraceEvent.objects.get(trace=trace, type="rewind")
    snapshot = [g["description"] for g in rewind.payload["goal_tree_snapshot"]["goals"]]
    assert snapshot == ["Read the spec", "Write the code"]


def test_stop_during_a_slow_model_call_takes_effect_within_two_seconds(llm, workspace_root, transactional_db):
    llm.script("scripted", [Reply(text="too late", delay=8)])
    runner = AgentRunner()
    items: list[Any] = []
    thread = threading.Thread(target=lambda: items.extend(runner.run(user("slow"), RunConfig())))
    thread.start()
    llm.wait_for_requests(2, timeout=10)  # the name, then the slow main call
    trace_id = Trace.objects.get().trace_id

    started = time.monotonic()
    assert AgentRunner().stop(trace_id)  # another runner: the flag crosses processes
    thread.join(timeout=5)

    assert not thread.is_alive()
    assert time.monotonic() - started < 2.0
    trace = Trace.objects.get(pk=trace_id)
    assert trace.status == "stopped"
    assert trace.head_sequence == 2  # system + user saved; the abandoned reply is not
    assert not Message.objects.filter(trace=trace, role="assistant").exists()
    assert TraceEvent.objects.filter(trace=trace, type="stopped").exists()


def test_three_tool_calls_with_one_result_are_healed_once_with_persisted_results(llm, workspace_root):
    holder: dict[str, AgentRunner] = {}

    def interrupt(ctx: ToolContext) -> str:
        """Stops the run it is part of, as an expert would mid-step."""
        holder["runner"].stop(ctx.trace_id)
        return "stopping"

    runner = holder["runner"] = AgentRunner(tool_registry=registry_with(interrupt))
    llm.script(
        "scripted",
        [
            Reply(
                tool_calls=[
                    ToolCall("interrupt", {}),
                    ToolCall("list_files", {}),
                    ToolCall("read", {"path": "x"}),
                ]
            )
        ],
    )
    first = runner.run_result(user("go"), RunConfig())
    assert first.status == "stopped"
    assert Message.objects.filter(trace_id=first.trace_id, role="tool").count() == 1
    llm.script("scripted", ["resumed"])

    second = runner.run_result([], RunConfig(trace_id=first.trace_id))

    assert second.status == "completed"
    healed = list(Message.objects.filter(trace_id=first.trace_id, kind="healed").order_by("sequence"))
    assert [m.name for m in healed] == ["list_files", "read"]
    assert all("interrupted" in m.content for m in healed)
    sent = llm.requests_for("scripted")[-1].messages
    calls = [c["id"] for m in sent if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    answered = [m["tool_call_id"] for m in sent if m["role"] == "tool"]
    assert calls == answered  # every call has exactly one result, in order
    llm.script("scripted", ["again"])
    runner.run_result(user("more"), RunConfig(trace_id=first.trace_id))
    assert Message.objects.filter(trace_id=first.trace_id, kind="healed").count() == 2  # idempotent


def test_stats_roll_up_into_messages_goals_and_the_trace(runner, llm):
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[goal_call("add", description="Count")]),
            Reply(tool_calls=[goal_call("under", description="Count twice")]),
            Reply(tool_calls=[goal_call("focus", target="1.1")]),
            Reply(text="counted"),
        ],
    )
    result = runner.run_result(user("count"), RunConfig())

    assistants = list(Message.objects.filter(trace_id=result.trace_id, role="assistant"))
    served = [r for r in llm.requests_for("scripted")]
    assert [m.prompt_tokens for m in assistants] == [r.prompt_tokens for r in served]
    assert [m.completion_tokens for m in assistants] == [r.completion_tokens for r in served]
    assert all(m.duration_ms is not None and m.cost is None for m in assistants)  # unpriced model
    trace = Trace.objects.get(pk=result.trace_id)
    assert trace.total_prompt_tokens == sum(r.prompt_tokens for r in served)
    assert trace.total_tokens == trace.total_prompt_tokens + trace.total_completion_tokens
    assert trace.total_messages == Message.objects.filter(trace=trace).count()
    parent, child = Goal.objects.filter(trace=trace).order_by("position", "goal_id")
    child_tokens = sum(
        (m.prompt_tokens or 0) + (m.completion_tokens or 0) for m in assistants if m.goal_id == child.goal_id
    )
    parent_tokens = sum(
        (m.prompt_tokens or 0) + (m.completion_tokens or 0) for m in assistants if m.goal_id == parent.goal_id
    )
    assert child_tokens > 0 and parent_tokens > 0
    assert child.self_stats["total_tokens"] == child_tokens
    assert parent.self_stats["total_tokens"] == parent_tokens
    assert parent.cumulative_stats["total_tokens"] == parent_tokens + child_tokens
    assert (
        parent.cumulative_stats["message_count"]
        == parent.self_stats["message_count"] + child.self_stats["message_count"]
    )


def test_cost_comes_from_litellm_prices_when_the_model_has_one(runner, llm, settings):
    from traces.llm import register_model_prices

    settings.AGENT_MODEL_PRICES = (
        '{"openai/priced": {"input_cost_per_token": 0.001, "output_cost_per_token": 0.002,'
        ' "litellm_provider": "openai", "mode": "chat"},'
        ' "priced": {"input_cost_per_token": 0.001, "output_cost_per_token": 0.002,'
        ' "litellm_provider": "openai", "mode": "chat"}}'
    )
    register_model_prices()
    llm.script("priced", ["cheap answer"])

    result = runner.run_result(user("price me"), RunConfig(model="openai/priced"))

    reply = Message.objects.get(trace_id=result.trace_id, role="assistant")
    expected = reply.prompt_tokens * 0.001 + reply.completion_tokens * 0.002
    assert reply.cost == pytest.approx(expected)
    assert Trace.objects.get(pk=result.trace_id).total_cost == pytest.approx(expected)


def test_a_run_without_a_plan_gets_an_auto_root_goal_linking_its_messages(runner, llm):
    llm.script("scripted", [Reply(tool_calls=[ToolCall("list_files", {})]), Reply(text="ok")])
    result = runner.run_result(user("look around"), RunConfig())
    root = Goal.objects.get(trace_id=result.trace_id)
    assert root.description == "look around"
    linked = Message.objects.filter(trace_id=result.trace_id, role__in=["assistant", "tool"])
    assert {m.goal_id for m in linked} == {root.goal_id}


def test_unknown_tools_and_bad_arguments_are_reported_to_the_model_and_the_loop_goes_on(runner, llm):
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("teleport", {"to": "mars"})]),
            Reply(tool_calls=[ToolCall("read", "{not json")]),
            Reply(tool_calls=[ToolCall("read", {"no_such_param": 1})]),
            Reply(tool_calls=[ToolCall("None", {})]),
            Reply(text="recovered"),
        ],
    )
    result = runner.run_result(user("try things"), RunConfig())

    assert result.status == "completed"
    errors = list(Message.objects.filter(trace_id=result.trace_id, role="tool").order_by("sequence"))
    assert all(m.kind == "tool_error" for m in errors)
    assert "Unknown tool 'teleport'" in errors[0].content
    assert "not valid JSON" in errors[1].content
    assert "unknown parameter(s) no_such_param" in errors[2].content
    # G2: a call named "None" is dropped, and the empty turn gets a runtime note
    assert len(errors) == 3
    dropped = Message.objects.filter(trace_id=result.trace_id, role="assistant").order_by("sequence")[3]
    assert dropped.tool_calls is None
    note = Message.objects.get(trace_id=result.trace_id, kind="guard")
    assert note.parent_sequence == dropped.sequence and "no valid tool call" in note.content


def test_a_preset_denied_tool_is_neither_offered_nor_executable(runner, llm, workspace_root):
    llm.script(
        "scripted",
        [Reply(tool_calls=[ToolCall("write", {"path": "x.txt", "content": "x"})]), Reply(text="no")],
    )
    result = runner.run_result(user("write"), RunConfig(agent_type="explore"))

    offered = {t["function"]["name"] for t in llm.requests_for("scripted")[0]["tools"]}
    assert "write" not in offered and "read" in offered
    refused = Message.objects.get(trace_id=result.trace_id, role="tool")
    assert "Unknown tool 'write'" in refused.content
    assert not (workspace_root / result.trace_id / "x.txt").exists()


def test_context_is_injected_every_n_iterations_with_hooks_and_a_failing_hook_is_skipped(llm, workspace_root):
    def broken_hook(trace: Trace, goal_tree: Any) -> str:
        raise RuntimeError("hook bug")

    def inbox_hook(trace: Trace, goal_tree: Any) -> str:
        return "## Messages\n\n2 new messages"

    runner = AgentRunner(context_hooks=[broken_hook, inbox_hook])
    llm.script(
        "scripted",
        [Reply(tool_calls=[goal_call("add", description="Step")])]
        + [Reply(tool_calls=[ToolCall("list_files", {})])] * 3
        + [Reply(text="end")],
    )
    result = runner.run_result(user("loop"), RunConfig(context_every=2))

    injections = list(Message.objects.filter(trace_id=result.trace_id, kind="context").order_by("sequence"))
    assert len(injections) == 3  # iterations 0, 2 and 4
    assert all(m.role == "system" for m in injections)
    assert "## Current Plan" not in injections[0].content  # no plan yet at iteration 0
    assert "## Current Plan" in injections[1].content and "1. [in_progress] Step" in injections[1].content
    assert all("2 new messages" in m.content for m in injections)


def test_the_step_limit_pauses_the_run_and_a_continue_goes_on_with_a_higher_limit(runner, llm):
    llm.script("scripted", [Reply(tool_calls=[ToolCall("list_files", {})])] * 3 + ["done"])
    result = runner.run_result(user("loop forever"), RunConfig(max_iterations=3))
    assert result.status == "stopped"
    assert result.error.startswith("step limit: 3 steps without a final answer")
    stopped = TraceEvent.objects.filter(trace_id=result.trace_id, type="stopped").get()
    assert stopped.payload["reason"] == "step_limit"

    resumed = runner.run_result([], RunConfig(trace_id=result.trace_id, max_iterations=5))

    assert (resumed.status, resumed.result) == ("completed", "done")
    assert Trace.objects.get(pk=result.trace_id).run_settings["max_iterations"] == 5
    changed = TraceEvent.objects.get(trace_id=result.trace_id, type="settings_changed").payload["changed"]
    assert changed == {"max_iterations": {"from": 3, "to": 5}}


def test_without_a_run_or_preset_limit_the_deployments_applies(runner, llm, settings):
    settings.AGENT_MAX_ITERATIONS = 2
    llm.script("scripted", [Reply(tool_calls=[ToolCall("list_files", {})])] * 2)
    result = runner.run_result(user("loop"), RunConfig(name="n"))
    assert result.status == "stopped" and result.iterations == 2
    assert Trace.objects.get(pk=result.trace_id).run_settings["max_iterations"] == 2


def test_a_second_run_on_a_running_trace_is_a_conflict(runner, llm):
    first = runner.run_result(user("one"), RunConfig())
    Trace.objects.filter(pk=first.trace_id).update(
        status="running",
        run_owner="other:1",
        heartbeat_at=Trace.objects.get(pk=first.trace_id).updated_at.__class__.now(tz=None).astimezone(),
    )
    with pytest.raises(RunConflict, match="already running"):
        runner.run_result(user("two"), RunConfig(trace_id=first.trace_id))


def test_a_run_that_lost_its_lease_writes_nothing_more(llm, workspace_root):
    def usurp(ctx: ToolContext) -> str:
        """Simulates another worker claiming the trace mid-run."""
        from django.db.models import F

        Trace.objects.filter(pk=ctx.trace_id).update(run_token=F("run_token") + 1)
        return "claimed"

    runner = AgentRunner(tool_registry=registry_with(usurp))
    llm.script("scripted", [Reply(tool_calls=[ToolCall("usurp", {})]), Reply(text="never stored")])
    with pytest.raises(LeaseLost):
        runner.run_result(user("go"), RunConfig())
    trace = Trace.objects.get()
    roles = list(Message.objects.filter(trace=trace).values_list("role", flat=True))
    assert roles == ["system", "user", "assistant"]  # the tool result's step rolled back


def test_message_events_carry_long_content_cut_short_and_say_so(runner, llm, settings):
    settings.AGENT_TOOL_SPILL_CHARS = 100_000
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("bash", {"command": "python3 -c \"print('x' * 9000)\""})]),
            Reply(text="ok"),
        ],
    )
    result = runner.run_result(user("print"), RunConfig(stream=False))
    events = {
        e.payload["role"]: e.payload
        for e in TraceEvent.objects.filter(trace_id=result.trace_id, type="message")
    }
    tool = Message.objects.get(trace_id=result.trace_id, role="tool")
    assert len(tool.content) > 9000
    assert events["tool"]["content_truncated"] and len(events["tool"]["content"]) == 4000
    assert not events["assistant"]["content_truncated"]


def test_a_busy_run_sees_a_stop_through_its_own_commits(llm, workspace_root, settings):
    settings.AGENT_STOP_POLL_SECONDS = 3600  # no separate stop poll during this run

    def request_stop(ctx: ToolContext) -> str:
        """Asks the run to stop, as the API does."""
        Trace.objects.filter(pk=ctx.trace_id).update(stop_requested=True)
        return "asked"

    runner = AgentRunner(tool_registry=registry_with(request_stop))
    llm.script("scripted", [Reply(tool_calls=[ToolCall("request_stop", {})]), Reply(text="never asked")])
    result = runner.run_result(user("go"), RunConfig())
    assert result.status == "stopped"
    assert len(llm.requests_for("scripted")) == 1


def test_a_run_waiting_on_its_model_leaves_the_stop_poll_to_the_watcher_for_its_first_ticks(
    llm, workspace_root, settings
):
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    # Here the watcher never reads the row (the test's open transaction): for its first
    # four ticks the waiting run does not poll for itself; after them it does, once a tick.
    settings.AGENT_STOP_POLL_SECONDS = 0.2
    run_connection = connections["default"]  # the run's: this thread's
    during: list[int] = []

    def wait(seconds: float) -> Any:
        def reply(body: dict[str, Any]) -> Reply:
            before = len(run_connection.queries_log)
            time.sleep(seconds)
            during.append(len(run_connection.queries_log) - before)
            return Reply(text="done")

        return reply

    llm.script("scripted", [wait(0), wait(0.4), wait(2.5)])
    with CaptureQueriesContext(run_connection):
        for text in ("warm", "quick", "slow"):  # warm: litellm's first call imports what it needs
            assert AgentRunner().run_result(user(text), RunConfig(name=text)).status == "completed"
    _, quick, slow = during
    assert quick == 0  # two ticks: the watcher's turn
    assert slow >= 6  # from the fifth tick on: the run's own polls, an UPDATE and a SELECT each


def test_nul_characters_in_tool_output_and_replies_are_stored_as_replacement_characters(llm, workspace_root):
    # PostgreSQL refuses NUL in text and jsonb; a step carrying one must still commit.
    def nul_out() -> str:
        """Returns output with a NUL byte, as `cat` of a binary file would."""
        return "before\x00after"

    runner = AgentRunner(tool_registry=registry_with(nul_out))
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("nul_out", {}), goal_call("add", description="plan\x00")]),
            Reply(text="done\x00"),
        ],
    )
    result = runner.run_result(user("go\x00"), RunConfig())

    assert result.status == "completed"
    assert Trace.objects.get(pk=result.trace_id).result_summary == "done\ufffd"
    assert Goal.objects.filter(trace_id=result.trace_id, description="plan\ufffd").exists()
    contents = list(Message.objects.filter(trace_id=result.trace_id).values_list("content", flat=True))
    assert "before\ufffdafter" in contents and "done\ufffd" in contents and "go\ufffd" in contents
    assert not any("\x00" in str(c) for c in contents)
    sent = llm.requests_for("scripted")[-1].messages
    assert {"role": "user", "content": "go\ufffd"} in sent  # the model sees what is stored
    events = TraceEvent.objects.filter(trace_id=result.trace_id, type="message")
    assert "before\ufffdafter" in [e.payload["content"] for e in events]


@pytest.mark.django_db(transaction=True)
def test_runs_on_one_runner_in_two_threads_each_report_their_own_figures(runner, llm):
    llm.script("scripted", [Reply(tool_calls=[ToolCall("list_files", {})]), "one", "two"])
    seen: dict[str, Any] = {}

    def short() -> None:
        try:
            result = runner.run_result(user("short"), RunConfig(name="short"))
            seen["short"] = (result.iterations, runner.last_run_stats["iterations"])
        finally:
            connection.close()

    long = runner.run_result(user("long"), RunConfig(name="long"))  # a tool step, then an answer
    thread = threading.Thread(target=short)
    thread.start()
    thread.join()

    assert (long.iterations, runner.last_run_stats["iterations"]) == (2, 2)  # not the other thread's 1
    assert seen["short"] == (1, 1)
