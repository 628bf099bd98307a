"""System checks: what the runtime needs of the database it is given, and usable projects (M9), importable context hooks (R7)."""

from __future__ import annotations

import sqlite3
from typing import Any

from django.conf import settings
from django.core import checks
from django.db import connections
from django.utils.module_loading import import_string

from traces.projects import problem, projects

SQLITE_MINIMUM = (3, 35)  # UPDATE ... RETURNING, used by every step's commit


@checks.register(checks.Tags.database)
def sqlite_supports_returning(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    errors: list[checks.CheckMessage] = []
    for alias in databases or []:
        if connections[alias].vendor != "sqlite":
            continue
        # the library Django's sqlite3 backend is built on
        problem = sqlite_version_problem(sqlite3.sqlite_version_info)
        if problem:
            hint = "Use a newer SQLite (Debian 12 ships 3.40) or PostgreSQL (DATABASE_URL)."
            errors.append(checks.Error(problem, hint=hint, id="traces.E001"))
    return errors


def sqlite_version_problem(version: tuple[int, ...]) -> str | None:
    if tuple(version) >= SQLITE_MINIMUM:
        return None
    return (
        f"SQLite {'.'.join(map(str, version))} is too old: agentsite needs "
        f"{'.'.join(map(str, SQLITE_MINIMUM))} or newer (UPDATE ... RETURNING)."
    )


@checks.register()
def projects_are_usable(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """M9: every AGENT_PROJECTS directory exists and exposes nothing of the server."""
    errors: list[checks.CheckMessage] = []
    for project in projects().values():
        reason = problem(project)
        if reason:
            errors.append(
                checks.Error(
                    f"AGENT_PROJECTS: project {project.name!r} cannot be used: {reason}.",
                    hint="Point it at a directory of its own (not the server's checkout, the database "
                    "or AGENT_WORKSPACE_ROOT), or remove it.",
                    id="traces.E002",
                )
            )
    return errors


@checks.register()
def context_hooks_import(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """R7: every AGENT_CONTEXT_HOOKS path names something callable, so no run fails on it."""
    errors: list[checks.CheckMessage] = []
    for path in settings.AGENT_CONTEXT_HOOKS:
        try:
            hook = import_string(path)
        except ImportError as exc:
            reason = str(exc)
        else:
            if callable(hook):
                continue
            reason = "it is not callable"
        errors.append(
            checks.Error(
                f"AGENT_CONTEXT_HOOKS: {path!r} cannot be used: {reason}.",
                hint="Name a function (trace, goal_tree) -> str | None by its dotted path.",
                id="traces.E003",
            )
        )
    return errors
