"""Where every process a tool starts runs (X1): one command under bubblewrap.

The command sees the trace workspace read-write at its real path (paths in its
output match what the file tools show); /usr and the /bin, /lib, /sbin links
read-only; a few files of /etc (the dynamic linker's cache, alternatives, time
zone, and a passwd, group and hosts written for it; resolver and CA certificates
only with the network on); a private, size-capped /tmp and /dev/shm; its own
/proc and a minimal /dev. It runs in its own user, PID, IPC, UTS, cgroup and
network namespaces (loopback only unless the network is allowed), in a new
session, and cannot make user namespaces of its own. The project, the database,
the settings, home directories, other workspaces and the server's processes do
not exist in there. bwrap starts from an empty environment (inside, /proc/1 is
bwrap and its environ would be ours) and reads its options from a memfd, so the
few variables the command gets (`bwrap.environment`) are on no command line.

Limits, inside the sandbox through prlimit: CPU seconds, address space, file size,
no core files and the process count. The kernel counts RLIMIT_NPROC per user
namespace and uid, so the count holds per sandbox, but it never applies to uid 0.
A server running as root therefore bounds each call's processes with a pids cgroup
(`cgroup.py`; the system check warns when there is none), drops every
capability, and makes /proc/sys read-only: the command is uid 0 of a namespace
mapped onto root, which ordinary file permissions would let write kernel settings.

Nothing survives the call: the command's PID namespace ends with its first process
(bwrap's init), which is killed on timeout or interruption and dies with bwrap,
which dies with the worker (`--die-with-parent`).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from tools.sandbox import bwrap
from tools.sandbox.cgroup import CallCgroup, pids_cgroup_root
from tools.sandbox.output import OutputCollector
from traces.runner.tool_api import ToolError

logger = logging.getLogger(__name__)

# How long to wait for the output pipe to close once the process tree is dead.
DRAIN_SECONDS = 5.0
START_SECONDS = 10.0  # for bwrap to set the sandbox up and say so


@dataclass
class Outcome:
    """How a command ended. `exit_code` follows the shell: 128 + N when killed by signal N."""

    exit_code: int
    output: str
    duration: float
    signal: int | None = None
    timed_out: bool = False
    interrupted: str | None = None  # why the caller's run had it killed
    notes: list[str] = field(default_factory=list)  # which limit it probably hit


def run(
    argv: list[str],
    *,
    workspace: Path,
    timeout: float,
    output_limit: int,
    network: bool | None = None,
    interruption: Callable[[], str | None] | None = None,
    writable: bool = True,
) -> Outcome:
    """Run `argv` in the workspace, sandboxed unless AGENT_SANDBOX is off; stdout and stderr combined.

    `network` overrides AGENT_SANDBOX_NETWORK for this call; `writable=False`
    mounts the workspace read-only (a read-only project, M9). `interruption` is
    polled every AGENT_STOP_POLL_SECONDS; a reason ends the command like a timeout.
    Raises ToolError when the sandbox cannot run here or cannot start.
    """
    workspace = workspace.resolve()
    if not settings.AGENT_SANDBOX and not writable:
        raise ToolError(
            "The sandbox is off on this server (AGENT_SANDBOX), so a command could write to this "
            "read-only project: commands are refused here. Use the read-only file tools."
        )
    if not settings.AGENT_SANDBOX:
        return _run_unconfined(argv, workspace, timeout, output_limit, interruption)
    reason = unavailable_reason()
    if reason:
        raise ToolError(f"The sandbox is not available on this server: {reason}.")
    allow_network = settings.AGENT_SANDBOX_NETWORK if network is None else network
    return _run_sandboxed(argv, workspace, timeout, output_limit, allow_network, interruption, writable)


def unavailable_reason() -> str | None:
    """Why sandboxed commands cannot run on this server, or None (also None when the sandbox is off)."""
    if not settings.AGENT_SANDBOX:
        return None
    return _probe(settings.AGENT_SANDBOX_BWRAP)


def process_limit() -> str | None:
    """How the process count is bounded ("rlimit" or "cgroup"), or None when it cannot be here."""
    if os.geteuid() != 0:
        return "rlimit"
    return "cgroup" if pids_cgroup_root() is not None else None


@functools.lru_cache(maxsize=8)
def _probe(executable: str) -> str | None:
    """Run `true` in a throwaway sandbox once per process (per bwrap path); the error, or None."""
    if shutil.which(executable) is None:
        return f"bubblewrap ({executable}) is not installed; Debian: apt-get install bubblewrap"
    with tempfile.TemporaryDirectory(prefix="agentsite-sandbox-probe-") as directory:
        try:
            outcome = _run_sandboxed(["true"], Path(directory).resolve(), START_SECONDS, 4000, False, None)
        except ToolError as exc:
            return str(exc)
    if outcome.exit_code != 0:
        return (
            f"bubblewrap cannot create the sandbox: {outcome.output.strip() or f'exit {outcome.exit_code}'}"
        )
    if os.geteuid() == 0 and pids_cgroup_root() is None:
        logger.warning("running as root without a pids cgroup: sandboxed processes are not counted")
    return None


def _run_sandboxed(
    argv: list[str],
    workspace: Path,
    timeout: float,
    output_limit: int,
    network: bool,
    interruption: Callable[[], str | None] | None,
    writable: bool = True,
) -> Outcome:
    executable = shutil.which(settings.AGENT_SANDBOX_BWRAP) or settings.AGENT_SANDBOX_BWRAP
    cgroup = CallCgroup.create() if os.geteuid() == 0 else None
    options, fds = bwrap.options(workspace, network, writable=writable)
    info_r, info_w = os.pipe()
    block_r, block_w = os.pipe() if cgroup else (-1, -1)
    options += ["--info-fd", str(info_w)] + (["--block-fd", str(block_r)] if cgroup else [])
    args_fd = bwrap.memfd("bwrap-args", "".join(f"{option}\0" for option in options))
    child_fds = [args_fd, info_w, *fds] + ([block_r] if cgroup else [])
    started = time.monotonic()
    try:
        process = subprocess.Popen(
            [executable, "--args", str(args_fd), *bwrap.limited(argv)],
            env={},  # inside, /proc/1/environ is bwrap's own environment
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=child_fds,
            start_new_session=True,
        )
    except OSError as exc:
        _close(info_r, block_w, *child_fds)
        if cgroup:
            cgroup.remove()
        raise ToolError(f"Could not start bubblewrap: {exc}.") from exc
    _close(*child_fds)
    assert process.stdout is not None
    collector = OutputCollector(process.stdout, output_limit)
    tree = _Tree(process, cgroup, block_w)
    timed_out, interrupted = False, None
    try:
        tree.attach(_read_child_pid(info_r, started + START_SECONDS))
        if tree.pid1 is not None:
            timed_out, interrupted = _wait(process, started + timeout, interruption)
    finally:
        _close(info_r)
        tree.kill()
    collector.join(DRAIN_SECONDS)
    output = collector.text()
    if tree.pid1 is None:
        raise ToolError(f"The sandbox did not start: {output.strip() or f'bwrap exit {process.returncode}'}.")
    # bwrap reports a command killed by signal N as exit 128 + N, like a shell.
    code = process.returncode if process.returncode >= 0 else 128 - process.returncode
    died_of = code - 128 if 128 < code < 128 + signal.NSIG else None
    outcome = Outcome(code, output, time.monotonic() - started, died_of, timed_out, interrupted)
    outcome.notes = _limit_notes(outcome)
    return outcome


def _read_child_pid(fd: int, deadline: float) -> int | None:
    """The host pid of bwrap's init from --info-fd, or None when the sandbox failed before making it."""
    data = b""
    while (remaining := deadline - time.monotonic()) > 0:
        if not select.select([fd], [], [], remaining)[0]:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    try:
        return int(json.loads(data)["child-pid"])
    except (ValueError, KeyError, TypeError):
        return None


