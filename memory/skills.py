"""Skills (M6): markdown files with a front matter (name, description) and a body.

Three places, later ones overriding earlier ones of the same name:

- built-in: `memory/skills/*.md` — injected into the system prompt of new runs,
  filtered by call site (`RunConfig.skills`) > preset (`AgentPreset.skills`) > all;
- user: `AGENT_USER_SKILLS_DIR` (default `~/.agentsite/skills`);
- project: `AGENT_SKILLS_DIRS` (default `./skills`);
- workspace: `.agentsite/skills/` inside the run's project (AGENT_PROJECTS, M9): at the
  project's root, then in the sub-directory the run works in (seed 003 `.reson/skills`).
  Only runs placed in a project see these; a file that resolves outside its folder
  (a symlink) is skipped, since a writable project is written by the agent itself.

User, project and workspace skills are loaded on demand by the `skill` tool (or
injected when a call site names them). A skill is `NAME.md` or `NAME/SKILL.md`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml
from django.conf import settings

logger = logging.getLogger(__name__)

BUILTIN_DIR = Path(__file__).resolve().parent / "skills"
WORKSPACE_SKILLS = Path(".agentsite") / "skills"  # inside a project's root and workspace


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    body: str
    source: str  # builtin | user | project | workspace
    path: Path

    def as_prompt(self) -> str:
        return self.body.strip()


class UnknownSkill(LookupError):
    pass


# (path, source) -> (the file's text, its Skill): YAML is parsed again only when the
# text changed (every run reads the skills three times; parsing them was ~8 ms of a
# run's CPU). Keyed by the text itself, so a quick rewrite is never missed.
_parsed: dict[tuple[Path, str], tuple[str, Skill]] = {}


def _parse_cached(path: Path, source: str) -> Skill:
    text = path.read_text(encoding="utf-8")
    known = _parsed.get((path, source))
    if known is not None and known[0] == text:
        return known[1]
    skill = parse_skill(path, source, text=text)
    _parsed[(path, source)] = (text, skill)
    return skill


def parse_skill(path: Path, source: str, *, text: str | None = None) -> Skill:
    """A skill file (`text`: its content, already read); ValueError naming the file when
    its front matter is missing or bad."""
    if text is None:
        text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---" or "---" not in [line.strip() for line in lines[1:]]:
        raise ValueError(f"{path}: a skill starts with a front matter between '---' lines")
    end = [line.strip() for line in lines[1:]].index("---") + 1
    try:
        meta = yaml.safe_load("\n".join(lines[1:end])) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: front matter is not valid YAML: {exc}") from None
    default_name = path.parent.name if path.name == "SKILL.md" else path.stem
    name = str(meta.get("name") or default_name).strip() if isinstance(meta, dict) else ""
    if not name:
        raise ValueError(f"{path}: front matter has no name")
    description = str(meta.get("description") or "").strip()
    return Skill(name, description, "\n".join(lines[end + 1 :]).strip("\n"), source, path)


def _files(directory: Path, *, contained: bool = False) -> list[Path]:
    if not directory.is_dir():
        return []
    files = sorted([*directory.glob("*.md"), *directory.glob("*/SKILL.md")])
    if contained:  # nothing the folder links to elsewhere
        real = directory.resolve()
        files = [f for f in files if f.resolve().is_relative_to(real)]
    return files


def project_skill_dirs(root: Path, workspace: Path) -> list[Path]:
    """The workspace skill folders of a run placed in a project: root's, then the workspace's."""
    dirs = [root / WORKSPACE_SKILLS, workspace / WORKSPACE_SKILLS]
    return list(dict.fromkeys(dirs))


def skill_dirs(workspace_dirs: Sequence[Path] = ()) -> list[tuple[str, Path]]:
    dirs = [("builtin", BUILTIN_DIR), ("user", Path(settings.AGENT_USER_SKILLS_DIR))]
    dirs += [("project", Path(d)) for d in settings.AGENT_SKILLS_DIRS]
    dirs += [("workspace", d) for d in workspace_dirs]
    return dirs


def load_skills(workspace_dirs: Sequence[Path] = ()) -> dict[str, Skill]:
    """Every skill by name (workspace over project over user over built-in); bad files are
    logged and skipped. `workspace_dirs`: the run's `project_skill_dirs`, if it has a project."""
    skills: dict[str, Skill] = {}
    for source, directory in skill_dirs(workspace_dirs):
        for path in _files(directory, contained=source == "workspace"):
            try:
                skill = _parse_cached(path, source)
            except (OSError, ValueError) as exc:
                logger.warning("skipping skill file: %s", exc)
                continue
            skills[skill.name] = skill
    return skills


def get_skill(name: str, workspace_dirs: Sequence[Path] = ()) -> Skill:
    skills = load_skills(workspace_dirs)
    if name not in skills:
        raise UnknownSkill(f"unknown skill {name!r}; available: {', '.join(sorted(skills)) or 'none'}")
    return skills[name]


def skills_for_prompt(
    call_site: list[str] | None, preset: list[str] | None, workspace_dirs: Sequence[Path] = ()
) -> list[Skill]:
    """The skills injected into a new run's system prompt: call site > preset > all built-ins.

    A call site may name any skill (UnknownSkill for one that does not exist); a
    preset's unknown names are logged and skipped.
    """
    skills = load_skills(workspace_dirs)
    if call_site is not None:
        unknown = [n for n in call_site if n not in skills]
        if unknown:
            raise UnknownSkill(
                f"unknown skill(s) {', '.join(unknown)}; available: {', '.join(sorted(skills)) or 'none'}"
            )
        return [skills[n] for n in dict.fromkeys(call_site)]
    builtins = [s for s in skills.values() if s.source == "builtin"]
    if preset is None:
        return sorted(builtins, key=lambda s: s.name)
    for name in preset:
        if name not in skills:
            logger.warning("preset names unknown skill %r", name)
    return [skills[n] for n in dict.fromkeys(preset) if n in skills]


def skills_prompt(injected: list[Skill], *, list_others: bool, workspace_dirs: Sequence[Path] = ()) -> str:
    """The system prompt section: injected skills in full, the others by name for the `skill` tool."""
    parts = [f"## Skill: {s.name}\n\n{s.as_prompt()}" for s in injected]
    names = {s.name for s in injected}
    others = [s for s in load_skills(workspace_dirs).values() if s.name not in names]
    if others and list_others:
        listing = "\n".join(f"- {s.name}: {s.description}" for s in sorted(others, key=lambda s: s.name))
        parts.append(f"## More skills\n\nLoad one with the `skill` tool when it fits the task:\n{listing}")
    return "\n\n".join(parts)
