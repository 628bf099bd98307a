"""A running service for end-to-end tests and benchmarks: real daphne and real
`manage.py qcluster` processes on PostgreSQL + Redis, or on a SQLite file alone
(the embedded default), against the scripted model server of the test process."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import throwaway_pg  # noqa: E402

from bench.cluster_sampling import live_processes  # noqa: E402

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen[bytes], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with code {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on port {port} within {timeout} s")


def group_size(pgid: int) -> int:
    """Live processes in a process group (zombies left out)."""
    return sum(1 for _, fields in live_processes() if int(fields[2]) == pgid and fields[0] != "Z")


def kill_group(process: subprocess.Popen[bytes], sig: int = signal.SIGKILL) -> None:
    """Signal the process and everything it forked (it leads its own process group)."""
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass
    process.wait(timeout=10)


class Stack:
    """Databases, Redis, daphne and worker clusters; `stop()` ends everything it started."""

    def __init__(
        self,
        *,
        model_url: str,
        redis: bool,
        postgres: bool,
        workers: int = 2,
        cluster: bool = True,
        watch_server: bool = False,
        **env: str,
    ) -> None:
        """`watch_server`: as `manage.py serve` does, a second daphne (`watch_port`) where
        the portal's pages open their watch sockets (AGENT_WATCH_PORT)."""
        self.tmp = Path(tempfile.mkdtemp(prefix="agentsite-e2e-"))
        self.pg: Any = None
        self.redis: subprocess.Popen[bytes] | None = None
        self.daphne: subprocess.Popen[bytes] | None = None
        self.daphnes: list[subprocess.Popen[bytes]] = []  # further web servers (start_daphne)
        self.clusters: list[subprocess.Popen[bytes]] = []
        base = {
            k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "DATABASE_URL", "REDIS_URL"))
        }
        self.env = {
            **base,
            "PYTHONUNBUFFERED": "1",
            "AGENT_MODEL": "openai/scripted",
            "AGENT_UTILITY_MODEL": "openai/utility",
            "AGENT_API_BASE": model_url,
            "AGENT_API_KEY": "sk-test-not-a-secret",
            "AGENT_WORKSPACE_ROOT": str(self.tmp / "workspaces"),
            "AGENT_MEDIA_ROOT": str(self.tmp / "media"),
            "AGENT_WORKERS": str(workers),
            "AGENT_LLM_RETRIES": "0",
            "SQLITE_PATH": str(self.tmp / "db.sqlite3"),
            "LOG_LEVEL": "WARNING",
            **env,
        }
        try:
            if postgres:
                self.pg = throwaway_pg.start()
                self.env["DATABASE_URL"] = self.pg.url
            if redis:
                self.redis_port = free_port()
                self.start_redis()
                self.env["REDIS_URL"] = f"redis://127.0.0.1:{self.redis_port}/0"
            self.manage("migrate", "-v", "0")
            tokens = self.manage(
                "shell",
                "-c",
                "from django.contrib.auth.models import User; from rest_framework.authtoken.models import Token;"
                "u = User.objects.create_user('integrator', password='pw');"
                "e = User.objects.create_user('reviewer', password='pw-reviewer', is_staff=True);"
                "print(Token.objects.create(user=u).key, Token.objects.create(user=e).key)",
            ).split()[-2:]
            self.token, self.expert_token = tokens
            self.watch_port: int | None = free_port() if watch_server else None
            if self.watch_port:
                self.env["AGENT_WATCH_PORT"] = str(self.watch_port)
            self.daphne, self.port = self._start_daphne("daphne")
            if self.watch_port:
                self.daphnes.append(self._start_daphne("daphne-watch", self.watch_port)[0])
            if cluster:
                self.start_cluster()
        except BaseException:
            self.stop()
            raise

    # --- processes -------------------------------------------------------------

    def manage(self, *args: str) -> str:
        result = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if result.returncode:
            raise RuntimeError(f"manage.py {args[0]} failed:\n{result.stderr[-3000:]}")
        return result.stdout

    def _start_daphne(self, name: str, port: int | None = None) -> tuple[subprocess.Popen[bytes], int]:
        port = port or free_port()
        cmd = [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "agentsite.asgi:application",
        ]
        process = self._spawn(cmd, name)
        wait_for_port(port, process, name)
        return process, port

    def start_daphne(self) -> tuple[subprocess.Popen[bytes], int]:
        """Another web server on the same databases (a second machine's): its process and port."""
        process, port = self._start_daphne(f"daphne-{len(self.daphnes) + 1}")
        self.daphnes.append(process)
        return process, port

    def start_redis(self) -> None:
        """Start Redis (again, on the same port, empty: no persistence)."""
        self.redis = subprocess.Popen(
            [
                REDIS_SERVER,
                "--port",
                str(self.redis_port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            process_group=0,
        )
        wait_for_port(self.redis_port, self.redis, "redis-server")

    def stop_redis(self) -> None:
        """An outage: Redis ends (SIGKILL) and its port refuses connections until start_redis."""
        if self.redis is not None:
            kill_group(self.redis, signal.SIGKILL)

    def _spawn(self, cmd: list[str], name: str) -> subprocess.Popen[bytes]:
        with open(self.tmp / f"{name}.log", "ab") as log:  # the child keeps its own copy of the fd
            return subprocess.Popen(cmd, cwd=ROOT, env=self.env, stdout=log, stderr=log, process_group=0)

    def start_cluster(self, *, timeout: float = 240) -> subprocess.Popen[bytes]:
        """A `manage.py qcluster`, returned once it has forked all its processes.

        The parent imports what every run needs (traces/runhost.py:preload) before
        it forks; on a starved machine that has taken over 50 s, which a test's own
        timeouts should not have to absorb.
        """
        name = f"qcluster-{len(self.clusters)}"
        cluster = self._spawn([sys.executable, "manage.py", "qcluster"], name)
        self.clusters.append(cluster)
        # the parent, django-q2's sentinel, its monitor and pusher, and the workers
        # (4 unless set: the service's default, agentsite/settings/service.py)
        expected = 4 + int(self.env.get("AGENT_WORKERS", "4"))
        deadline = time.monotonic() + timeout
        while (count := group_size(cluster.pid)) < expected:
            if cluster.poll() is not None:
                raise RuntimeError(f"{name} exited with code {cluster.returncode}:\n{self.log(name)}")
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{name} had {count} of {expected} processes after {timeout:.0f} s:\n{self.log(name)}"
                )
            time.sleep(0.1)
        return cluster

    def kill_cluster(self, cluster: subprocess.Popen[bytes]) -> None:
        """kill -9 the whole cluster: guard, pusher, monitor and workers."""
        kill_group(cluster, signal.SIGKILL)

    def stop(self) -> None:
        for process in [*self.clusters, self.daphne, *self.daphnes]:
            if process is not None and process.poll() is None:
                kill_group(process, signal.SIGKILL)
        if self.redis is not None:
            kill_group(self.redis, signal.SIGKILL)
        if self.pg is not None:
            self.pg.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def log(self, name: str) -> str:
        path = self.tmp / f"{name}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    # --- HTTP and WebSocket ----------------------------------------------------

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def api(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        as_expert: bool = False,
        port: int | None = None,
    ) -> tuple[int, Any]:
        """A call as the integrator (the traces' owner), or as the staff expert; through
        the first daphne, or the one on `port`."""
        data = json.dumps(body).encode() if body is not None else None
        token = self.expert_token if as_expert else self.token
        request = urllib.request.Request(
            f"http://127.0.0.1:{port or self.port}/api{path}",
            data=data,
            method=method,
            headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")
        except TimeoutError as error:  # the stack's folder goes with it: say what the server logged
            said = f"; daphne's log ends:\n{self.log('daphne')[-1500:]}" if port in (None, self.port) else ""
            raise TimeoutError(f"{method} /api{path}: no answer in 10 s{said}") from error

    def watch_url(self, trace_id: str, since: int = 0, port: int | None = None) -> str:
        return f"ws://127.0.0.1:{port or self.port}/api/traces/{trace_id}/watch?since={since}"

    def watch(self, trace_id: str, since: int = 0, *, port: int | None = None) -> Any:
        from websockets.sync.client import connect

        return connect(
            self.watch_url(trace_id, since, port), additional_headers={"Authorization": f"Token {self.token}"}
        )

    def events(
        self, trace_id: str, since: int = 0, *, until: str = "final", timeout: float = 30
    ) -> Iterator[dict]:
        """Events of a trace over a real WebSocket, up to and including the first `until` event."""
        with self.watch(trace_id, since) as socket_:
            deadline = time.monotonic() + timeout
            while True:
                event = json.loads(socket_.recv(timeout=max(deadline - time.monotonic(), 0.01)))
                yield event
                if event["type"] == until:
                    return

    def wait_for(self, predicate: Any, timeout: float = 30, what: str = "condition") -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}")