def _wait(
    process: subprocess.Popen[bytes], deadline: float, interruption: Callable[[], str | None] | None
) -> tuple[bool, str | None]:
    """(timed out, interruption reason) once the process ends, time is up or the run is interrupted.

    Waits on a pidfd, which wakes the moment the process exits (Popen.wait with a
    timeout sleeps in growing steps, adding up to 50 ms to a quick command).
    """
    poll = settings.AGENT_STOP_POLL_SECONDS if interruption else None
    pidfd = os.pidfd_open(process.pid)
    try:
        while (remaining := deadline - time.monotonic()) > 0:
            if select.select([pidfd], [], [], remaining if poll is None else min(poll, remaining))[0]:
                process.wait()
                return False, None
            reason = interruption() if interruption else None
            if reason:
                return False, reason
    finally:
        os.close(pidfd)
    return process.poll() is None, None


class _Tree:
    """The sandbox's processes: bwrap, its init (pid1) and, as root, the call's cgroup."""

    def __init__(self, process: subprocess.Popen[bytes], cgroup: CallCgroup | None, block_fd: int) -> None:
        self.process = process
        self.cgroup = cgroup
        self.block_fd = block_fd  # as root, bwrap waits on it until its init is in the cgroup
        self.pid1: int | None = None
        self._pidfd: int | None = None

    def attach(self, pid1: int | None) -> None:
        """Hold bwrap's init by a pidfd; as root, put it in the cgroup, then let it start the command."""
        self.pid1 = pid1
        if pid1 is None:
            return  # bwrap failed (or hangs) before making it: killed without ever starting the command
        try:
            self._pidfd = os.pidfd_open(pid1)
        except ProcessLookupError:
            pass  # already gone: the command ended at once
        if self.cgroup:
            self.cgroup.add(pid1)
            try:
                os.write(self.block_fd, b"\0")
            except BrokenPipeError:
                pass  # bwrap is gone already; waiting for it says how it ended

    def kill(self) -> None:
        """Kill init first: the kernel then kills its whole PID namespace before bwrap sees it die."""
        if self._pidfd is not None:
            try:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.close(self._pidfd)
            self._pidfd = None
        _kill_group(self.process.pid)
        self.process.wait()
        _close(self.block_fd)
        if self.cgroup:
            self.cgroup.remove()


