"""Run the service on one machine: the daphne ASGI server (on PostgreSQL a second one for
the portal's watch sockets) and a django-q2 worker cluster."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from traces.management.commands.ensure_expert import DEFAULT_USERNAME

# How long children get to finish after Ctrl-C/SIGTERM before they are killed; a run
# cut short here is picked up again through its lease.
GRACE_SECONDS = 10.0
POLL_SECONDS = 0.2


class Command(BaseCommand):
    help = (
        "Start daphne (on PostgreSQL a second one for the watch sockets) and the django-q2 worker "
        "cluster; Ctrl-C stops all."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--watch-port",
            type=int,
            default=None,
            help="a second daphne for the portal's watch sockets (default: --port + 1 on PostgreSQL, "
            "none on SQLite; 0: none, the sockets on the first)",
        )
        parser.add_argument("--workers", type=int, default=None, help="worker processes (AGENT_WORKERS)")

    def handle(
        self, *args: Any, host: str, port: int, watch_port: int | None, workers: int | None, **options: Any
    ) -> None:
        env = dict(os.environ)
        if workers is not None:
            if workers < 1:
                raise CommandError("--workers must be at least 1")
            env["AGENT_WORKERS"] = str(workers)
        if watch_port is None:
            watch_port = port + 1 if default_watch_server() else 0
        if not 0 < port < 65536 or not 0 <= watch_port < 65536 or watch_port == port:
            raise CommandError("--port wants 1-65535 and --watch-port 0-65535, not the same port")
        for what, number in (("--port", port), ("--watch-port", watch_port)):
            if number and not port_free(host, number):
                hint = " (or --watch-port 0: the watch sockets on --port)" if what == "--watch-port" else ""
                raise CommandError(f"{what} {number} is in use on {host}: pick another{hint}.")
        commands = {
            "daphne": daphne(host, port),
            "qcluster": [sys.executable, "manage.py", "qcluster"],
        }
        if watch_port:
            # Live events from an interpreter that serves no API requests: under a burst of
            # starts they reach the portal sooner (README, Live events). Any daphne serves
            # every path; this one is where the portal's pages send their watch sockets.
            commands["daphne (watch sockets)"] = daphne(host, watch_port)
        env["AGENT_WATCH_PORT"] = str(watch_port)  # 0: the pages' own server, whatever the shell had
        self._announce(host, port, watch_port)
        code = supervise(commands, env=env, warn=self.stderr.write)
        if code:
            raise SystemExit(code)

    def _announce(self, host: str, port: int, watch_port: int) -> None:
        base = f"http://{host}:{port}"
        self.stdout.write(
            f"agentsite at {base}/ — log in as '{DEFAULT_USERNAME}' (the admin is at {base}/admin/)."
        )
        if watch_port:
            self.stdout.write(
                f"Watch sockets (live events) at ws://{host}:{watch_port}/api/traces/<id>/watch."
            )
        if settings.AGENT_MODEL:
            self.stdout.write(f"AGENT_MODEL = {settings.AGENT_MODEL}")
        else:
            self.stdout.write(
                "No model configured (AGENT_MODEL is empty): the portal works, but runs fail fast "
                "until AGENT_MODEL is set."
            )
        self.stdout.write("Press Ctrl-C to stop.")


def default_watch_server() -> bool:
    """Whether `serve` runs the watch sockets' daphne unless told: on PostgreSQL, where it
    kept a 64-run burst's live events under 100 ms (p99) in 6 of 6 alternated bursts
    against 1 of 6; not on SQLite, where the wait is the one writer's and it did not help
    (README, Live events)."""
    return connection.vendor == "postgresql"


def daphne(host: str, port: int) -> list[str]:
    return [sys.executable, "-m", "daphne", "-b", host, "-p", str(port), "agentsite.asgi:application"]


def port_free(host: str, port: int) -> bool:
    """Whether a server could listen on host:port now (daphne sets SO_REUSEADDR too)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def supervise(commands: dict[str, list[str]], *, env: dict[str, str], warn: Callable[[str], Any]) -> int:
    """Run the commands until a stop signal or a child's exit, then stop the rest; return the exit code."""
    received: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        received.append(signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    # Each child leads its own process group, so a terminal's Ctrl-C reaches them once,
    # through us, and a stuck child can be killed with everything it forked.
    children = {
        name: subprocess.Popen(cmd, cwd=settings.BASE_DIR, env=env, process_group=0)
        for name, cmd in commands.items()
    }
    try:
        while not received:
            dead = {name: child.returncode for name, child in children.items() if child.poll() is not None}
            if dead:
                for name, returncode in dead.items():
                    warn(f"{name} exited unexpectedly (exit code {returncode}); stopping the rest.")
                _stop(children, received)
                return 1
            time.sleep(POLL_SECONDS)
        _stop(children, received)
        return 0
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _stop(children: dict[str, subprocess.Popen[bytes]], received: list[int]) -> None:
    """Ask the running children to stop, wait out the grace period, then kill what remains."""
    asked = len(received)
    for child in children.values():
        if child.poll() is None:
            # SIGTERM, not SIGINT: a child started from a background shell ignores SIGINT.
            child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + GRACE_SECONDS
    # A second Ctrl-C skips the grace period.
    while time.monotonic() < deadline and len(received) <= asked:
        if all(child.poll() is not None for child in children.values()):
            break
        time.sleep(POLL_SECONDS)
    for child in children.values():
        try:
            os.killpg(child.pid, signal.SIGKILL)  # also reaps what the child forked
        except ProcessLookupError:
            pass
        child.wait()
