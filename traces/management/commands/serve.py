"""Run the service on one machine: the daphne ASGI server and a django-q2 worker cluster."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from traces.management.commands.ensure_expert import DEFAULT_USERNAME

# How long children get to finish after Ctrl-C/SIGTERM before they are killed; a run
# cut short here is picked up again through its lease.
GRACE_SECONDS = 10.0
POLL_SECONDS = 0.2


class Command(BaseCommand):
    help = "Start the daphne ASGI server and the django-q2 worker cluster; Ctrl-C stops both."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--workers", type=int, default=None, help="worker processes (AGENT_WORKERS)")

    def handle(self, *args: Any, host: str, port: int, workers: int | None, **options: Any) -> None:
        env = dict(os.environ)
        if workers is not None:
            if workers < 1:
                raise CommandError("--workers must be at least 1")
            env["AGENT_WORKERS"] = str(workers)
        commands = {
            "daphne": [
                sys.executable,
                "-m",
                "daphne",
                "-b",
                host,
                "-p",
                str(port),
                "agentsite.asgi:application",
            ],
            "qcluster": [sys.executable, "manage.py", "qcluster"],
        }
        self._announce(host, port)
        code = supervise(commands, env=env, warn=self.stderr.write)
        if code:
            raise SystemExit(code)

    def _announce(self, host: str, port: int) -> None:
        base = f"http://{host}:{port}"
        self.stdout.write(
            f"agentsite at {base}/ — log in as '{DEFAULT_USERNAME}' (the admin is at {base}/admin/)."
        )
        if settings.AGENT_MODEL:
            self.stdout.write(f"AGENT_MODEL = {settings.AGENT_MODEL}")
        else:
            self.stdout.write(
                "No model configured (AGENT_MODEL is empty): the portal works, but runs fail fast "
                "until AGENT_MODEL is set."
            )
        self.stdout.write("Press Ctrl-C to stop.")


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
