"""A throwaway PostgreSQL server on 127.0.0.1 for tests and benchmarks.

As a module::

    from throwaway_pg import start

    with start() as pg:
        os.environ["DATABASE_URL"] = pg.url

As a command, runs CMD with DATABASE_URL set and exits with its exit code::

    python scripts/throwaway_pg.py -- CMD ARGS...
    python scripts/throwaway_pg.py            # print DATABASE_URL, serve until Ctrl-C
    python scripts/throwaway_pg.py --find     # print the server binaries' folder

The server lives in a temporary folder with fsync off and trust auth on loopback;
stop() kills it and removes the folder. PostgreSQL refuses to run as root, so as
root the server runs as an unprivileged system user (created on first use).
"""

from __future__ import annotations

import argparse
import atexit
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

SYSTEM_USER = "agentsite-pg"
DB_SUPERUSER = "postgres"
DEFAULT_DBNAME = "agentsite"
SERVER_BINARIES = ("initdb", "pg_ctl", "postgres")
INSTALL_HINT = "install Debian's postgresql-15 package (apt-get install -y postgresql-15)"


class PostgresNotFound(RuntimeError):
    """No folder with PostgreSQL's server binaries (initdb, pg_ctl, postgres) was found."""


class PostgresStartError(RuntimeError):
    """The server binaries were found but the server did not come up."""


def _has_server_binaries(folder: Path) -> bool:
    return all(os.access(folder / name, os.X_OK) for name in SERVER_BINARIES)


def _version_key(folder: str) -> tuple[int, ...]:
    version = Path(folder).parent.name
    return tuple(int(part) for part in version.split(".") if part.isdigit())


def candidate_bindirs() -> list[Path]:
    """Folders that may hold the server binaries, in the order they are tried."""
    candidates: list[Path] = []
    if os.environ.get("PG_BINDIR"):
        candidates.append(Path(os.environ["PG_BINDIR"]))
    pg_ctl = shutil.which("pg_ctl")
    if pg_ctl:
        # Debian links pg_ctl into PATH; the server binaries sit beside its target.
        candidates.append(Path(pg_ctl).resolve().parent)
    pg_config = shutil.which("pg_config")
    if pg_config:
        result = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        if result.returncode == 0 and result.stdout.strip():
            candidates.append(Path(result.stdout.strip()))
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True):
        candidates.append(Path(folder))
    return candidates


def find_bindir() -> Path:
    """Return the first folder holding initdb, pg_ctl and postgres, or raise PostgresNotFound."""
    tried = candidate_bindirs()
    for folder in tried:
        if _has_server_binaries(folder):
            return folder
    looked = ", ".join(str(folder) for folder in tried) or "nowhere (no pg_ctl or pg_config on PATH)"
    raise PostgresNotFound(
        f"No PostgreSQL server binaries ({', '.join(SERVER_BINARIES)}) found; looked in {looked}. "
        f"To fix: {INSTALL_HINT}, or set PG_BINDIR to the folder holding them."
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _ensure_system_user(name: str) -> None:
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
            check=True,
            capture_output=True,
            text=True,
        )


