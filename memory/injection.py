"""What the runner asks of memory when it prepares a new trace (M4, M6).

`system_prompt_for` adds the skills to the system prompt; `with_experiences`
appends the retrieved experiences to the first user message and notes them in
`trace.context["experiences"]` (so outcomes and citations can be credited) and in
the `experiences_retrieved` event, with why each was chosen (the portal shows it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memory.retrieval import format_experiences, retrieve_for_task
from memory.services import MEMORY_CONTEXT
from memory.skills import (
    Skill,
    UnknownSkill,
    load_skills,
    project_skill_dirs,
    skills_for_prompt,
    skills_prompt,
)
from traces.models import Trace
from traces.runner.config import InvalidRun, RunConfig
from traces.runner.extensions import Preset
from traces.runner.project import placement_for

# Built-in skills about a family of tools (seed 004: the browser skill): unless the
# call site names the skills, each is injected where one of its tools is offered,
# and left out where none is.
TOOL_SKILLS = {"browser": "browser_"}


def system_prompt_for(config: RunConfig, preset: Preset, base: str, offered: set[str]) -> str:
    """`base` plus the skills chosen by call site > preset > all built-ins (tool skills
    where their tools are offered).

    Raises InvalidRun when the call site names a skill that does not exist.
    """
    placement = placement_for(config, preset, None)  # M9: a project's own skills, if it has one
    workspace_dirs = project_skill_dirs(placement.root, placement.workspace) if placement else []
    try:
        injected = skills_for_prompt(config.skills, preset.skills, workspace_dirs)
    except UnknownSkill as exc:
        raise InvalidRun(str(exc)) from None
    if config.skills is None:
        injected = with_tool_skills(injected, offered)
    section = skills_prompt(injected, list_others="skill" in offered, workspace_dirs=workspace_dirs)
    return f"{base}\n\n{section}" if section else base


def with_tool_skills(injected: list[Skill], offered: set[str]) -> list[Skill]:
    """`injected` with each tool skill added where its tools are offered, dropped where not."""
    available = load_skills()
    out = list(injected)
    for name, prefix in TOOL_SKILLS.items():
        offers = any(tool.startswith(prefix) for tool in offered)
        out = [s for s in out if s.name != name or offers]
        if offers and name in available and all(s.name != name for s in out):
            out.append(available[name])
    return out


def with_experiences(
    trace: Trace,
    messages: list[dict[str, Any]],
    config: RunConfig,
    *,
    utility_call: Callable[..., Any],
    emit: Callable[[str, dict[str, Any]], None],
) -> list[dict[str, Any]]:
    """`messages` with the top experiences appended to the first user message."""
    if not config.enable_memory:
        return messages
    retrieval = retrieve_for_task(
        trace.task or "",
        utility_call=utility_call,
        agent_type=config.agent_type,
        user_id=trace.owner_id,
        codes=config.experiences,
    )
    if retrieval is None:
        return messages
    trace.context = {**(trace.context or {}), MEMORY_CONTEXT: retrieval.as_context()}
    emit("experiences_retrieved", retrieval.as_context())
    if not retrieval.experiences:
        return messages
    block = format_experiences(retrieval.experiences)
    out = list(messages)
    index = next(i for i, m in enumerate(out) if m["role"] == "user")
    first = dict(out[index])
    content = first.get("content")
    if isinstance(content, list):
        first["content"] = [*content, {"type": "text", "text": block}]
    else:
        first["content"] = f"{content}\n\n{block}"
    out[index] = first
    return out
