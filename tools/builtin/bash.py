"""The `bash` tool: run a shell command in the trace workspace, inside the sandbox.

The command runs under `bash -c` through `tools/sandbox.py:run` (bubblewrap: only
the workspace writable, no secrets, no network unless allowed, resource limits,
nothing left running afterwards), with stdin closed. With AGENT_SANDBOX=off it
runs unconfined as the server's user; when the sandbox cannot run here the tool
is not offered at all.
"""

from __future__ import annotations

import signal

from django.conf import settings

from tools import bash_rules, sandbox
from tools.registry import tool
from traces.runner.tool_api import ToolContext, ToolError, ToolResult

MAX_TIMEOUT_FACTOR = 10
TITLE_COMMAND_CHARS = 60


# inline: bash enforces its own timeout and kills the sandbox itself.
@tool(
    risk="risky",
    read_only=False,
    inline=True,
    unavailable=sandbox.unavailable_reason,
    confirm=bash_rules.confirm_question,  # under ask-risky only matching commands wait (G5)
)
def bash(ctx: ToolContext, command: str, timeout: float | None = None) -> ToolResult:
    """Run a shell command with bash in the workspace and return its exit code and output.

    The working directory and HOME are the workspace root. stdout and stderr are
    combined; stdin is closed, so interactive programs fail instead of waiting.
    A non-zero exit code is reported, not treated as a failure of the tool.

    The command runs in a sandbox: it sees the workspace (read-write, or
    read-only when the workspace is a read-only project), the
    system's programs and libraries (read-only) and an empty private /tmp, and
    nothing else of the machine; no credentials are in its environment. It has
    no network access unless this server allows it, so downloads and package
    installs usually fail. CPU time, memory, file size and the number of
    processes are limited; a command that hits a limit fails or is killed, with
    a note saying which. The command and everything it started are killed when
    it times out, and background processes do not outlive the command. Output
    is capped, so pipe long output through head, tail or grep.

    Args:
        command: The shell command line, such as "ls -la" or "python -m pytest -q 2>&1 | tail -n 30".
        timeout: Seconds before the command is killed; defaults to the configured limit
            (30 s unless changed) and is capped at ten times that.
    """
    if not command.strip():
        raise ToolError("command is empty.")
    default_timeout = settings.AGENT_BASH_TIMEOUT
    limit = default_timeout if timeout is None else timeout
    if limit <= 0:
        raise ToolError(f"timeout must be a positive number of seconds, got {timeout}.")
    capped = limit > default_timeout * MAX_TIMEOUT_FACTOR
    limit = min(limit, default_timeout * MAX_TIMEOUT_FACTOR)

    run = sandbox.run(
        ["bash", "--noprofile", "--norc", "-c", command],
        workspace=ctx.workspace,
        timeout=limit,
        output_limit=settings.AGENT_TOOL_OUTPUT_LIMIT,
        interruption=ctx.interruption,
        network=ctx.sandbox_network,
        writable=ctx.workspace_writable,
    )
    output = run.output or "(no output)"
    if capped:
        output += f"\n[timeout capped at {limit:g} s]"
    output += "".join(f"\n[{note}]" for note in run.notes)
    short = command if len(command) <= TITLE_COMMAND_CHARS else command[: TITLE_COMMAND_CHARS - 3] + "..."
    metadata = {
        "exit_code": run.exit_code,
        "timed_out": run.timed_out,
        "duration": round(run.duration, 3),
    }
    if run.timed_out:
        return ToolResult(
            title=f"$ {short} (timed out after {limit:g} s, killed)",
            output=output + f"\n[killed after {limit:g} s timeout]",
            metadata=metadata,
            is_error=True,
        )
    if run.interrupted:
        return ToolResult(
            title=f"$ {short} (killed: {run.interrupted})",
            output=output + f"\n[killed: {run.interrupted}]",
            metadata=metadata | {"interrupted": run.interrupted},
            is_error=True,
        )
    status = (
        f"killed by signal {run.signal}{_signal_name(run.signal)}" if run.signal else f"exit {run.exit_code}"
    )
    return ToolResult(title=f"$ {short} ({status})", output=output, metadata=metadata)


def _signal_name(number: int) -> str:
    try:
        return f", {signal.Signals(number).name}"
    except ValueError:  # a real-time signal has no name
        return ""
