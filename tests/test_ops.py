"""Operations: the expert account, the throwaway PostgreSQL helper, and `manage.py serve`."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from io import StringIO
from pathlib import Path
from types import ModuleType

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from traces.management.commands import serve as serve_command

BASE_DIR = Path(settings.BASE_DIR)


def _load_throwaway_pg() -> ModuleType:
    path = BASE_DIR / "scripts" / "throwaway_pg.py"
    spec = importlib.util.spec_from_file_location("throwaway_pg", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("throwaway_pg", module)
    spec.loader.exec_module(module)
    return module


throwaway_pg = _load_throwaway_pg()


# --- ensure_expert ----------------------------------------------------------------


@pytest.mark.django_db
def test_ensure_expert_creates_staff_superuser_once_and_keeps_its_password(tmp_path, monkeypatch):
    monkeypatch.delenv("EXPERT_PASSWORD", raising=False)
    password_file = tmp_path / "cache" / "expert_password"

    first = StringIO()
    call_command("ensure_expert", password_file=password_file, stdout=first)
    password = password_file.read_text().strip()
    second = StringIO()
    call_command("ensure_expert", password_file=password_file, stdout=second)

    expert = get_user_model().objects.get(username="expert")
    assert expert.is_staff and expert.is_superuser and expert.is_active
    assert expert.check_password(password)
    assert get_user_model().objects.filter(username="expert").count() == 1
    assert password_file.stat().st_mode & 0o777 == 0o600
    assert password in first.getvalue()
    assert password not in second.getvalue()
    assert password_file.read_text().strip() == password


@pytest.mark.django_db
def test_ensure_expert_takes_password_from_environment_without_writing_it(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPERT_PASSWORD", "from-the-environment-42")
    password_file = tmp_path / "expert_password"

    out = StringIO()
    call_command("ensure_expert", password_file=password_file, stdout=out)

    assert get_user_model().objects.get(username="expert").check_password("from-the-environment-42")
    assert not password_file.exists()
    assert "from-the-environment-42" not in out.getvalue()


# --- throwaway PostgreSQL ---------------------------------------------------------------


def test_throwaway_pg_reports_missing_server_binaries_clearly(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(throwaway_pg, "candidate_bindirs", lambda: [tmp_path])

    with pytest.raises(throwaway_pg.PostgresNotFound) as excinfo:
        throwaway_pg.find_bindir()
    assert str(tmp_path) in str(excinfo.value)
    assert "postgresql-15" in str(excinfo.value)

    assert throwaway_pg.main(["--", "true"]) == 2
    assert "No PostgreSQL server binaries" in capsys.readouterr().err


def _bindir_or_skip() -> Path:
    try:
        return throwaway_pg.find_bindir()
    except throwaway_pg.PostgresNotFound as exc:
        pytest.skip(str(exc))


def test_throwaway_pg_locates_server_binaries():
    bindir = _bindir_or_skip()

    for name in ("initdb", "pg_ctl", "postgres"):
        assert os.access(bindir / name, os.X_OK)


def test_throwaway_pg_serves_a_database_whose_user_may_create_databases():
    _bindir_or_skip()
    import psycopg

    with throwaway_pg.start(dbname="ops_check") as pg:
        assert pg.url.startswith("postgres://postgres@127.0.0.1:")
        with psycopg.connect(pg.url) as conn:
            row = conn.execute(
                "SELECT current_database(), rolsuper OR rolcreatedb FROM pg_roles WHERE rolname = current_user"
            ).fetchone()
        assert row == ("ops_check", True)
        root = pg.root
    assert not root.exists()


# --- manage.py serve ---------------------------------------------------------------------


def _proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, pgrp) of a process, or None once it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = raw.rsplit(")", 1)[1].split()
    return fields[0], int(fields[1]), int(fields[2])


def _live_pids(*, ppid: int | None = None, pgrp: int | None = None) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        stat = _proc_stat(int(entry.name))
        if stat is None or stat[0] == "Z":
            continue
        if (ppid is None or stat[1] == ppid) and (pgrp is None or stat[2] == pgrp):
            pids.append(int(entry.name))
    return pids


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except FileNotFoundError:
        return ""


def _wait_until(predicate, *, timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}; serve log:\n{log.read_text()}")


def _login_page_answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/admin/login/", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


SERVE_NICE = 7  # not the default: the test sees the setting, not a coincidence


@pytest.fixture
def serve_process(tmp_path):
    """Start `manage.py serve` on a migrated temporary SQLite database; yields (process,
    its children, log, the watch sockets' port)."""
    if not Path("/proc/self/stat").exists():
        pytest.skip("needs /proc to find the child processes")
    env = {**os.environ, "SQLITE_PATH": str(tmp_path / "db.sqlite3"), "PYTHONUNBUFFERED": "1"}
    for name in ("DATABASE_URL", "REDIS_URL", "AGENT_MODEL"):
        env.pop(name, None)
    env["AGENT_WORKER_NICE"] = str(SERVE_NICE)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v0"],
        cwd=BASE_DIR,
        env=env,
        check=True,
        timeout=120,
    )
    port, watch_port = throwaway_pg.free_port(), throwaway_pg.free_port()
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        serve = subprocess.Popen(
            [
                sys.executable,
                "manage.py",
                "serve",
                "--port",
                str(port),
                "--watch-port",
                str(watch_port),
                "--workers",
                "1",
            ],
            cwd=BASE_DIR,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    children: list[int] = []
    try:
        _wait_until(lambda: _login_page_answers(port), timeout=90, what="GET /admin/login/ = 200", log=log)
        _wait_until(lambda: _login_page_answers(watch_port), timeout=90, what="the watch daphne", log=log)
        children = _live_pids(ppid=serve.pid)
        yield serve, children, log, watch_port
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
        for pgid in children:  # each child leads its own process group
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _child_named(children: list[int], word: str) -> int:
    matches = [pid for pid in children if word in _cmdline(pid)]
    assert matches, f"no {word} child among {[_cmdline(pid) for pid in children]}"
    return matches[0]


@pytest.mark.e2e
def test_serve_runs_daphne_and_qcluster_and_ctrl_c_stops_both(serve_process):
    serve, children, log, watch_port = serve_process
    daphne = _child_named(children, "daphne")
    qcluster = _child_named(children, "qcluster")
    # a second daphne for the watch sockets, and the portal's pages are told where it is
    watching = [pid for pid in children if f"-p {watch_port} " in _cmdline(pid)]
    assert len(watching) == 1 and "daphne" in _cmdline(watching[0])
    assert f"AGENT_WATCH_PORT={watch_port}".encode() in Path(f"/proc/{daphne}/environ").read_bytes()
    _wait_until(lambda: "running." in log.read_text(), timeout=60, what="the Q cluster to run", log=log)
    cluster = _live_pids(pgrp=qcluster)
    assert cluster, "the Q cluster has no worker processes"
    # The runs yield the CPU to the web server: every cluster process is AGENT_WORKER_NICE nicer.
    ours = os.getpriority(os.PRIO_PROCESS, 0)
    assert os.getpriority(os.PRIO_PROCESS, daphne) == ours
    assert {os.getpriority(os.PRIO_PROCESS, pid) for pid in cluster} == {min(19, ours + SERVE_NICE)}
    output = log.read_text()
    assert "/admin/" in output and "'expert'" in output and "AGENT_MODEL" in output

    started = time.monotonic()
    serve.send_signal(signal.SIGINT)
    assert serve.wait(timeout=15) == 0, log.read_text()

    assert time.monotonic() - started < 15
    for pgid in children:
        assert _live_pids(pgrp=pgid) == [], f"{_cmdline(pgid)!r} left processes behind"


@pytest.mark.e2e
def test_serve_stops_the_server_and_fails_when_the_worker_cluster_dies(serve_process):
    serve, children, log, _ = serve_process
    qcluster = _child_named(children, "qcluster")

    os.killpg(qcluster, signal.SIGKILL)

    assert serve.wait(timeout=15) != 0
    assert "qcluster exited unexpectedly" in log.read_text()
    for pgid in children:
        assert _live_pids(pgrp=pgid) == []


def test_serve_refuses_a_port_in_use_with_a_clear_error():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(
            CommandError, match=rf"--watch-port {port} is in use on 127.0.0.1.*--watch-port 0"
        ):
            call_command("serve", "--port", str(throwaway_pg.free_port()), "--watch-port", str(port))
        with pytest.raises(CommandError, match=rf"--port {port} is in use"):
            call_command("serve", "--port", str(port), "--watch-port", "0")
    for ports in (
        ["--port", "8000", "--watch-port", "8000"],
        ["--port", "0"],
        ["--port", "1", "--watch-port", "70000"],
    ):
        with pytest.raises(CommandError, match="not the same port"):
            call_command("serve", *ports)


def test_serve_gives_the_watch_sockets_their_own_server_by_default_on_postgresql_only():
    from django.db import connection

    with socket.socket() as taken:  # the port after a free one: the default watch port
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1] - 1
        if not serve_command.port_free("127.0.0.1", port):
            pytest.skip(f"port {port} is in use here")
        if connection.vendor != "postgresql":
            assert not serve_command.default_watch_server()
            pytest.skip("on SQLite serve runs no watch server: nothing here would refuse the port")
        with pytest.raises(CommandError, match=rf"--watch-port {port + 1} is in use"):
            call_command("serve", "--port", str(port))
