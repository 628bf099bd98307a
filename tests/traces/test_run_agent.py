"""`manage.py run_agent` as a terminal user runs it: a real process, real litellm."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.scripted_llm import Reply, ScriptedLLM, ToolCall

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
