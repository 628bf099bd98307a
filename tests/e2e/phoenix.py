"""Arize Phoenix as a real OTLP receiver for the end-to-end OpenTelemetry test (issue 22).

`scripts/install_phoenix.sh` puts the pinned `arize-phoenix` into its own virtualenv,
.cache/phoenix-venv (its dependencies stay out of the app's .venv); scripts/test runs it
before pytest, and `Phoenix.start` runs it again (a no-op once installed) so a single
test run on a fresh checkout needs no manual step. Phoenix serves OTLP/HTTP on
`/v1/traces` and its REST API (`/v1/projects/{name}/spans`) on one loopback port, with
its SQLite database and files in a temporary working directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from tests.e2e.stack import ROOT, free_port, kill_group, wait_for_port

VENV = ROOT / ".cache" / "phoenix-venv"
INSTALL = ROOT / "scripts" / "install_phoenix.sh"
STARTUP_TIMEOUT = 300  # s: imports and migrations take 20-30 s on an idle 2-core machine, 90+ s under load


class PhoenixUnavailable(RuntimeError):
    """Phoenix could not be installed (no python3 venv support or no PyPI)."""


def install() -> Path:
    """The Phoenix executable, installing the pinned release first if needed."""
    result = subprocess.run(["bash", str(INSTALL)], capture_output=True, text=True, timeout=1200)
    if result.returncode:
        raise PhoenixUnavailable(f"{INSTALL.name} failed:\n{result.stdout[-1500:]}{result.stderr[-1500:]}")
    return VENV / "bin" / "phoenix"


class Phoenix:
    """A `phoenix serve` process on free loopback ports, started without waiting (its start-up
    overlaps the caller's); `wait_ready()` waits for it; `stop()` ends it and removes its files."""

    def __init__(self, executable: Path) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="agentsite-phoenix-"))
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PHOENIX_"))}
        env.update(
            HOME=str(self.dir),
            PHOENIX_WORKING_DIR=str(self.dir),
            PHOENIX_HOST="127.0.0.1",
            PHOENIX_PORT=str(self.port),
            PHOENIX_GRPC_PORT=str(free_port()),  # Phoenix always opens its OTLP/gRPC port too
            PHOENIX_TELEMETRY_ENABLED="false",
            PHOENIX_ALLOW_EXTERNAL_RESOURCES="false",  # no downloads (its WASM sandbox, fonts)
        )
        self.started = time.monotonic()
        with open(self.dir / "phoenix.log", "ab") as log:
            self.process = subprocess.Popen(
                [str(executable), "serve"], cwd=self.dir, env=env, stdout=log, stderr=log, process_group=0
            )
        self.startup_seconds = 0.0

    def wait_ready(self) -> None:
        """Wait until Phoenix answers its health check (then `startup_seconds` is set)."""
        try:
            wait_for_port(self.port, self.process, "phoenix serve", timeout=STARTUP_TIMEOUT)
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - self.started

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _wait_healthy(self) -> None:
        deadline = self.started + STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/healthz", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"Phoenix was not healthy within {STARTUP_TIMEOUT} s:\n{self.log()}")

    def spans(self, project: str, **filters: str) -> list[dict[str, Any]]:
        """Every span Phoenix stored for `project`, read through its REST API (oldest first)."""
        found: list[dict[str, Any]] = []
        cursor = None
        while True:
            query = {"limit": "1000", "order": "asc", **filters, **({"cursor": cursor} if cursor else {})}
            url = (
                f"{self.url}/v1/projects/{urllib.parse.quote(project)}/spans?{urllib.parse.urlencode(query)}"
            )
            try:
                with urllib.request.urlopen(url, timeout=10) as response:
                    body = json.loads(response.read())
            except urllib.error.HTTPError as error:
                if error.code == 404:  # no span of the project has arrived yet
                    return []
                raise
            found.extend(body["data"])
            cursor = body.get("next_cursor")
            if not cursor:
                return found

    def log(self) -> str:
        path = self.dir / "phoenix.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def stop(self) -> None:
        if self.process.poll() is None:
            kill_group(self.process)
        shutil.rmtree(self.dir, ignore_errors=True)
