"""LifecycleHooks (G4): order, failures skipped, blocking and rewriting, settings; and through a run."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from tests.scripted_llm import Reply, ToolCall
from traces.guards.hooks import POINTS, LifecycleHooks, hooks_from_settings
from traces.models import Message, Trace
from traces.runner import AgentRunner, RunConfig
from traces.runner.tool_api import ToolResult

TRACE = object()
CALL = {"id": "call_1", "type": "function", "function": {"name": "write", "arguments": "{}"}}
CALLED: list[str] = []


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def register_settings_hooks(hooks: LifecycleHooks) -> None:
    """Named in AGENT_HOOKS by tests below."""
    hooks.register("on_agent_end", lambda trace: CALLED.append(f"end:{trace.status}"))


def test_hooks_run_by_ascending_priority_and_ties_keep_registration_order():
    seen: list[str] = []
    hooks = LifecycleHooks()
    hooks.register("after_model", lambda trace, response: seen.append("default"))
    hooks.register("after_model", lambda trace, response: seen.append("late"), priority=500)
    hooks.register("after_model", lambda trace, response: seen.append("early"), priority=1)
    hooks.register("after_model", lambda trace, response: seen.append("default, second"))

    hooks.after_model(TRACE, "response")

    assert seen == ["early", "default", "default, second", "late"]


def test_a_failing_hook_is_logged_and_skipped_and_the_next_one_runs(caplog):
    seen: list[Any] = []

    def broken(trace: Any, info: dict[str, Any]) -> None:
        raise RuntimeError("a broken hook")

    hooks = LifecycleHooks()
    hooks.register("on_compaction", broken, priority=1)
    hooks.register("on_compaction", lambda trace, info: seen.append(info))

    with caplog.at_level(logging.ERROR, logger="traces.guards.hooks"):
        hooks.on_compaction(TRACE, {"level": 1})

    assert seen == [{"level": 1}]
    [record] = caplog.records
    assert "on_compaction hook" in record.getMessage() and "failed; skipped" in record.getMessage()
    assert record.exc_info[0] is RuntimeError


def test_before_tool_call_returns_the_first_blocking_reason_and_skips_later_hooks():
    seen: list[str] = []
    hooks = LifecycleHooks()
    hooks.register("before_tool_call", lambda trace, call: seen.append("allows") or None, priority=1)
    hooks.register("before_tool_call", lambda trace, call: 1 / 0, priority=2)  # skipped, not blocking
    hooks.register(
        "before_tool_call",
        lambda trace, call: "writes are frozen" if call["function"]["name"] == "write" else None,
        priority=3,
    )
    hooks.register("before_tool_call", lambda trace, call: seen.append("late") or None, priority=4)

    assert hooks.before_tool_call(TRACE, CALL) == "writes are frozen"
    assert seen == ["allows"]
    read = {**CALL, "function": {"name": "read", "arguments": "{}"}}
    assert hooks.before_tool_call(TRACE, read) is None
    assert seen == ["allows", "allows", "late"]


def test_after_tool_call_passes_each_rewrite_on_and_none_keeps_the_result():
    hooks = LifecycleHooks()
    hooks.register("after_tool_call", lambda trace, call, result: result.upper(), priority=1)
    hooks.register("after_tool_call", lambda trace, call, result: None, priority=2)
    hooks.register("after_tool_call", lambda trace, call, result: f"[{result}]", priority=3)

    assert hooks.after_tool_call(TRACE, CALL, "ok") == "[OK]"
    assert LifecycleHooks().after_tool_call(TRACE, CALL, "untouched") == "untouched"


def test_before_model_may_replace_the_messages_and_a_failing_hook_leaves_them():
    hooks = LifecycleHooks()
    hooks.register("before_model", lambda trace, messages: [*messages, {"role": "user", "content": "+"}])
    hooks.register("before_model", lambda trace, messages: None)
    hooks.register("before_model", lambda trace, messages: messages[5])  # IndexError: skipped

    assert hooks.before_model(TRACE, [{"role": "user", "content": "hi"}]) == [
        {"role": "user", "content": "hi"},
        {"role": "user", "content": "+"},
    ]


def test_an_unknown_point_is_refused_naming_the_points():
    hooks = LifecycleHooks()
    assert not hooks and not hooks.has("on_agent_end")
    with pytest.raises(ValueError, match="unknown hook point 'after_everything'; points: before_model"):
        hooks.register("after_everything", print)
    hooks.register(POINTS[-1], print)
    assert hooks and hooks.has("on_agent_end")


def test_hooks_from_settings_calls_each_named_function_with_the_registry(settings):
    settings.AGENT_HOOKS = ["tests.traces.test_hooks.register_settings_hooks"]
    assert hooks_from_settings().has("on_agent_end")
    settings.AGENT_HOOKS = []
    assert not hooks_from_settings()


# --- through a run ----------------------------------------------------------


@pytest.mark.django_db
def test_hooks_replace_messages_block_and_rewrite_tool_calls_in_priority_order(llm, workspace_root):
    seen: list[str] = []
    hooks = LifecycleHooks()

    def redact(trace: Trace, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            {**m, "content": m["content"].replace("secret-plan", "[redacted]")}
            if isinstance(m.get("content"), str)
            else m
            for m in messages
        ]

    def explode(*args: Any) -> None:
        raise RuntimeError("a broken hook")

    hooks.register("before_model", redact)
    hooks.register("after_model", lambda trace, response: seen.append(f"model:{response.finish_reason}"))
    hooks.register("before_tool_call", explode, priority=1)
    hooks.register(
        "before_tool_call",
        lambda trace, call: "writes are frozen" if call["function"]["name"] == "write" else None,
        priority=5,
    )
    hooks.register("before_tool_call", lambda trace, call: seen.append("late") or None, priority=50)
    hooks.register(
        "after_tool_call",
        lambda trace, call, result: ToolResult(title="rewritten", output=result.output.upper()),
    )
    hooks.register("on_agent_end", lambda trace: seen.append(f"end:{trace.status}"))
    llm.script(
        "scripted",
        [
            Reply(
                tool_calls=[ToolCall("write", {"path": "a.txt", "content": "x"}), ToolCall("list_files", {})]
            ),
            Reply(text="ok"),
        ],
    )

    result = AgentRunner(hooks=hooks).run_result(user("the secret-plan"), RunConfig())

    assert result.status == "completed"
    first_request = llm.requests_for("scripted")[0].messages
    assert "[redacted]" in first_request[1]["content"] and "secret-plan" not in str(first_request)
    blocked, listed = Message.objects.filter(trace_id=result.trace_id, role="tool").order_by("sequence")
    assert "blocked: writes are frozen" in blocked.content.lower()
    assert not (workspace_root / result.trace_id / "a.txt").exists()
    title, output = listed.content.split("\n\n", 1)
    assert title == "rewritten" and output == output.upper() and output.strip()
    assert seen == [
        "model:tool_calls",
        "late",
        "model:stop",
        "end:completed",
    ]  # blocked call skips later hooks


@pytest.mark.django_db
def test_hooks_named_in_settings_are_registered(llm, workspace_root, settings):
    settings.AGENT_HOOKS = ["tests.traces.test_hooks.register_settings_hooks"]
    CALLED.clear()
    AgentRunner().run_result(user("hi"), RunConfig())
    assert CALLED == ["end:completed"]


def test_run_extensions_register_once_when_an_apps_ready_runs_again():
    from django.apps import apps
    from django.test.utils import isolate_apps

    from traces.runner.extensions import extensions

    before = {point: list(getattr(extensions, point)) for point in ("context_hooks", "healers", "after_end")}
    with isolate_apps("traces"):  # a second registry calls TracesConfig.ready() again
        pass
    apps.get_app_config("traces").ready()
    assert {point: list(getattr(extensions, point)) for point in before} == before
