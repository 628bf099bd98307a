"""`manage.py run_agent` as a terminal user runs it: a real process, real litellm."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.factories import make_trace
from tests.scripted_llm import Reply, ScriptedLLM, ToolCall
from traces.models import Approval, Message, Trace

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e


@pytest.fixture
def cli_env(tmp_path: Path, scripted_llm_server: ScriptedLLM) -> dict[str, str]:
    scripted_llm_server.reset()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "DATABASE_URL"))}
    env.update(
        SQLITE_PATH=str(tmp_path / "cli.sqlite3"),
        AGENT_WORKSPACE_ROOT=str(tmp_path / "ws"),
        AGENT_MODEL="openai/scripted",
        AGENT_UTILITY_MODEL="openai/utility",
        AGENT_API_BASE=scripted_llm_server.url,
        AGENT_API_KEY="sk-test-not-a-secret",
        PYTHONUNBUFFERED="1",
    )
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    return env


def run_agent(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "run_agent", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def trace_id_of(output: str) -> str:
    match = re.search(r"^trace (\S+) (completed|failed|stopped)", output, re.M)
    assert match, output
    return match.group(1)


def test_run_agent_completes_a_tool_task_then_rewinds_it(
    cli_env: dict[str, Any], scripted_llm_server: ScriptedLLM
):
    scripted_llm_server.script("utility", ["Greeting file"])
    scripted_llm_server.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("write", {"path": "hello.txt", "content": "hi there"})]),
            Reply(tool_calls=[ToolCall("read", {"path": "hello.txt"})]),
            Reply(text="Wrote and checked hello.txt"),
        ],
    )
    done = run_agent(cli_env, "write hello.txt and check it")

    assert done.returncode == 0, done.stdout + done.stderr
    assert "Greeting file" in done.stdout
    assert "-> write(" in done.stdout and "-> read(" in done.stdout
    assert "Wrote and checked hello.txt" in done.stdout
    trace_id = trace_id_of(done.stdout)

    scripted_llm_server.script("scripted", ["Rewound: did it differently"])
    rewound = run_agent(cli_env, "--trace", trace_id, "--after", "3", "do it differently")

    assert rewound.returncode == 0, rewound.stdout + rewound.stderr
    assert "Rewound: did it differently" in rewound.stdout
    sent = scripted_llm_server.requests_for("scripted")[-1].messages
    assert [m["role"] for m in sent][:3] == ["system", "user", "assistant"]
    assert sent[3]["role"] == "tool"  # the cut at 3 kept the write call's result (R3)
    assert sent[4] == {"role": "user", "content": "do it differently"}


def test_run_agent_exit_codes_follow_the_outcome(cli_env: dict[str, Any], scripted_llm_server: ScriptedLLM):
    scripted_llm_server.script("scripted", [Reply(status=400, error="bad request from provider")])
    failed = run_agent(cli_env, "--no-stream", "this will fail")
    assert failed.returncode == 1
    assert "bad request from provider" in failed.stdout + failed.stderr

    refused = run_agent(cli_env, "--trace", "no-such-trace", "hello")
    assert refused.returncode == 2
    assert "does not exist" in refused.stderr

    no_model = run_agent({**cli_env, "AGENT_MODEL": ""}, "anything")
    assert no_model.returncode == 2
    assert "No model configured" in no_model.stderr


def test_on_a_terminal_run_agent_asks_for_approvals_and_runs_on(
    cli_env: dict[str, Any], scripted_llm_server: ScriptedLLM, tmp_path: Path
):
    import pty

    env = {**cli_env, "AGENT_CONFIRM_POLICY": "ask-risky", "EXPERT_PASSWORD": "not-a-secret-1"}
    subprocess.run([sys.executable, "manage.py", "ensure_expert"], cwd=ROOT, env=env, check=True)
    scripted_llm_server.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("write", {"path": "out.txt", "content": "asked first"})]),
            Reply(text="done"),
        ],
    )
    controller, terminal = pty.openpty()
    os.write(controller, b"a\n")  # the answer waits in the terminal until the prompt reads it
    try:
        run = subprocess.run(
            [sys.executable, "manage.py", "run_agent", "--name", "tty", "write out.txt"],
            cwd=ROOT,
            env=env,
            stdin=terminal,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        os.close(terminal)
        os.close(controller)

    assert run.returncode == 0, run.stdout + run.stderr
    assert "write waits for your approval" in run.stdout and '"content": "asked first"' in run.stdout
    assert "done" in run.stdout
    written = list((tmp_path / "ws").glob("*/out.txt"))
    assert [p.read_text() for p in written] == ["asked first"]


def test_off_a_terminal_a_waiting_run_exits_4(cli_env: dict[str, Any], scripted_llm_server: ScriptedLLM):
    scripted_llm_server.script(
        "scripted", [Reply(tool_calls=[ToolCall("write", {"path": "out.txt", "content": "x"})])]
    )
    waiting = run_agent({**cli_env, "AGENT_CONFIRM_POLICY": "ask-risky"}, "write out.txt")
    assert waiting.returncode == 4, waiting.stdout + waiting.stderr
    assert "waiting" in waiting.stdout


def test_run_agent_takes_run_settings_as_flags(cli_env: dict[str, Any], scripted_llm_server: ScriptedLLM):
    scripted_llm_server.script("scripted", ["looked"])
    done = run_agent(
        cli_env,
        "--tools",
        "read,list_files",
        "--temperature",
        "0.2",
        "--llm-param",
        "top_p=0.5",
        "--max-iterations",
        "4",
        "--name",
        "flags",
        "look",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    sent = scripted_llm_server.requests_for("scripted")[-1].body
    assert sorted(t["function"]["name"] for t in sent["tools"]) == ["list_files", "read"]
    assert (sent["temperature"], sent["top_p"]) == (0.2, 0.5)

    bad = run_agent(cli_env, "--temperature", "5", "look")
    assert bad.returncode == 2 and "temperature" in bad.stderr


# --- run_agent --show: the main path at a terminal (call_command, the test database) ---


def linear_trace(count: int, **fields: Any) -> Trace:
    """A trace of `count` messages in one chain (one segment), user/assistant by turns."""
    trace = make_trace(None, name="long one", **fields)
    Message.objects.bulk_create(
        Message(
            message_id=Message.make_id(trace.trace_id, sequence),
            trace=trace,
            role="user" if sequence % 2 else "assistant",
            sequence=sequence,
            parent_sequence=sequence - 1 or None,
            segment_start=1,
            content=f"message {sequence}",
        )
        for sequence in range(1, count + 1)
    )
    Trace.objects.filter(pk=trace.pk).update(last_sequence=count, head_sequence=count, total_messages=count)
    trace.refresh_from_db()
    return trace


def show(*args: str) -> str:
    out = io.StringIO()
    call_command("run_agent", "--show", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_show_prints_the_main_path_with_tool_calls_and_branch_points():
    trace = make_trace(
        None, messages=[("system", "be brief"), ("user", "start"), ("assistant", "old answer")]
    )
    for sequence, parent, role, content, calls in (
        (4, 2, "user", "do it\n  differently", None),
        (
            5,
            4,
            "assistant",
            "",
            [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}],
        ),
        (6, 5, "tool", "README.md", None),
    ):
        Message.objects.create(
            message_id=Message.make_id(trace.trace_id, sequence),
            trace=trace,
            role=role,
            sequence=sequence,
            parent_sequence=parent,
            segment_start=4,
            content=content,
            tool_calls=calls,
            tool_call_id="c1" if role == "tool" else None,
            name="bash" if role == "tool" else None,
        )
    Trace.objects.filter(pk=trace.pk).update(last_sequence=6, head_sequence=6, status="waiting")
    Approval.objects.create(trace=trace, tool_call_id="c2", message_sequence=5, tool_name="write")

    printed = show(trace.trace_id)

    lines = printed.splitlines()
    assert "[   2] user      start" in lines
    assert (
        "       branch point, side branch from here: #3" == lines[lines.index("[   2] user      start") + 1]
    )
    assert "[   4] user      do it differently" in lines
    assert "[   5] assistant -> bash" in lines and "[   6] tool      bash: README.md" in lines
    assert "old answer" not in printed  # off the main path
    assert "side branches leave the main path at: #2 -> #3" in lines
    assert "waiting: approval of write" in lines
    assert f"trace {trace.trace_id} waiting: " in printed  # the status line, as after a run


@pytest.mark.django_db
def test_show_pages_a_10000_message_trace_in_a_few_queries():
    trace = linear_trace(10_000)

    with CaptureQueriesContext(connection) as queries:
        tail = show(trace.trace_id, "--last", "5")
    assert len(queries) <= 5  # the page, not the history: its speed is bench's, not a timed test's
    shown = re.findall(r"^\[\s*(\d+)\]", tail, re.M)
    assert shown == ["9996", "9997", "9998", "9999", "10000"]
    assert f"... 9995 earlier: run_agent --show {trace.trace_id} --from 9991 --last 5" in tail
    assert "no side branches" in tail

    page = show(trace.trace_id, "--from", "100", "--last", "3")
    assert re.findall(r"^\[\s*(\d+)\]", page, re.M) == ["100", "101", "102"]
    assert f"... 9898 later: run_agent --show {trace.trace_id} --from 103 --last 3" in page

    with pytest.raises(CommandError, match=f"--from 20000 is past .* run_agent --show {trace.trace_id}"):
        show(trace.trace_id, "--from", "20000")
    with pytest.raises(CommandError, match="does not exist"):
        show("no-such-trace")


@pytest.mark.django_db
def test_a_refused_after_points_at_show(llm):
    trace = linear_trace(4, status="completed")
    Message.objects.create(
        message_id=Message.make_id(trace.trace_id, 5),
        trace=trace,
        role="user",
        sequence=5,
        parent_sequence=2,
        segment_start=5,
        content="a side branch",
    )
    for after, why in (
        ("99", "does not exist"),
        ("5", "is on a side branch"),
        ("0", "must be a message sequence"),
    ):
        with pytest.raises(CommandError) as refused:
            call_command(
                "run_agent", "--trace", trace.trace_id, "--after", after, "again", stdout=io.StringIO()
            )
        message = str(refused.value)
        assert why in message and "--after" in message and "after_sequence" not in message
        assert message.endswith(f"pick a sequence from: python manage.py run_agent --show {trace.trace_id}")


def test_run_agent_works_in_a_project_and_refuses_an_unknown_one(
    cli_env: dict[str, Any], scripted_llm_server: ScriptedLLM, tmp_path: Path
):
    shop = tmp_path / "shop"
    shop.mkdir()
    (shop / "AGENTS.md").write_text("Run the shop's tests with make check.\n")
    env = {**cli_env, "AGENT_PROJECTS": json.dumps({"shop": str(shop)})}
    scripted_llm_server.script("scripted", ["looked"])

    done = run_agent(env, "--project", "shop", "look")

    assert done.returncode == 0, done.stdout + done.stderr
    system = scripted_llm_server.requests_for("scripted")[-1].body["messages"][0]["content"]
    assert "Run the shop's tests with make check." in system
    bad = run_agent(env, "--project", "mall", "look")
    assert bad.returncode == 2 and "project: unknown project 'mall'; known: shop" in bad.stderr
