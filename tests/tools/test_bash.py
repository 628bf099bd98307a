from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.tools.conftest import RunTool, host_processes, wait_until_gone

pytestmark = pytest.mark.usefixtures("sandboxed")

ALLOWED_VARIABLES = {"PATH", "HOME", "LANG", "LC_ALL", "TERM", "TMPDIR"}
# bash itself adds these to every shell.
BASH_OWN_VARIABLES = {"PWD", "OLDPWD", "SHLVL", "_"}


def test_bash_returns_output_and_exit_code(run_tool: RunTool) -> None:
    result = run_tool("bash", {"command": "echo hello; echo oops >&2"})

    assert not result.is_error
    assert result.title == "$ echo hello; echo oops >&2 (exit 0)"
    assert result.output == "hello\noops\n"
    assert result.metadata["exit_code"] == 0


def test_nonzero_exit_is_a_normal_result_with_the_code_in_the_title(run_tool: RunTool) -> None:
    result = run_tool("bash", {"command": "echo failing; exit 3"})

    assert not result.is_error
    assert result.title == "$ echo failing; exit 3 (exit 3)"
    assert result.output == "failing\n"


def test_bash_runs_in_the_workspace_with_home_there(run_tool: RunTool, workspace: Path) -> None:
    result = run_tool("bash", {"command": 'pwd; echo "$HOME"; echo "$TMPDIR"; touch made.txt'})

    real = workspace.resolve()
    # TMPDIR is the sandbox's private /tmp, which nothing else sees.
    assert result.output.splitlines() == [str(real), str(real), "/tmp"]
    assert (workspace / "made.txt").exists()


def test_bash_stdin_is_closed_so_reading_it_ends_at_once(run_tool: RunTool) -> None:
    started = time.monotonic()

    result = run_tool("bash", {"command": "cat; read -r line; echo read-exit=$?", "timeout": 10})

    assert time.monotonic() - started < 5
    assert result.output == "read-exit=1\n"


def test_bash_environment_carries_no_secrets(run_tool: RunTool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("DATABASE_URL", "postgres://user:hunter2@db/agentsite")

    output = run_tool("bash", {"command": "env"}).output

    assert "sk-secret" not in output
    assert "hunter2" not in output
    names = {line.split("=", 1)[0] for line in output.splitlines() if "=" in line}
    assert ALLOWED_VARIABLES <= names
    assert names <= ALLOWED_VARIABLES | BASH_OWN_VARIABLES


def test_timeout_kills_the_whole_process_tree(run_tool: RunTool) -> None:
    started = time.monotonic()

    result = run_tool("bash", {"command": "sleep 30.4821 & echo started; sleep 30.4822", "timeout": 1})

    assert time.monotonic() - started < 5
    assert result.is_error
    assert result.title == "$ sleep 30.4821 & echo started; sleep 30.4822 (timed out after 1 s, killed)"
    assert result.output == "started\n\n[killed after 1 s timeout]"
    assert host_processes("30.482") == []  # gone when the call returns, not some time after


def test_background_processes_do_not_outlive_the_command(run_tool: RunTool) -> None:
    started = time.monotonic()

    result = run_tool("bash", {"command": "sleep 30.5931 > /dev/null 2>&1 & echo done"})

    assert time.monotonic() - started < 5
    assert result.output == "done\n"
    assert wait_until_gone("30.5931", seconds=0) == []


def test_background_process_holding_the_output_does_not_block_the_result(run_tool: RunTool) -> None:
    started = time.monotonic()

    result = run_tool("bash", {"command": "sleep 30 & echo done"})

    assert time.monotonic() - started < 5
    assert result.title.endswith("(exit 0)")


def test_output_is_capped_at_the_configured_limit(run_tool: RunTool, settings) -> None:
    settings.AGENT_TOOL_OUTPUT_LIMIT = 1000

    result = run_tool("bash", {"command": "head -c 5000 /dev/zero | tr '\\0' a"})

    assert result.output == "a" * 1000 + "\n[truncated: 4000 more characters]"


def test_flooding_output_is_drained_without_blocking(run_tool: RunTool, settings) -> None:
    settings.AGENT_TOOL_OUTPUT_LIMIT = 1000

    result = run_tool("bash", {"command": "yes | head -n 2000000; echo finished >&2", "timeout": 20})

    assert result.title.endswith("(exit 0)")
    assert result.output.startswith("y\ny\n")
    assert "[truncated: " in result.output


def test_timeout_above_the_maximum_is_capped(run_tool: RunTool, settings) -> None:
    settings.AGENT_BASH_TIMEOUT = 0.5

    result = run_tool("bash", {"command": "true", "timeout": 100})

    assert not result.is_error
    assert result.output == "(no output)\n[timeout capped at 5 s]"


@pytest.mark.parametrize("timeout", [0, -1])
def test_non_positive_timeout_is_refused(run_tool: RunTool, timeout: float) -> None:
    result = run_tool("bash", {"command": "true", "timeout": timeout})

    assert result.is_error
    assert "timeout must be a positive number of seconds" in result.output


def test_process_killed_by_a_signal_says_so(run_tool: RunTool) -> None:
    result = run_tool("bash", {"command": "kill -TERM $$"})

    assert result.title == "$ kill -TERM $$ (killed by signal 15, SIGTERM)"


def test_long_commands_are_shortened_in_the_title(run_tool: RunTool) -> None:
    result = run_tool("bash", {"command": "echo " + "x" * 100})

    assert result.title == "$ echo " + "x" * 52 + "... (exit 0)"


def test_bash_cannot_run_when_not_offered(run_tool: RunTool, workspace: Path) -> None:
    result = run_tool("bash", {"command": "touch marker"}, offered={"read", "glob"})

    assert result.is_error
    assert result.output == "Unknown tool 'bash'. Available tools: glob, read."
    assert not (workspace / "marker").exists()
