"""Project directories (M9): named directories of the operator's that a run may work in.

AGENT_PROJECTS names them (settings.py reads the JSON). A run's `project` setting
(or its preset's `extra.project`) is a name, or a name and a directory inside it
("shop/backend"): that directory becomes the run's workspace, the file tools and
the sandbox confine to it, read-only unless the project is writable, and the
AGENTS.md chain runs from the project's root down to it.

A project must not expose the server itself: a directory that contains or lies
inside the server's checkout (BASE_DIR: code, settings, .env), that holds the
database, or that overlaps the trace workspaces is refused at start-up
(traces/checks.py) and at run time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.conf import settings


@dataclass(frozen=True)
class Project:
    name: str
    root: Path  # as configured; resolved by `place`
    writable: bool


@dataclass(frozen=True)
class Placement:
    """Where a run works: its workspace, the top of its AGENTS.md chain, whether it may write."""

    project: str | None  # the run setting as given ("shop" or "shop/backend"), None = trace workspace
    workspace: Path
    root: Path
    writable: bool


def projects() -> dict[str, Project]:
    """The configured projects by name."""
    return {
        name: Project(name, Path(spec["path"]), bool(spec["writable"]))
        for name, spec in settings.AGENT_PROJECTS.items()
    }


def known_names() -> str:
    return ", ".join(sorted(settings.AGENT_PROJECTS)) or "none (AGENT_PROJECTS is empty)"


def problem(project: Project, *, databases: list[Path] | None = None) -> str | None:
    """Why `project`'s directory may not serve as a workspace, or None (`databases`: the
    database files to keep out, default those of settings.DATABASES)."""
    path = project.root
    if not path.is_dir():
        return f"{path} is not a directory"
    real = path.resolve()
    base = Path(settings.BASE_DIR).resolve()
    if _overlap(real, base):
        return f"{real} overlaps the server's own checkout ({base}: its code, settings and secrets)"
    for database in _database_files() if databases is None else databases:
        if database.is_relative_to(real):
            return f"{real} contains the database ({database})"
    workspaces = Path(settings.AGENT_WORKSPACE_ROOT).resolve()
    if _overlap(real, workspaces):
        return f"{real} overlaps the trace workspaces ({workspaces})"
    return None


def place(value: str) -> Placement:
    """The placement the run setting `value` names; ValueError naming the field when it cannot be."""
    name, _, sub = value.partition("/")
    project = projects().get(name)
    if project is None:
        raise ValueError(f"project: unknown project {name!r}; known: {known_names()}")
    reason = problem(project)
    if reason:
        raise ValueError(f"project: {name!r} cannot be used: {reason}")
    root = project.root.resolve()
    workspace = (root / sub).resolve() if sub.strip("/") else root
    if not workspace.is_relative_to(root) or not workspace.is_dir():
        raise ValueError(f"project: {value!r}: {sub!r} is not a directory inside project {name!r}")
    return Placement(project=value, workspace=workspace, root=root, writable=project.writable)


def _overlap(a: Path, b: Path) -> bool:
    return a.is_relative_to(b) or b.is_relative_to(a)


def _database_files() -> list[Path]:
    files = []
    for database in settings.DATABASES.values():
        name = str(database.get("NAME") or "")
        if database.get("ENGINE", "").endswith("sqlite3") and name and not name.startswith(":memory:"):
            files.append(Path(name).resolve())
    return files
