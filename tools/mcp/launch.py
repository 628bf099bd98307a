"""How a stdio server starts: under bubblewrap, like every process a tool starts (X1).

The server sees the run's workspace (read-only for a read-only project), /usr and
the paths its declaration binds read-only (where it is installed), nothing else of
the host; the network only when its declaration allows it; and an environment of
the sandbox's fixed variables plus the ones the operator declared for it, nothing
of the worker's. The SDK's stdio_client spawns a plain command, and bwrap reads its
options (some of them file descriptors of in-memory files) from descriptors the
SDK cannot hand over; so the command is `sandbox_exec.py`, which receives the
options in one environment variable (readable only by this user, like the memfds
of tools/sandbox), makes the descriptors and execs bwrap with an empty environment.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import TextIO

from django.conf import settings

from tools.mcp.config import ServerConfig
from tools.sandbox import bwrap

SPEC_VARIABLE = "AGENTSITE_MCP_SANDBOX"
EXEC_SCRIPT = Path(__file__).with_name("sandbox_exec.py")


def sandboxed_command(
    server: ServerConfig, workspace: Path, *, writable: bool
) -> tuple[str, list[str], dict[str, str]]:
    """(command, args, env) for the SDK's stdio_client to start `server` with."""
    argv = [server.command, *server.args]
    if not settings.AGENT_SANDBOX:  # the operator turned the sandbox off (a warning at start says so)
        return argv[0], argv[1:], dict(server.env)
    options, fds = bwrap.options(workspace, server.network, writable=writable)
    data = {}
    for fd in fds:  # the in-memory files (passwd, group, hosts), remade by sandbox_exec.py
        data[str(fd)] = os.pread(fd, 1 << 20, 0).decode()
        os.close(fd)
    options = [
        f"@fd:{o}" if previous == "--ro-bind-data" else o
        for previous, o in zip(["", *options], options, strict=False)
    ]
    cut = _index_of_remount(options)
    binds = [arg for path in server.read_only_paths for arg in ("--ro-bind", path, path)]
    options[cut:cut] = binds  # mount points first: the root is read-only after --remount-ro
    for name, value in server.env.items():
        options += ["--setenv", name, value]
    spec = {
        "bwrap": shutil.which(settings.AGENT_SANDBOX_BWRAP) or settings.AGENT_SANDBOX_BWRAP,
        "options": options,
        "data": {f"@fd:{fd}": text for fd, text in data.items()},
        "argv": bwrap.limited(argv),
    }
    return sys.executable, ["-I", str(EXEC_SCRIPT)], {SPEC_VARIABLE: json.dumps(spec)}


def _index_of_remount(options: list[str]) -> int:
    for index in range(len(options) - 1):
        if options[index : index + 2] == ["--remount-ro", "/"]:
            return index
    return len(options)


def server_log() -> TextIO:
    """Where a stdio server's stderr goes: the worker's own (its log)."""
    return sys.stderr
