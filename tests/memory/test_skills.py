"""Skills (M6): files, the system prompt (call site > preset > all), the skill tool, the API."""

from __future__ import annotations

import pytest

from memory.presets import AGENT_PRESETS, Preset
from memory.skills import load_skills, parse_skill, skills_for_prompt
from tests.scripted_llm import Reply, ToolCall
from traces.runner import InvalidRun, RunConfig

pytestmark = pytest.mark.django_db


def write_skill(directory, name, description="does things", body="Do the thing.", folder=False):
    path = directory / name / "SKILL.md" if folder else directory / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\ndescription: {description}\n---\n{body}\n", encoding="utf-8")
    return path


def system_prompt(llm) -> str:
    return llm.requests_for("scripted")[0].messages[0]["content"]


def test_builtins_project_and_user_skills_load(skills_dirs):
    project, user = skills_dirs
    write_skill(project, "deploy", folder=True)
    write_skill(user, "mine")
    write_skill(user, "planning", description="user override")
    (project / "broken.md").write_text("no front matter", encoding="utf-8")

    skills = load_skills()

    assert {"planning", "research", "files", "shell"} <= set(skills)
    assert skills["deploy"].source == "project" and skills["deploy"].body == "Do the thing."
    assert skills["mine"].source == "user"
    assert skills["planning"].description == "user override"
    assert "broken" not in skills


def test_every_builtin_skill_has_a_name_and_description():
    from memory.skills import BUILTIN_DIR

    for path in BUILTIN_DIR.glob("*.md"):
        skill = parse_skill(path, "builtin")
        assert skill.name == path.stem and skill.description and skill.body


def test_default_preset_injects_its_skills_and_lists_the_others(runner, llm, skills_dirs):
    write_skill(skills_dirs[0], "deploy", description="ship a release")
    llm.script("scripted", ["ok"])

    runner.run_result([{"role": "user", "content": "x"}], RunConfig(name="n"))

    prompt = system_prompt(llm)
    assert "## Skill: planning" in prompt and "## Skill: research" in prompt
    assert "## Skill: shell" not in prompt
    assert "- deploy: ship a release" in prompt and "- shell: " in prompt


def test_call_site_skills_win_over_the_preset(runner, llm, skills_dirs):
    write_skill(skills_dirs[0], "deploy", body="Tag, build, push.")
    llm.script("scripted", ["ok"])

    runner.run_result([{"role": "user", "content": "x"}], RunConfig(name="n", skills=["shell", "deploy"]))

    prompt = system_prompt(llm)
    assert "## Skill: shell" in prompt and "## Skill: deploy\n\nTag, build, push." in prompt
    assert "## Skill: planning" not in prompt


def test_a_preset_without_skills_gets_every_builtin(runner, llm, skills_dirs, monkeypatch):
    monkeypatch.setitem(AGENT_PRESETS, "all-skills", Preset(skills=None, max_iterations=3))
    llm.script("scripted", ["ok"])

    runner.run_result([{"role": "user", "content": "x"}], RunConfig(name="n", agent_type="all-skills"))

    prompt = system_prompt(llm)
    assert all(f"## Skill: {n}" in prompt for n in ("files", "planning", "research", "shell"))
    assert skills_for_prompt(None, []) == []


def test_an_unknown_call_site_skill_is_refused_before_anything_is_stored(runner, llm, skills_dirs):
    from traces.models import Trace

    with pytest.raises(InvalidRun, match="unknown skill"):
        runner.run_result([{"role": "user", "content": "x"}], RunConfig(name="n", skills=["nope"]))
    assert not Trace.objects.exists()


def test_the_skill_tool_loads_a_skill_by_name(runner, llm, skills_dirs):
    write_skill(skills_dirs[1], "mine", body="Secret sauce steps.")
    llm.script(
        "scripted",
        [Reply(tool_calls=[ToolCall("skill", {"name": "mine"}), ToolCall("skill", {"name": "nope"})]), "ok"],
    )

    runner.run_result([{"role": "user", "content": "x"}], RunConfig(name="n"))

    tools = [m for m in llm.requests_for("scripted")[1].messages if m["role"] == "tool"]
    assert "Secret sauce steps." in tools[0]["content"]
    assert "unknown skill 'nope'" in tools[1]["content"]


def test_skills_api(api_client, integrator, skills_dirs):
    write_skill(skills_dirs[0], "deploy", description="ship it", body="Steps.")
    client = api_client(integrator)

    listing = client.get("/api/skills").json()
    assert {"name": "deploy", "description": "ship it", "source": "project"} in listing
    assert [s["name"] for s in listing] == sorted(s["name"] for s in listing)
    assert client.get("/api/skills/deploy").json()["body"] == "Steps."
    assert client.get("/api/skills/nope").status_code == 404
    assert api_client().get("/api/skills").status_code == 401


def test_the_browser_skill_comes_where_the_browser_tools_are_offered():
    from memory.injection import with_tool_skills
    from memory.skills import load_skills

    skills = load_skills()
    planning = [skills["planning"]]
    offered = {"read", "browser_open", "browser_act"}
    assert [s.name for s in with_tool_skills(planning, offered)] == ["planning", "browser"]
    assert [s.name for s in with_tool_skills(planning, {"read"})] == ["planning"]
    # a preset naming it does not bring it to a run without the tools
    assert [s.name for s in with_tool_skills([*planning, skills["browser"]], {"read"})] == ["planning"]
