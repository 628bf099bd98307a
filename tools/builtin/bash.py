"""The `bash` tool: run a shell command in the trace workspace.

The command runs under `bash -c` with the workspace as working directory and
HOME, in its own process group (killed as a whole on timeout and when the command
ends), with stdin closed and an environment built from scratch, so no secret of
the server (API keys, database URLs) reaches it.
"""

from __future__ import annotations

import codecs
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import IO

from django.conf import settings

from tools.models import ToolContext, ToolError, ToolResult
from tools.registry import tool
from tools.workspace import truncation_note

MAX_TIMEOUT_FACTOR = 10
# How long to wait for the output pipe to close once the process group is dead.
DRAIN_SECONDS = 5.0
READ_CHUNK_BYTES = 65536
TITLE_COMMAND_CHARS = 60
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


# inline: bash enforces its own timeout and kills the process group itself.
@tool(risk="risky", read_only=False, inline=True)
def bash(ctx: ToolContext, command: str, timeout: float | None = None) -> ToolResult:
    """Run a shell command with bash in the workspace and return its exit code and output.

    The working directory and HOME are the workspace root. stdout and stderr are
    combined; stdin is closed, so interactive programs fail instead of waiting.
    A non-zero exit code is reported, not treated as a failure of the tool. The
    command and everything it started are killed when it times out, and
    background processes do not outlive the command. Output is capped, so pipe
    long output through head, tail or grep. No credentials are available in the
    environment.

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

    run = _run(command, ctx.workspace, limit, settings.AGENT_TOOL_OUTPUT_LIMIT)
    output = run.output or "(no output)"
    if capped:
        output += f"\n[timeout capped at {limit:g} s]"
    short = command if len(command) <= TITLE_COMMAND_CHARS else command[: TITLE_COMMAND_CHARS - 3] + "..."
    metadata = {"exit_code": run.exit_code, "timed_out": run.timed_out, "duration": round(run.duration, 3)}
    if run.timed_out:
        return ToolResult(
            title=f"$ {short} (timed out after {limit:g} s, killed)",
            output=output + f"\n[killed after {limit:g} s timeout]",
            metadata=metadata,
            is_error=True,
        )
    if run.exit_code < 0:
        status = f"killed by signal {-run.exit_code}"
    else:
        status = f"exit {run.exit_code}"
    return ToolResult(title=f"$ {short} ({status})", output=output, metadata=metadata)


def shell_environment(workspace: Path) -> dict[str, str]:
    """The whole environment of a command: nothing inherited but PATH and LANG."""
    tmp = workspace / ".tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    lang = os.environ.get("LANG") or "C.UTF-8"
    return {
        "PATH": os.environ.get("PATH") or DEFAULT_PATH,
        "HOME": str(workspace),
        "LANG": lang,
        "LC_ALL": lang,
        "TERM": "dumb",
        "TMPDIR": str(tmp),
    }


class _Run:
    def __init__(self, exit_code: int, output: str, timed_out: bool, duration: float) -> None:
        self.exit_code = exit_code
        self.output = output
        self.timed_out = timed_out
        self.duration = duration


def _run(command: str, workspace: Path, timeout: float, output_limit: int) -> _Run:
    workspace = workspace.resolve()
    env = shell_environment(workspace)
    executable = shutil.which("bash", path=env["PATH"]) or "/bin/bash"
    started = time.monotonic()
    try:
        process = subprocess.Popen(
            [executable, "--noprofile", "--norc", "-c", command],
            cwd=workspace,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so the whole tree can be killed
        )
    except OSError as exc:
        raise ToolError(f"Could not start bash: {exc}.") from exc
    assert process.stdout is not None
    collector = _OutputCollector(process.stdout, output_limit)
    timed_out = False
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        _kill_group(process.pid)
        process.wait()
    collector.join(DRAIN_SECONDS)
    return _Run(process.returncode, collector.text(), timed_out, time.monotonic() - started)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the group is already gone


class _OutputCollector:
    """Reads a pipe in a thread, keeping the first `limit` characters and counting the rest.

    Reading as the output arrives keeps a chatty command from blocking on a full
    pipe or filling memory.
    """

    def __init__(self, stream: IO[bytes], limit: int) -> None:
        self._limit = limit
        self._kept: list[str] = []
        self._kept_chars = 0
        self._total_chars = 0
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def text(self) -> str:
        text = "".join(self._kept)
        if self._thread.is_alive():
            return text + "\n[output still open: a detached process kept it; it was not waited for]"
        if self._total_chars > self._kept_chars:
            text += truncation_note(self._total_chars - self._kept_chars)
        return text

    def _read(self, stream: IO[bytes]) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        fd = stream.fileno()
        try:
            while chunk := os.read(fd, READ_CHUNK_BYTES):
                self._add(decoder.decode(chunk))
            self._add(decoder.decode(b"", final=True))
        finally:
            stream.close()

    def _add(self, text: str) -> None:
        self._total_chars += len(text)
        room = self._limit - self._kept_chars
        if room > 0:
            piece = text[:room]
            self._kept.append(piece)
            self._kept_chars += len(piece)
