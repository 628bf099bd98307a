"""A pids cgroup per sandboxed call: how a server running as root bounds the process count.

RLIMIT_NPROC never applies to uid 0, so as root each call gets its own cgroup in a
hierarchy with the pids controller (v1 `pids`, or v2 where the root offers pids),
under CGROUP_DIR. bwrap's init is moved in before it starts the command, so every
process of the call is counted (and killed with it).
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import time
import uuid
from pathlib import Path

from django.conf import settings

from traces.runner.tool_api import ToolError

logger = logging.getLogger(__name__)

CGROUP_DIR = "agentsite-sandbox"


@functools.lru_cache(maxsize=1)
def pids_cgroup_root() -> Path | None:
    """Our directory in a cgroup hierarchy with the pids controller, made once; None when there is none."""
    for mount_point, kind in _cgroup_mounts():
        base = mount_point / CGROUP_DIR
        try:
            base.mkdir(exist_ok=True)
            if kind == "cgroup2":
                (base / "cgroup.subtree_control").write_text("+pids")
            remove_stale(base)
            return base
        except OSError as exc:
            logger.info("no pids cgroup under %s: %s", mount_point, exc)
    return None


def _cgroup_mounts() -> list[tuple[Path, str]]:
    """(mount point, type) of v1 pids hierarchies and v2 ones whose root offers pids, v1 first."""
    found: list[tuple[Path, str]] = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split(" - ", 1)
        if len(fields) != 2:
            continue
        mount_point = Path(fields[0].split()[4])
        kind, _source, options = (fields[1].split() + ["", ""])[:3]
        if kind == "cgroup" and "pids" in options.split(","):
            found.insert(0, (mount_point, kind))
        elif kind == "cgroup2":
            try:
                offered = (mount_point / "cgroup.subtree_control").read_text().split()
            except OSError:
                continue
            if "pids" in offered:
                found.append((mount_point, kind))
    return found


def remove_stale(base: Path) -> None:
    """Remove the cgroups left by workers that died (named `<worker pid>-<id>`; a busy one stays)."""
    for child in base.iterdir():
        owner = child.name.split("-", 1)[0]
        if child.is_dir() and owner.isdigit() and not Path("/proc", owner).exists():
            try:
                child.rmdir()
            except OSError:
                pass


class CallCgroup:
    """One call's pids cgroup: at most AGENT_SANDBOX_MAX_PROCESSES processes in it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def create(cls) -> CallCgroup | None:
        base = pids_cgroup_root()
        if base is None:
            return None
        path = base / f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        try:
            path.mkdir()
            (path / "pids.max").write_text(str(settings.AGENT_SANDBOX_MAX_PROCESSES))
        except OSError as exc:
            raise ToolError(f"Could not create the sandbox's process cgroup {path}: {exc}.") from exc
        return cls(path)

    def add(self, pid: int) -> None:
        try:
            (self.path / "cgroup.procs").write_text(str(pid))
        except OSError as exc:
            raise ToolError(f"Could not put the sandbox in its process cgroup {self.path}: {exc}.") from exc

    def remove(self) -> None:
        remove_cgroup(self.path)


def remove_cgroup(path: Path) -> None:
    """SIGKILL every process in the cgroup at `path` and remove it (gone already is fine)."""
    for _ in range(500):
        try:
            pids = [int(p) for p in (path / "cgroup.procs").read_text().split()]
        except OSError:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            path.rmdir()
            return
        except OSError:
            time.sleep(0.002)  # the killed are still exiting
    logger.warning("could not remove the cgroup %s", path)
