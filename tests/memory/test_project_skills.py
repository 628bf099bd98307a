"""Skills from the project (seed 003 `.reson/skills`): `.agentsite/skills/` inside a run's
project, at its root and in the sub-directory it works in, in the prompt and for the skill tool."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memory.skills import load_skills, project_skill_dirs
from tests.memory.test_skills import system_prompt, write_skill
from tests.scripted_llm import Reply, ToolCall
from traces.runner import RunConfig

pytestmark = pytest.mark.django_db


@pytest.fixture
def shop(tmp_path: Path, settings: Any, skills_dirs: Any) -> Path:
    """Project "shop" (read-only) with skills at its root and in backend/."""
    root = tmp_path / "srv" / "shop"
    (root / "backend").mkdir(parents=True)
    settings.AGENT_PROJECTS = {"shop": {"path": str(root), "writable": False}}
    settings.AGENT_USER_AGENTS_FILE = ""
    write_skill(
        root / ".agentsite" / "skills", "release", description="how shop releases", body="Tag, then ship."
    )
    write_skill(root / ".agentsite" / "skills", "style", description="root style", body="Root style.")
    write_skill(
        root / "backend" / ".agentsite" / "skills",
        "style",
        description="backend style",
        body="Backend style.",
        folder=True,
    )
    write_skill(skills_dirs[0], "release", description="deployment-wide release", body="Deployment release.")
    return root


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def test_a_project_run_lists_its_projects_skills_and_the_skill_tool_loads_them(runner, llm, shop):
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("skill", {"name": "release"}), ToolCall("skill", {"name": "style"})]),
            "ok",
        ],
    )

    runner.run_result(user("ship it"), RunConfig(project="shop/backend"))

    prompt = system_prompt(llm)
    assert "- release: how shop releases" in prompt  # the project's skill over the deployment's
    assert "- style: backend style" in prompt  # the workspace's over the project root's
    results = [m["content"] for m in llm.requests_for("scripted")[1].messages if m["role"] == "tool"]
    assert "Tag, then ship." in results[0] and "Backend style." in results[1]


def test_a_call_site_may_inject_a_project_skill(runner, llm, shop):
    runner.run_result(user("ship it"), RunConfig(project="shop", skills=["style"]))
    prompt = system_prompt(llm)
    assert "## Skill: style\n\nRoot style." in prompt


def test_a_run_without_a_project_sees_no_workspace_skills(runner, llm, shop, workspace_root):
    llm.script("scripted", [Reply(tool_calls=[ToolCall("skill", {"name": "style"})]), "ok"])

    runner.run_result(user("style?"), RunConfig())

    assert "- style:" not in system_prompt(llm)
    tool = [m["content"] for m in llm.requests_for("scripted")[1].messages if m["role"] == "tool"]
    assert "unknown skill 'style'" in tool[0]
    assert load_skills()["release"].source == "project"


def test_a_skill_file_linking_outside_its_folder_is_skipped(shop, tmp_path):
    outside = tmp_path / "secret.md"
    outside.write_text("---\nname: secret\ndescription: x\n---\nThe server's secret.\n", encoding="utf-8")
    (shop / ".agentsite" / "skills" / "secret.md").symlink_to(outside)

    skills = load_skills(project_skill_dirs(shop, shop / "backend"))

    assert "secret" not in skills
    assert skills["style"].source == "workspace" and skills["style"].body == "Backend style."