# --- unconfined (AGENT_SANDBOX=off) ----------------------------------------------


def _run_unconfined(
    argv: list[str],
    workspace: Path,
    timeout: float,
    output_limit: int,
    interruption: Callable[[], str | None] | None,
) -> Outcome:
    """The command as the server's user, with a clean environment, in its own process group."""
    tmp = workspace / ".tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    env = bwrap.environment(workspace) | {
        "PATH": os.environ.get("PATH") or bwrap.SANDBOX_PATH,
        "TMPDIR": str(tmp),
    }
    executable = shutil.which(argv[0], path=env["PATH"]) or argv[0]
    started = time.monotonic()
    try:
        process = subprocess.Popen(
            [executable, *argv[1:]],
            cwd=workspace,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so the whole tree can be killed
        )
    except OSError as exc:
        raise ToolError(f"Could not start {argv[0]}: {exc}.") from exc
    assert process.stdout is not None
    collector = OutputCollector(process.stdout, output_limit)
    try:
        timed_out, interrupted = _wait(process, started + timeout, interruption)
    finally:
        _kill_group(process.pid)
        process.wait()
    collector.join(DRAIN_SECONDS)
    code = process.returncode
    died_of = -code if code < 0 else None
    exit_code = 128 + died_of if died_of else code
    return Outcome(exit_code, collector.text(), time.monotonic() - started, died_of, timed_out, interrupted)


# --- shared -------------------------------------------------------------------------


def _limit_notes(outcome: Outcome) -> list[str]:
    """Which sandbox limit the command probably ran into, in words the model can act on."""
    notes = []
    if outcome.signal == signal.SIGXCPU:
        notes.append(f"the CPU time limit of {settings.AGENT_SANDBOX_CPU_SECONDS} s per process was reached")
    if outcome.signal == signal.SIGXFSZ:
        notes.append(f"a file reached the size limit of {settings.AGENT_SANDBOX_FILE_MB} MB")
    if "Resource temporarily unavailable" in outcome.output:
        notes.append(
            f"a new process could not start: at most {settings.AGENT_SANDBOX_MAX_PROCESSES} may run at once"
        )
    if any(
        s in outcome.output for s in ("Cannot allocate memory", "MemoryError", "bad_alloc", "out of memory")
    ):
        notes.append(
            f"memory ran out: each process may use {settings.AGENT_SANDBOX_MEMORY_MB} MB of address space"
        )
    return notes


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the group is already gone


def _close(*fds: int) -> None:
    for fd in fds:
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass
