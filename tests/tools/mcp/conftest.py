"""MCP test servers (our counter_server.py, npm's server-everything) declared the way operators do."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.tools.conftest import host_processes
from tests.traces.conftest import (  # noqa: F401
    api_client,
    expert,
    inline_worker,
    integrator,
    runner,
    workspace_root,
)
from tools.mcp.selectors import forget_servers
from tools.mcp.sessions import sessions

REPO = Path(__file__).resolve().parents[3]
NPM_DIR = REPO / ".cache" / "mcp-npm"  # scripts/install_system_packages.sh installs it
EVERYTHING = NPM_DIR / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
COUNTER = Path(__file__).with_name("counter_server.py")
# What a sandboxed `python counter_server.py` needs to see: the venv, the interpreter, the script.
PYTHON_PATHS = sorted(
    {sys.prefix, sys.base_prefix, str(Path(os.path.realpath(sys.executable)).parents[1]), str(COUNTER.parent)}
)


def counter_stdio(name: str = "counter", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "transport": "stdio",
        "command": sys.executable,
        "args": [str(COUNTER)],
        "read_only_paths": PYTHON_PATHS,
        **extra,
    }


def everything_stdio(name: str = "everything", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "transport": "stdio",
        "command": "node",
        "args": [str(EVERYTHING), "stdio"],
        "read_only_paths": [str(NPM_DIR)],
        **extra,
    }


@pytest.fixture
def declare(tmp_path: Path, settings: Any) -> Iterator[Callable[..., Path]]:
    """`declare(server, ...)`: write the operator's servers file and point AGENT_MCP_SERVERS_FILE at it."""
    path = tmp_path / "mcp-servers.json"

    def write(*servers: dict[str, Any]) -> Path:
        path.write_text(json.dumps({"servers": list(servers)}))
        settings.AGENT_MCP_SERVERS_FILE = str(path)
        forget_servers()
        return path

    sessions.forget_listings()
    yield write
    forget_servers()
    sessions.forget_listings()


@pytest.fixture
def everything() -> Path:
    """The npm reference server, installed by scripts/install_system_packages.sh; CI must have it."""
    if not EVERYTHING.exists():
        message = f"{EVERYTHING} is missing: run scripts/install_system_packages.sh (npm install into .cache/mcp-npm)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return EVERYTHING


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class HttpServer:
    """A server process on 127.0.0.1:port, started (and restarted) by the test."""

    def __init__(self, argv: list[str], port: int, env: dict[str, str] | None = None) -> None:
        self.argv, self.port, self.env = argv, port, env
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> HttpServer:
        env = {**os.environ, "PORT": str(self.port), **(self.env or {})}
        self.process = subprocess.Popen(
            self.argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"{self.argv} did not listen on {self.port}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)


@pytest.fixture
def http_server() -> Iterator[Callable[[list[str]], HttpServer]]:
    started: list[HttpServer] = []

    def start(argv: list[str]) -> HttpServer:
        server = HttpServer(argv, free_port()).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def kill_processes(marker: str) -> int:
    """SIGKILL every host process whose command line holds `marker`; how many."""
    pids = host_processes(marker)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(pids)
