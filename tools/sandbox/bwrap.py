"""What a sandbox holds: bwrap's options, the command's environment and its limits.

See the package docstring for why each piece is there.
"""

from __future__ import annotations

import os
from pathlib import Path

from django.conf import settings

SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
SYSTEM_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "nsswitch.conf", "localtime")
NETWORK_ETC_FILES = (
    "resolv.conf",
    "hosts",
    "host.conf",
    "gai.conf",
    "services",
    "protocols",
    "ssl/certs",
    "ssl/openssl.cnf",
)
OFFLINE_HOSTS = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
MIB = 1024 * 1024


def limited(argv: list[str]) -> list[str]:
    """`argv` under prlimit, set inside the sandbox's user namespace so RLIMIT_NPROC counts only its processes."""
    cpu = settings.AGENT_SANDBOX_CPU_SECONDS
    return [
        "prlimit",
        f"--cpu={cpu}:{cpu + 1}",  # SIGXCPU first, SIGKILL a second later
        f"--as={settings.AGENT_SANDBOX_MEMORY_MB * MIB}",
        f"--fsize={settings.AGENT_SANDBOX_FILE_MB * MIB}",
        f"--nproc={settings.AGENT_SANDBOX_MAX_PROCESSES}",
        "--core=0",
        "--",
        *argv,
    ]


def options(workspace: Path, network: bool, *, writable: bool = True) -> tuple[list[str], list[int]]:
    """bwrap's options (before --info-fd) and the fds of the files it copies in."""
    root = os.geteuid() == 0
    tmp_size = str(settings.AGENT_SANDBOX_FILE_MB * MIB)
    args = ["--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session"]
    args += ["--hostname", "sandbox"] + (["--share-net"] if network else [])
    if root:
        args += ["--cap-drop", "ALL"]
    args += ["--ro-bind", "/usr", "/usr"]
    for name in SYSTEM_LINKS:
        path = Path("/", name)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    for name in ETC_FILES + (NETWORK_ETC_FILES if network else ()):
        args += _etc_entry(Path("/etc", name))
    args += ["--proc", "/proc", "--dev", "/dev"]
    if root:  # uid 0 may write kernel settings there by plain file permissions
        args += ["--ro-bind", "/proc/sys", "/proc/sys"]
    args += ["--size", tmp_size, "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
    args += ["--size", tmp_size, "--tmpfs", "/tmp"]
    fds = [memfd("passwd", _passwd(workspace)), memfd("group", _group())]
    args += ["--ro-bind-data", str(fds[0]), "/etc/passwd", "--ro-bind-data", str(fds[1]), "/etc/group"]
    if not network:
        fds.append(memfd("hosts", OFFLINE_HOSTS))
        args += ["--ro-bind-data", str(fds[-1]), "/etc/hosts"]
    bind = "--bind" if writable else "--ro-bind"  # a read-only project (M9)
    args += [bind, str(workspace), str(workspace), "--chdir", str(workspace), "--remount-ro", "/"]
    for name, value in environment(workspace).items():
        args += ["--setenv", name, value]
    return args, fds


def _etc_entry(path: Path) -> list[str]:
    """A link into /usr stays a link (localtime names its zone); anything else is bound read-only."""
    if path.is_symlink():
        target = os.readlink(path)
        if os.path.realpath(path).startswith("/usr/"):
            return ["--symlink", target, str(path)]
    return ["--ro-bind", str(path), str(path)] if path.exists() else []


def environment(workspace: Path) -> dict[str, str]:
    """The command's whole environment: the variables AGENT_SANDBOX_ENV allows, then the fixed ones."""
    allowed = {name: os.environ[name] for name in settings.AGENT_SANDBOX_ENV if name in os.environ}
    lang = os.environ.get("LANG") or "C.UTF-8"
    fixed = {"PATH": SANDBOX_PATH, "HOME": str(workspace), "LANG": lang, "LC_ALL": lang}
    return allowed | fixed | {"TERM": "dumb", "TMPDIR": "/tmp"}


def _passwd(workspace: Path) -> str:
    """passwd naming the command's own uid (root, or `agent` with the workspace as home) and nobody."""
    uid, gid = os.getuid(), os.getgid()
    lines = {
        0: "root:x:0:0:root:/root:/usr/sbin/nologin",
        65534: "nobody:x:65534:65534::/nonexistent:/usr/sbin/nologin",
    }
    lines[uid] = f"{'root' if uid == 0 else 'agent'}:x:{uid}:{gid}::{workspace}:/bin/bash"
    return "".join(f"{line}\n" for _, line in sorted(lines.items()))


def _group() -> str:
    gid = os.getgid()
    lines = {0: "root:x:0:", 65534: "nogroup:x:65534:", gid: f"{'root' if gid == 0 else 'agent'}:x:{gid}:"}
    return "".join(f"{line}\n" for _, line in sorted(lines.items()))


def memfd(name: str, text: str) -> int:
    fd = os.memfd_create(name, 0)  # no CLOEXEC: handed to bwrap through pass_fds
    os.write(fd, text.encode())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
