"""The sandbox around every command a tool runs (X1), exercised through the real bubblewrap."""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
from django.apps import apps
from django.conf import settings as django_settings

from tests.factories import make_trace, make_user
from tests.tools.conftest import RunTool, host_processes, wait_until_gone
from tools import sandbox
from tools.checks import sandbox_status
from tools.registry import default_registry
from traces.models import Trace, TraceStatus
from traces.runner.tool_api import ToolContext

pytestmark = pytest.mark.usefixtures("sandboxed")


@pytest.fixture
def loopback_server() -> Iterator[int]:
    """A TCP server on the host's 127.0.0.1 accepting connections; yields its port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server.getsockname()[1]
    server.close()


def bash_output(run_tool: RunTool, command: str, **arguments: object) -> str:
    result = run_tool("bash", {"command": command, **arguments})
    return result.output


# --- what a command can see ---------------------------------------------------------


def test_no_secret_of_the_server_reaches_the_command(
    run_tool: RunTool, monkeypatch: pytest.MonkeyPatch, outside: Path
) -> None:
    canary = f"canary-{secrets.token_hex(8)}"
    monkeypatch.setenv("AGENT_API_KEY", canary)
    (outside / "db.sqlite3").write_text(canary)
    project = django_settings.BASE_DIR

    output = bash_output(
        run_tool,
        "env; cat /proc/self/environ; cat /proc/1/environ; cat /proc/$PPID/environ; cat /proc/1/cmdline; "
        f"cat {outside}/db.sqlite3; cat {project}/db.sqlite3; ls {project}; ls {project}/..",
    )

    assert canary not in output
    assert "manage.py" not in output
    assert f"{outside}/db.sqlite3: No such file or directory" in output
    assert f"ls: cannot access '{project}': No such file or directory" in output


def test_only_the_allowed_variables_are_copied_in(
    run_tool: RunTool, monkeypatch: pytest.MonkeyPatch, settings
) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", "https://pypi.internal/simple")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-allowed")
    settings.AGENT_SANDBOX_ENV = ["PIP_INDEX_URL", "NOT_SET_ANYWHERE"]

    output = bash_output(run_tool, "env; cat /proc/1/cmdline")

    assert "PIP_INDEX_URL=https://pypi.internal/simple" in output.splitlines()
    assert output.count("pypi.internal") == 1  # in the environment, not on bwrap's command line
    assert "sk-not-allowed" not in output
    assert "NOT_SET_ANYWHERE" not in output


def test_the_command_sees_only_its_own_processes(run_tool: RunTool) -> None:
    output = bash_output(run_tool, "ls /proc | grep -c '^[0-9]'; cat /proc/1/comm")

    count, init = output.split()
    assert int(count) <= 4  # bwrap's init, prlimit's bash, ls and grep
    assert init == "bwrap"


def test_etc_holds_only_a_few_system_files(run_tool: RunTool) -> None:
    output = bash_output(run_tool, "ls -A /etc; echo; ls -A /; echo; cat /etc/hosts; id -un")

    listing, root, hosts = output.split("\n\n", 2)
    assert set(listing.split()) <= {
        "alternatives",
        "group",
        "hosts",
        "ld.so.cache",
        "ld.so.conf",
        "ld.so.conf.d",
        "localtime",
        "nsswitch.conf",
        "passwd",
    }
    assert "shadow" not in listing
    assert not {"home", "root", "work", "var", "srv", "opt", "mnt", "run", "sys"} & set(root.split())
    assert "localhost" in hosts


# --- what a command can change ---------------------------------------------------------


def test_writing_outside_the_workspace_fails(run_tool: RunTool, workspace: Path, outside: Path) -> None:
    output = bash_output(
        run_tool,
        f"touch {outside}/planted; echo x > /usr/planted; echo x > /etc/planted; echo x > /planted; "
        "echo 60 > /proc/sys/vm/swappiness; touch inside && echo inside-ok",
    )

    assert not (outside / "planted").exists()
    assert not Path("/usr/planted").exists()
    assert output.count("Read-only file system") >= 4
    assert "inside-ok" in output
    assert (workspace / "inside").exists()


def test_tmp_is_private_and_size_capped(run_tool: RunTool, settings) -> None:
    settings.AGENT_SANDBOX_FILE_MB = 2
    marker = f"private-{secrets.token_hex(4)}"

    output = bash_output(run_tool, f"touch /tmp/{marker}; head -c 3M /dev/zero > /tmp/fill; ls /tmp")

    assert not Path("/tmp", marker).exists()
    assert "No space left on device" in output or "File size limit" in output or "[a file reached" in output


# --- network ---------------------------------------------------------------------------


def test_no_network_by_default(run_tool: RunTool, loopback_server: int) -> None:
    output = bash_output(run_tool, f"exec 3<>/dev/tcp/127.0.0.1/{loopback_server} && echo CONNECTED-OK")

    assert "CONNECTED-OK" not in output
    assert "Connection refused" in output


def test_network_when_the_server_allows_it(run_tool: RunTool, loopback_server: int, settings) -> None:
    settings.AGENT_SANDBOX_NETWORK = True

    output = bash_output(run_tool, f"exec 3<>/dev/tcp/127.0.0.1/{loopback_server} && echo CONNECTED-OK")

    assert "CONNECTED-OK" in output


def test_a_call_can_allow_the_network_itself(workspace: Path, loopback_server: int) -> None:
    command = ["bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{loopback_server} && echo CONNECTED-OK"]

    allowed = sandbox.run(command, workspace=workspace, timeout=10, output_limit=1000, network=True)
    refused = sandbox.run(command, workspace=workspace, timeout=10, output_limit=1000, network=False)

    assert allowed.output == "CONNECTED-OK\n"
    assert "CONNECTED-OK" not in refused.output


# --- nothing survives ---------------------------------------------------------------------


def test_background_processes_are_gone_when_the_call_returns(run_tool: RunTool) -> None:
    marker = f"loop-{secrets.token_hex(4)}"

    output = bash_output(
        run_tool,
        f"sleep 61.2345 > /dev/null 2>&1 & bash -c 'while :; do sleep 0.1; done' {marker} > /dev/null 2>&1 & "
        "disown -a; echo started",
    )

    assert output == "started\n"
    assert host_processes("61.2345") == []
    assert host_processes(marker) == []


WORKER = """
import os, sys
from pathlib import Path
import django
django.setup()
from tools import sandbox
sandbox.run(
    ["bash", "-c", "sleep 62.7183 > /dev/null 2>&1 & touch started; sleep 63.7183"],
    workspace=Path(sys.argv[1]), timeout=60, output_limit=1000,
)
"""


def test_sandboxed_processes_die_with_a_killed_worker(workspace: Path) -> None:
    env = os.environ | {
        "DJANGO_SETTINGS_MODULE": "agentsite.settings",
        "PYTHONPATH": str(django_settings.BASE_DIR),
    }
    worker = subprocess.Popen([sys.executable, "-c", WORKER, str(workspace)], env=env)
    try:
        deadline = time.monotonic() + 30
        while not (workspace / "started").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (workspace / "started").exists()
        assert host_processes("62.7183") and host_processes("63.7183")

        worker.send_signal(signal.SIGKILL)
        worker.wait()

        assert wait_until_gone("62.7183") == []
        assert wait_until_gone("63.7183") == []
    finally:
        worker.kill()
        worker.wait()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("change", "reason"),
    [({"stop_requested": True}, "the run was asked to stop"), ({"run_token": 8}, "the run lost its lease")],
)
def test_a_stopped_or_lost_run_kills_its_command(workspace: Path, change: dict, reason: str) -> None:
    trace = make_trace(make_user("expert"), status=TraceStatus.RUNNING, run_token=7)
    ctx = ToolContext(trace=trace, workspace=workspace)
    assert ctx.interruption() is None

    def interrupt() -> None:
        time.sleep(0.5)
        Trace.objects.filter(pk=trace.pk).update(**change)

    thread = threading.Thread(target=interrupt)
    thread.start()
    started = time.monotonic()
    result = default_registry.execute("bash", {"command": "sleep 20.8642; echo finished"}, ctx)
    thread.join()

    assert time.monotonic() - started < 5
    assert result.is_error
    assert reason in result.title
    assert "finished" not in result.output
    assert host_processes("20.8642") == []


# --- limits ---------------------------------------------------------------------------------


def test_a_fork_bomb_is_bounded(run_tool: RunTool, settings) -> None:
    settings.AGENT_SANDBOX_MAX_PROCESSES = 32
    marker = f"bomb-{secrets.token_hex(4)}"
    peak = 0
    done = threading.Event()

    def watch() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, len(host_processes(marker)))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    started = time.monotonic()
    try:
        result = run_tool("bash", {"command": f":(){{ :|:& }};: ; sleep 3 # {marker}", "timeout": 6})
    finally:
        done.set()
        watcher.join()

    assert time.monotonic() - started < 12
    assert 0 < peak <= 32 + 1  # bwrap itself carries the marker too, outside the count
    assert "[a new process could not start: at most 32 may run at once]" in result.output
    assert (
        result.is_error
        or result.metadata["exit_code"] != 0
        or "Resource temporarily unavailable" in result.output
    )
    assert wait_until_gone(marker) == []


def test_writing_a_huge_file_stops_at_the_file_size_limit(
    run_tool: RunTool, workspace: Path, settings
) -> None:
    settings.AGENT_SANDBOX_FILE_MB = 4

    result = run_tool("bash", {"command": "head -c 10G /dev/zero > big"})

    assert result.title == "$ head -c 10G /dev/zero > big (killed by signal 25, SIGXFSZ)"
    assert "[a file reached the size limit of 4 MB]" in result.output
    assert (workspace / "big").stat().st_size <= 4 * 1024 * 1024


def test_cpu_time_is_limited(run_tool: RunTool, settings) -> None:
    settings.AGENT_SANDBOX_CPU_SECONDS = 1

    result = run_tool("bash", {"command": "while :; do :; done", "timeout": 20})

    assert result.title.endswith("(killed by signal 24, SIGXCPU)")
    assert "[the CPU time limit of 1 s per process was reached]" in result.output


def test_memory_is_limited(run_tool: RunTool, settings) -> None:
    settings.AGENT_SANDBOX_MEMORY_MB = 256

    result = run_tool("bash", {"command": "python3 -c 'b = bytearray(512 * 1024 * 1024)'"})

    assert result.metadata["exit_code"] == 1
    assert "MemoryError" in result.output
    assert "[memory ran out: each process may use 256 MB of address space]" in result.output


NOBODY = 65534


@pytest.mark.skipif(os.geteuid() != 0, reason="as a non-root user the tests above already run this path")
def test_an_unprivileged_server_bounds_processes_per_sandbox(
    monkeypatch: pytest.MonkeyPatch, settings
) -> None:
    """The recommended deployment, simulated from a root test run: bwrap runs as uid 65534.

    There is no cgroup then: RLIMIT_NPROC, set inside the sandbox's user namespace,
    is counted per namespace, so other processes of the same uid do not use it up.
    """
    settings.AGENT_SANDBOX_MAX_PROCESSES = 32
    workspace = Path(tempfile.mkdtemp(dir="/tmp", prefix="agentsite-nobody-"))  # reachable by uid 65534
    os.chown(workspace, NOBODY, NOBODY)
    spawn_as_nobody = partial(subprocess.Popen, user=NOBODY, group=NOBODY, extra_groups=[])
    others = [spawn_as_nobody(["sleep", "30.9753"]) for _ in range(40)]
    for name in ("geteuid", "getuid", "getgid"):
        monkeypatch.setattr(os, name, lambda: NOBODY)
    monkeypatch.setattr(subprocess, "Popen", spawn_as_nobody)
    monkeypatch.setattr(sandbox, "_probe", lambda executable: None)  # its temporary directory would be root's
    try:
        assert sandbox.process_limit() == "rlimit"
        many = sandbox.run(
            ["bash", "-c", "id -u; for i in $(seq 20); do sleep 2.1 & done; jobs -p | wc -l"],
            workspace=workspace,
            timeout=10,
            output_limit=1000,
        )
        bomb = sandbox.run(
            ["bash", "-c", ":(){ :|:& };: ; sleep 2; echo done"],
            workspace=workspace,
            timeout=6,
            output_limit=1000,
        )
    finally:
        monkeypatch.undo()
        for process in others:
            process.kill()
            process.wait()
        shutil.rmtree(workspace)

    assert many.output.split() == [str(NOBODY), "20"]
    assert "a new process could not start: at most 32 may run at once" in bomb.notes


# --- without a sandbox ----------------------------------------------------------------------


def test_bash_is_unavailable_without_bubblewrap(run_tool: RunTool, settings) -> None:
    settings.AGENT_SANDBOX_BWRAP = "/nonexistent/bwrap"

    assert "bash" not in {t.name for t in default_registry.select()}
    with pytest.raises(ValueError, match=r"tool bash is not available on this server: bubblewrap"):
        default_registry.check_requested(["bash", "read"])
    result = run_tool("bash", {"command": "echo hi"})
    assert result.is_error
    assert "The sandbox is not available on this server" in result.output
    [warning] = sandbox_status()
    assert warning.id == "tools.W002"


def test_a_bwrap_that_cannot_sandbox_makes_bash_unavailable(settings) -> None:
    settings.AGENT_SANDBOX_BWRAP = "/bin/false"

    reason = sandbox.unavailable_reason()

    assert reason is not None
    assert "did not start" in reason


def test_sandbox_off_runs_unconfined_with_a_warning(
    run_tool: RunTool, outside: Path, settings, caplog: pytest.LogCaptureFixture
) -> None:
    settings.AGENT_SANDBOX = False
    settings.AGENT_SANDBOX_BWRAP = "/nonexistent/bwrap"

    result = run_tool("bash", {"command": f"cat {outside}/secret.txt"})
    [warning] = sandbox_status()
    with caplog.at_level(logging.WARNING, logger="tools.apps"):
        apps.get_app_config("tools").ready()

    assert result.output == "top secret\n"
    assert "bash" in {t.name for t in default_registry.select()}
    assert warning.id == "tools.W001"
    assert "unsafe" in warning.msg
    assert "AGENT_SANDBOX=off" in caplog.text


def test_the_sandbox_passes_its_system_check() -> None:
    assert sandbox_status() == []