class ThrowawayPG:
    """A running throwaway server; `url` is what DATABASE_URL should be."""

    def __init__(self, *, bindir: Path, root: Path, run_as: str | None, dbname: str) -> None:
        self.bindir = bindir
        self.root = root
        self.datadir = root / "data"
        self.log_path = root / "postgres.log"
        self.run_as = run_as
        self.host = "127.0.0.1"
        self.port = 0
        self.user = DB_SUPERUSER
        self.dbname = dbname
        self._running = False

    @property
    def url(self) -> str:
        return f"postgres://{self.user}@{self.host}:{self.port}/{self.dbname}"

    def env(self) -> dict[str, str]:
        """The current environment plus DATABASE_URL pointing at this server."""
        return {**os.environ, "DATABASE_URL": self.url}

    def _server_cmd(self, name: str, *args: str) -> list[str]:
        cmd = [str(self.bindir / name), *args]
        if self.run_as:
            return ["runuser", "-u", self.run_as, "--", *cmd]
        return cmd

    def _run(self, cmd: list[str]) -> subprocess.CompletedProcess[str]:
        # cwd inside our folder: the server user may not be able to enter the caller's cwd.
        return subprocess.run(cmd, cwd=self.root, capture_output=True, text=True, check=False)

    def _initdb(self) -> None:
        result = self._run(
            self._server_cmd(
                "initdb",
                "-D", str(self.datadir),
                "-U", self.user,
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            )
        )  # fmt: skip
        if result.returncode != 0:
            raise PostgresStartError(f"initdb failed:\n{result.stdout}{result.stderr}")

    def _configure(self, port: int) -> None:
        # Appended, so a retry with a new port overrides the previous line.
        settings = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(port),
            "unix_socket_directories": f"'{self.root}'",
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "max_connections": "200",
        }
        with open(self.datadir / "postgresql.conf", "a", encoding="utf-8") as conf:
            conf.write("\n# throwaway_pg\n")
            conf.writelines(f"{key} = {value}\n" for key, value in settings.items())
        self.port = port

    def start_server(self, *, timeout: float = 60.0) -> None:
        """Start (or restart after stop_server) the server process and wait until it accepts connections."""
        cmd = self._server_cmd(
            "pg_ctl",
            "start",
            "-w",
            "-t",
            str(int(timeout)),
            "-D",
            str(self.datadir),
            "-l",
            str(self.log_path),
        )
        result = self._run(cmd)
        if result.returncode != 0:
            raise PostgresStartError(
                f"pg_ctl start failed:\n{result.stdout}{result.stderr}\n{self._log_tail()}"
            )
        self._running = True

    def stop_server(self, *, mode: str = "immediate") -> None:
        """Stop the server process but keep its data (for restart tests)."""
        if not self._running:
            return
        self._run(self._server_cmd("pg_ctl", "stop", "-w", "-m", mode, "-D", str(self.datadir)))
        self._running = False

    def restart(self, *, mode: str = "immediate") -> None:
        self.stop_server(mode=mode)
        self.start_server()

    def _create_database(self) -> None:
        createdb = self.bindir / "createdb"
        cmd = [str(createdb), "-h", self.host, "-p", str(self.port), "-U", self.user, self.dbname]
        if not os.access(createdb, os.X_OK):
            cmd = [str(self.bindir / "psql"), "-h", self.host, "-p", str(self.port), "-U", self.user,
                   "-d", "postgres", "-c", f'CREATE DATABASE "{self.dbname}"']  # fmt: skip
        result = self._run(cmd)
        if result.returncode != 0:
            raise PostgresStartError(f"creating database {self.dbname!r} failed:\n{result.stderr}")

    def _log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "server log:\n" + "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """Kill the server (no clean shutdown needed) and remove its folder. Safe to call twice."""
        self.stop_server(mode="immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> ThrowawayPG:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _reachable(bindir: Path, user: str) -> bool:
    """Whether `user` can run the server binaries where they are."""
    check = ["runuser", "-u", user, "--", "test", "-x", str(bindir / "postgres")]
    return subprocess.run(check, capture_output=True, check=False).returncode == 0


def _copy_install(bindir: Path, root: Path) -> Path:
    """A copy of a relocatable install in a folder the server user cannot enter (pip's
    pgserver in a checkout under a private temporary folder), inside the server's
    folder: its bin/ lib/ share/, and the wheel's `<package>.libs` that the binaries'
    rpath ($ORIGIN/../../../<package>.libs) names, at the same relative places."""
    install, package = bindir.parent, bindir.parent.parent
    site = root / "site"
    shutil.copytree(install, site / package.name / install.name, symlinks=True)
    for libs in package.parent.glob(f"{package.name}.libs"):
        shutil.copytree(libs, site / libs.name, symlinks=True)
    for folder in (site, site / package.name):
        os.chmod(folder, 0o755)
    return site / package.name / install.name / bindir.name


def start(*, dbname: str = DEFAULT_DBNAME, attempts: int = 3) -> ThrowawayPG:
    """Start a fresh server on a free loopback port with an empty database `dbname`."""
    bindir = find_bindir()
    run_as = None
    base = None
    if os.geteuid() == 0:
        run_as = SYSTEM_USER
        _ensure_system_user(run_as)
        base = "/tmp"  # the server user must be able to reach it; root's TMPDIR may not be
    root = Path(tempfile.mkdtemp(prefix="throwaway-pg-", dir=base))
    if run_as:
        entry = pwd.getpwnam(run_as)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    if run_as and not _reachable(bindir, run_as):
        bindir = _copy_install(bindir, root)
    pg = ThrowawayPG(bindir=bindir, root=root, run_as=run_as, dbname=dbname)
    atexit.register(pg.stop)
    try:
        pg._initdb()
        for attempt in range(attempts):
            pg._configure(free_port())
            try:
                pg.start_server()
                break
            except PostgresStartError:
                # Another process may have taken the port between probe and bind.
                if attempt == attempts - 1:
                    raise
        pg._create_database()
    except BaseException:
        pg.stop()
        raise
    return pg


def _run_command(command: list[str], pg: ThrowawayPG) -> int:
    child = subprocess.Popen(command, env=pg.env())

    def forward(signum: int, _frame: object) -> None:
        child.send_signal(signum)

    # Ctrl-C reaches the child through the terminal's process group; SIGTERM is forwarded.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, forward)
    returncode = child.wait()
    return 128 - returncode if returncode < 0 else returncode


def _serve_until_interrupted(pg: ThrowawayPG) -> int:
    print(f"DATABASE_URL={pg.url}", flush=True)
    print("PostgreSQL is running; press Ctrl-C to stop it and remove its data.", file=sys.stderr, flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if "--" in argv:
        split = argv.index("--")
        argv, command = argv[:split], argv[split + 1 :]
    parser = argparse.ArgumentParser(
        prog="throwaway_pg.py",
        description="Start a throwaway PostgreSQL on 127.0.0.1, run CMD with DATABASE_URL set, then remove it.",
        usage="%(prog)s [--dbname NAME] [--find] [-- CMD ARGS...]",
    )
    parser.add_argument("--dbname", default=DEFAULT_DBNAME, help="database to create (default: %(default)s)")
    parser.add_argument("--find", action="store_true", help="print the server binaries' folder and exit")
    args = parser.parse_args(argv)
    try:
        if args.find:
            print(find_bindir())
            return 0
        pg = start(dbname=args.dbname)
    except PostgresNotFound as exc:
        print(f"throwaway_pg: {exc}", file=sys.stderr)
        return 2
    except (PostgresStartError, subprocess.CalledProcessError) as exc:
        detail = exc.stderr if isinstance(exc, subprocess.CalledProcessError) else exc
        print(f"throwaway_pg: could not start PostgreSQL: {detail}", file=sys.stderr)
        return 3
    with pg:
        if not command:
            return _serve_until_interrupted(pg)
        return _run_command(command, pg)


if __name__ == "__main__":
    sys.exit(main())
