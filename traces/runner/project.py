"""Where a run works and the project context of its system prompt (M9).

Placement: a run's `project` setting (or, for a new trace, its preset's
`extra.project`) names a directory of AGENT_PROJECTS (traces/projects.py), which
becomes the workspace; a sub-trace works where its parent does; a run without a
project works in its trace workspace.

Project context, in the order the prompt shows it (later = more specific):
AGENTS.md from the project's root down to the workspace, each followed by the
AGENTS.local.md beside it (a run without a project reads its workspace's only);
then the user layer: the deployment's AGENT_USER_AGENTS_FILE, then the run
owner's own text (traces.models.UserAgents, edited in the portal).

It is read when a run segment starts (`begin`) and again before a model call when
a candidate file's stat changed (`refresh`: one stat per candidate, no reading);
a change replaces the context and emits `project_context_changed`. It is added to
each request's system prompt (`apply`) and never stored in the history, so a
compaction never summarises it. Capped at AGENT_PROJECT_CONTEXT_MAX_CHARS.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings

import traces.runner.run_settings as run_settings
from agentsite.kept import Kept
from traces.models import Trace, UserAgents
from traces.projects import Placement, place
from traces.runner.compaction import estimate_tokens
from traces.runner.config import InvalidRun, RunConfig
from traces.runner.extensions import Preset
from traces.runner.tool_api import workspace_for

if TYPE_CHECKING:
    from traces.runner.state import RunState

AGENTS_FILE = "AGENTS.md"
LOCAL_FILE = "AGENTS.local.md"
USER_TEXT_LABEL = "your own AGENTS text (portal)"
HEADING = (
    "# Project context\n\n"
    "Instructions from AGENTS.md files, outermost first (later ones are more specific and take "
    "precedence), then the user's own. Follow them."
)
STORED_KEY = "project_context"  # in Trace.context: what the portal shows


def placement_for(config: RunConfig, preset: Preset, stored: dict[str, Any] | None) -> Placement | None:
    """The project placement of a run, None for the trace workspace; InvalidRun when it cannot be used."""
    value = config.project
    if config.parent_trace_id:  # a child works where its parent does, whatever its preset says
        parent = (
            Trace.objects.filter(pk=config.parent_trace_id).values_list("run_settings", flat=True).first()
        )
        value = (parent or {}).get("project")
    elif value is None and "project" not in (stored or {}):
        value = run_settings.default_project(preset)
    if value is None:
        return None
    try:
        return place(value)
    except ValueError as exc:
        raise InvalidRun(str(exc)) from None


def trace_placement(trace_id: str, placement: Placement | None) -> Placement:
    if placement is not None:
        return placement
    workspace = workspace_for(trace_id)
    return Placement(project=None, workspace=workspace, root=workspace, writable=True)


@dataclass
class ProjectContext:
    """The assembled context and what it was made of."""

    root: Path
    workspace: Path
    user_text: str
    text: str = ""
    files: list[dict[str, Any]] = field(default_factory=list)  # layer, path, chars, included
    truncated: int = 0  # characters left out by the cap
    candidates: list[Path] = field(default_factory=list)
    stamp: tuple[Any, ...] = ()
    digest: str = ""
    tokens: int = 0

    def stored(self) -> dict[str, Any]:
        return {"files": self.files, "text": self.text, "truncated": self.truncated, "digest": self.digest}


def load(root: Path, workspace: Path, user_text: str) -> ProjectContext:
    """Read every layer now (see the module docstring for the order)."""
    context = ProjectContext(root=root, workspace=workspace, user_text=user_text)
    parts: list[tuple[dict[str, Any], str]] = []
    for layer, label, path in _sources(root, workspace):
        context.candidates.append(path)
        text = _read(path, None if layer == "user" else root)
        if text is not None and text.strip():
            parts.append(({"layer": layer, "path": label, "chars": len(text)}, text.strip()))
    if user_text.strip():
        parts.append(({"layer": "user", "path": USER_TEXT_LABEL, "chars": len(user_text)}, user_text.strip()))
    context.stamp = stamp(context.candidates)
    if parts:
        context.text, context.truncated = _assemble(parts)
    context.files = [info for info, _ in parts]
    context.digest = hashlib.sha256(context.text.encode()).hexdigest()[:16]
    context.tokens = estimate_tokens({"role": "system", "content": context.text}) if context.text else 0
    return context


def stamp(paths: list[Path]) -> tuple[Any, ...]:
    """What a change to any candidate file (created, edited, removed) changes: one stat each."""
    marks: list[Any] = []
    for path in paths:
        try:
            st = path.stat()
        except OSError:
            marks.append(None)
            continue
        marks.append((st.st_mtime_ns, st.st_size, st.st_ino))
    return tuple(marks)


def apply(messages: list[dict[str, Any]], context: ProjectContext | None) -> list[dict[str, Any]]:
    """The request with the project context at the end of its system prompt (the history is untouched)."""
    if context is None or not context.text:
        return messages
    if messages and messages[0].get("role") == "system":
        first = messages[0]
        content = first.get("content")
        if isinstance(content, list):
            combined: Any = [*content, {"type": "text", "text": context.text}]
        else:
            combined = f"{content or ''}\n\n{context.text}".lstrip()
        return [{**first, "content": combined}, *messages[1:]]
    return [{"role": "system", "content": context.text}, *messages]


def _read_user_text(owner_id: int) -> str:
    return UserAgents.objects.filter(user_id=owner_id).values_list("text", flat=True).first() or ""


# Every run's start reads its owner's text: at most once a second per process
# (agentsite/kept.py; the portal's save shows in a worker within the second).
_user_texts: Kept[int, str] = Kept("user AGENTS.md", _read_user_text, changed_by=("traces.UserAgents",))


def begin(run: RunState, placement: Placement) -> None:
    """A run segment starts: read the context afresh; a change since the trace's last segment is an event."""
    user_text = "" if run.trace.owner_id is None else _user_texts.get(run.trace.owner_id)
    context = load(placement.root, placement.workspace, user_text)
    previous = (run.trace.context or {}).get(STORED_KEY)
    run.project_context = context
    run.threshold -= context.tokens
    if previous is None or previous.get("digest") != context.digest:
        _record(run, context, previous_files=previous.get("files") if previous else None)


