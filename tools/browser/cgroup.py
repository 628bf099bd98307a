"""A memory and pids cgroup per browser session: how Chromium's memory is bounded.

RLIMIT_AS cannot bound Chromium (V8 reserves far more address space than it uses),
so each session gets a cgroup with `memory.max` (v1: `memory.limit_in_bytes`) of
AGENT_BROWSER_MEMORY_MB and `pids.max` of AGENT_BROWSER_MAX_TASKS. The launch
wrapper (`chromium.sh`, `chromium-sandboxed.sh`) writes its own pid into each
directory before it execs, so every Chromium process starts inside; the kernel's
OOM killer then picks within the cgroup, where Chromium's renderers (which raise
their own oom_score_adj) go before the browser process.

The cgroups sit below the server's own cgroup of each hierarchy (the memory
controller of v1, or v2 with memory and pids delegated), never beside it, so a
limit the server itself runs under still holds. Where none can be made (not root,
no delegation, no controller) `BrowserCgroup.create` returns None: the browser
runs without a memory bound and the system check says so.
"""

from __future__ import annotations

import functools
import logging
import os
import uuid
from pathlib import Path

from django.conf import settings

from tools.sandbox.cgroup import remove_cgroup, remove_stale

logger = logging.getLogger(__name__)

BASE_DIR = "agentsite-browser"
V1_CONTROLLERS = ("memory", "pids")


class BrowserCgroup:
    """One browser session's cgroup directories (one per v1 hierarchy, or one v2 directory)."""

    def __init__(self, paths: list[Path], memory_file: Path) -> None:
        self.paths = paths
        self.memory_file = memory_file  # memory.max or memory.limit_in_bytes

    @classmethod
    def create(cls) -> BrowserCgroup | None:
        """A new session cgroup with the settings' limits; None where cgroups cannot be used here."""
        bases = cgroup_bases()
        if not bases:
            return None
        name = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        memory = settings.AGENT_BROWSER_MEMORY_MB * 1024 * 1024
        made: list[Path] = []
        try:
            for base in bases:
                _make_base(base.parent, v2=(base.parent / "cgroup.subtree_control").exists())
                path = base / name
                path.mkdir()
                made.append(path)
            memory_file = _write_limits(made, memory, settings.AGENT_BROWSER_MAX_TASKS)
        except OSError as exc:
            logger.warning("could not make the browser's cgroup: %s", exc)
            for path in made:
                remove_cgroup(path)
            return None
        return cls(made, memory_file)

    def environment(self) -> dict[str, str]:
        """What the launch wrapper reads to put Chromium in the cgroup before it starts."""
        return {"AGENT_BROWSER_CGROUPS": ":".join(str(path) for path in self.paths)}

    def remove(self) -> None:
        """Kill what is left in the cgroup and remove it, and the base when no session is left
        in it (nothing of ours stays in the server's cgroup, which its manager may remove)."""
        for path in self.paths:
            remove_cgroup(path)
            _remove_if_unused(path.parent)


def _write_limits(paths: list[Path], memory: int, tasks: int) -> Path:
    """Set the memory and task limits in whichever directory has each file; the memory file."""
    memory_file: Path | None = None
    for path in paths:
        if (path / "memory.max").exists():  # v2; no swap, so the limit is the memory
            (path / "memory.max").write_text(str(memory))
            _write_optional(path / "memory.swap.max", "0")
            memory_file = path / "memory.max"
        elif (path / "memory.limit_in_bytes").exists():  # v1; memsw exists only with swap accounting
            (path / "memory.limit_in_bytes").write_text(str(memory))
            _write_optional(path / "memory.memsw.limit_in_bytes", str(memory))
            memory_file = path / "memory.limit_in_bytes"
        if (path / "pids.max").exists():
            (path / "pids.max").write_text(str(tasks))
    if memory_file is None:
        raise OSError("no memory controller in the browser's cgroup")
    return memory_file


def _write_optional(file: Path, value: str) -> None:
    try:
        file.write_text(value)
    except OSError:
        pass


@functools.lru_cache(maxsize=1)
def cgroup_bases() -> tuple[Path, ...]:
    """Our base directories for browser cgroups, found once: a v1 memory hierarchy (with
    the v1 pids one when there is one), else a v2 one that delegates memory; () when none.
    The probe leaves none behind; `BrowserCgroup.create` makes them as it needs them."""
    if os.geteuid() != 0:
        return ()  # the limits are written as root; an unprivileged server has no delegation here
    v1, v2 = _hierarchies()
    if "memory" in v1:
        bases = []
        for controller in V1_CONTROLLERS:
            if controller in v1 and (base := _make_base(v1[controller], v2=False)) is not None:
                bases.append(base)
            elif controller == "memory":
                return ()
    elif v2 is not None and (base := _make_base(v2, v2=True)) is not None:
        bases = [base]
    else:
        return ()
    for base in bases:
        _remove_if_unused(base)
    return tuple(bases)


def _hierarchies() -> tuple[dict[str, Path], Path | None]:
    """Where this process's own cgroup is, per v1 controller we use and in the v2 hierarchy."""
    own: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _id, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            own[controller] = path
    v1: dict[str, Path] = {}
    v2: Path | None = None
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split(" - ", 1)
        if len(fields) != 2:
            continue
        mount_root, mount_point = fields[0].split()[3:5]
        kind, _source, options = (fields[1].split() + ["", ""])[:3]
        if kind == "cgroup":
            for controller in V1_CONTROLLERS:
                if controller in options.split(",") and controller in own:
                    v1[controller] = _inside(Path(mount_point), mount_root, own[controller])
        elif kind == "cgroup2" and "" in own:
            v2 = _inside(Path(mount_point), mount_root, own[""])
    return v1, v2


def _inside(mount_point: Path, mount_root: str, own: str) -> Path:
    """The directory of cgroup `own` in a hierarchy whose `mount_root` is mounted at `mount_point`."""
    relative = os.path.relpath(own, mount_root) if own.startswith(mount_root) else "."
    return (mount_point / relative).resolve()


def _remove_if_unused(base: Path) -> None:
    remove_stale(base)  # sessions of workers that died
    try:
        base.rmdir()
    except OSError:
        pass  # another session's cgroup is in it, or it is gone already


def _make_base(parent: Path, *, v2: bool) -> Path | None:
    """`parent`/agentsite-browser, made (again) if need be; None when it cannot be."""
    base = parent / BASE_DIR
    try:
        if v2:  # delegate memory and pids down to the sessions' directories
            (parent / "cgroup.subtree_control").write_text("+memory +pids")
            base.mkdir(exist_ok=True)
            (base / "cgroup.subtree_control").write_text("+memory +pids")
        else:
            base.mkdir(exist_ok=True)
        remove_stale(base)
    except OSError as exc:
        logger.info("no browser cgroup under %s: %s", parent, exc)
        return None
    return base


def memory_limit() -> str | None:
    """How Chromium's memory is bounded here ("cgroup"), or None when it is not."""
    return "cgroup" if cgroup_bases() else None