def refresh(run: RunState) -> None:
    """Before a model call: re-read the context if a file changed (cheap when none did)."""
    current = run.project_context
    if current is None or stamp(current.candidates) == current.stamp:
        return
    context = load(current.root, current.workspace, current.user_text)
    run.project_context = context
    if context.digest == current.digest:
        return
    run.threshold += current.tokens - context.tokens
    _record(run, context, previous_files=current.files)


def _record(run: RunState, context: ProjectContext, *, previous_files: list[dict[str, Any]] | None) -> None:
    run.trace.context = {**(run.trace.context or {}), STORED_KEY: context.stored()}
    if previous_files is None and not context.text:
        return  # nothing before, nothing now
    run.store.emit(
        "project_context_changed",
        {
            "files": context.files,
            "previous_files": previous_files,
            "chars": len(context.text),
            "truncated": context.truncated,
        },
    )


def _sources(root: Path, workspace: Path) -> list[tuple[str, str, Path]]:
    chain = [workspace]
    while chain[-1] != root and chain[-1].parent.is_relative_to(root):
        chain.append(chain[-1].parent)
    sources = []
    for directory in reversed(chain):
        relative = directory.relative_to(root).as_posix()
        prefix = "" if relative == "." else f"{relative}/"
        sources.append(("project", prefix + AGENTS_FILE, directory / AGENTS_FILE))
        sources.append(("local", prefix + LOCAL_FILE, directory / LOCAL_FILE))
    if settings.AGENT_USER_AGENTS_FILE:
        sources.append(("user", settings.AGENT_USER_AGENTS_FILE, Path(settings.AGENT_USER_AGENTS_FILE)))
    return sources


def _read(path: Path, root: Path | None) -> str | None:
    """A layer's text; a project file whose real path leaves the project (a symlink) is not read."""
    if not path.is_file():
        return None
    if root is not None and not path.resolve().is_relative_to(root):
        return None
    limit = settings.AGENT_PROJECT_CONTEXT_MAX_CHARS * 4 + 1
    try:
        with path.open("rb") as handle:
            return handle.read(limit).decode("utf-8", errors="replace")
    except OSError:
        return None


def _assemble(parts: list[tuple[dict[str, Any], str]]) -> tuple[str, int]:
    """The prompt text of `parts` within the cap, and how many characters were left out."""
    limit = settings.AGENT_PROJECT_CONTEXT_MAX_CHARS
    text = HEADING
    cut_from: list[str] = []
    omitted = 0
    for info, body in parts:
        section = f"\n\n## {_title(info)}\n\n{body}"
        room = limit - len(text)
        if len(section) <= room:
            text += section
            info["included"] = "whole"
            continue
        if room > 200 and not cut_from:
            text += section[:room]
            info["included"] = "partly"
            omitted += len(section) - room
        else:
            info["included"] = "no"
            omitted += len(section)
        cut_from.append(info["path"])
    if not omitted:
        return text, 0
    note = (
        f"\n\n[project context truncated: {omitted:,} characters left out (limit "
        f"{limit:,}, AGENT_PROJECT_CONTEXT_MAX_CHARS), from: {', '.join(cut_from)}]"
    )
    return text + note, omitted


def _title(info: dict[str, Any]) -> str:
    if info["layer"] != "user":
        return str(info["path"])
    return (
        "User instructions (their own)"
        if info["path"] == USER_TEXT_LABEL
        else "User instructions (deployment)"
    )
