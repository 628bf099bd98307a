"""Project workspaces and AGENTS.md (M9): placement, confinement, the project
context in the system prompt, kept current and out of compaction."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.scripted_llm import Reply, ToolCall
from tests.traces.test_compaction import LIMIT, big_output, is_compact_request
from traces.checks import projects_are_usable
from traces.models import Trace, TraceEvent, UserAgents
from traces.projects import Project, problem
from traces.runner import InvalidRun, RunConfig

pytestmark = pytest.mark.django_db


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def system_prompt(request: Any) -> str:
    first = request.messages[0]
    assert first["role"] == "system"
    return str(first["content"])


def tool_results(request: Any) -> list[str]:
    return [str(m.get("content")) for m in request.messages if m["role"] == "tool"]


@pytest.fixture
def shop(tmp_path: Path, settings: Any) -> Path:
    """A project "shop" (read-only) with a backend directory; "lab" is writable."""
    root = tmp_path / "srv" / "shop"
    (root / "backend").mkdir(parents=True)
    (root / "backend" / "app.py").write_text("print('shop')\n")
    lab = tmp_path / "srv" / "lab"
    lab.mkdir()
    (tmp_path / "srv" / "secret.txt").write_text("outside the project\n")
    settings.AGENT_PROJECTS = {
        "shop": {"path": str(root), "writable": False},
        "lab": {"path": str(lab), "writable": True},
    }
    settings.AGENT_USER_AGENTS_FILE = ""
    return root


def test_layers_run_from_the_root_down_with_local_files_beside_each_then_the_user(
    runner, llm, shop, tmp_path, settings, integrator
):
    (shop / "AGENTS.md").write_text("ROOT rules\n")
    (shop / "AGENTS.local.md").write_text("ROOT local\n")
    (shop / "backend" / "AGENTS.md").write_text("BACKEND rules\n")
    (shop / "backend" / "AGENTS.local.md").write_text("BACKEND local\n")
    deployment = tmp_path / "user-agents.md"
    deployment.write_text("DEPLOYMENT user rules\n")
    settings.AGENT_USER_AGENTS_FILE = str(deployment)
    UserAgents.objects.create(user=integrator, text="OWN user rules")
    llm.script("scripted", ["ok"])

    result = runner.run_result(user("hi"), RunConfig(project="shop/backend", owner_id=integrator.pk))

    prompt = system_prompt(llm.requests_for("scripted")[0])
    order = ["ROOT rules", "ROOT local", "BACKEND rules", "BACKEND local", "DEPLOYMENT user", "OWN user"]
    positions = [prompt.index(text) for text in order]
    assert positions == sorted(positions)
    assert "# Project context" in prompt and "## backend/AGENTS.local.md" in prompt
    stored = Trace.objects.get(pk=result.trace_id)
    assert stored.run_settings["project"] == "shop/backend"
    files = stored.context["project_context"]["files"]
    assert [f["path"] for f in files] == [
        "AGENTS.md",
        "AGENTS.local.md",
        "backend/AGENTS.md",
        "backend/AGENTS.local.md",
        str(deployment),
        "your own AGENTS text (portal)",
    ]


def test_an_agents_md_edited_between_calls_reaches_the_next_request_with_an_event(runner, llm, shop):
    agents = shop / "backend" / "AGENTS.md"
    agents.write_text("Use tabs.\n")

    def edit_then_call(body: dict[str, Any]) -> Reply:
        agents.write_text("Use four spaces.\n")
        return Reply(tool_calls=[ToolCall("read", {"path": "app.py"})])

    llm.script("scripted", [edit_then_call, "done"])

    result = runner.run_result(user("look"), RunConfig(project="shop/backend", tools=["read"]))

    first, second = llm.requests_for("scripted")
    assert "Use tabs." in system_prompt(first) and "four spaces" not in system_prompt(first)
    assert "Use four spaces." in system_prompt(second) and "Use tabs." not in system_prompt(second)
    events = TraceEvent.objects.filter(trace_id=result.trace_id, type="project_context_changed")
    assert events.count() == 2  # the first load, then the edit
    assert events.last().payload["files"][0]["path"] == "backend/AGENTS.md"


def test_a_run_without_a_project_reads_its_workspace_agents_md_and_sees_its_own_write(runner, llm):
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("write", {"path": "AGENTS.md", "content": "Answer in French.\n"})]),
            "fini",
        ],
    )

    result = runner.run_result(user("set a rule"), RunConfig(tools=["write"]))

    first, second = llm.requests_for("scripted")
    assert "Project context" not in system_prompt(first)
    assert "Answer in French." in system_prompt(second)
    assert TraceEvent.objects.filter(trace_id=result.trace_id, type="project_context_changed").count() == 1


def test_a_read_only_project_reads_but_refuses_writes(runner, llm, shop):
    llm.script(
        "scripted",
        [
            Reply(
                tool_calls=[
                    ToolCall("read", {"path": "app.py"}),
                    ToolCall("write", {"path": "new.py", "content": "x"}),
                    ToolCall("edit", {"path": "app.py", "old_string": "shop", "new_string": "mall"}),
                ]
            ),
            "done",
        ],
    )

    runner.run_result(user("change it"), RunConfig(project="shop/backend", tools=["read", "write", "edit"]))

    read, write, edit = tool_results(llm.requests_for("scripted")[1])
    assert "print('shop')" in read
    assert "'shop/backend', which is read-only" in write and "read-only" in edit
    assert not (shop / "backend" / "new.py").exists()
    assert (shop / "backend" / "app.py").read_text() == "print('shop')\n"


def test_a_writable_project_takes_writes(runner, llm, shop):
    llm.script(
        "scripted", [Reply(tool_calls=[ToolCall("write", {"path": "notes.md", "content": "hi"})]), "ok"]
    )

    runner.run_result(user("note"), RunConfig(project="lab", tools=["write"]))

    assert (shop.parent / "lab" / "notes.md").read_text() == "hi"


def test_bash_sees_the_project_at_its_workspace_path_read_only_and_nothing_outside(runner, llm, shop):
    workspace = shop / "backend"
    command = f"pwd; cat app.py; ls {shop.parent}; cat {shop.parent}/secret.txt; touch made.txt"
    llm.script("scripted", [Reply(tool_calls=[ToolCall("bash", {"command": command})]), "done"])

    runner.run_result(user("look"), RunConfig(project="shop/backend", tools=["bash"]))

    (output,) = tool_results(llm.requests_for("scripted")[1])
    assert str(workspace) in output and "print('shop')" in output
    assert "No such file or directory" in output and "outside the project" not in output
    assert "Read-only file system" in output and not (workspace / "made.txt").exists()


def test_an_unknown_project_is_refused_naming_the_known_ones(runner, shop):
    with pytest.raises(InvalidRun, match=r"project: unknown project 'nope'; known: lab, shop"):
        runner.run_result(user("x"), RunConfig(project="nope"))
    with pytest.raises(InvalidRun, match="not a directory inside project 'shop'"):
        runner.run_result(user("x"), RunConfig(project="shop/../lab"))


def test_a_preset_names_the_project_of_its_runs(runner, llm, shop):
    from memory.models import AgentPreset

    AgentPreset.objects.create(name="shopper", extra={"project": "shop"})
    llm.script("scripted", ["ok"])

    result = runner.run_result(user("x"), RunConfig(agent_type="shopper"))

    assert Trace.objects.get(pk=result.trace_id).run_settings["project"] == "shop"


def test_compaction_never_summarises_the_project_context(runner, llm, shop, settings):
    settings.AGENT_CONTEXT_TOKENS = LIMIT
    settings.AGENT_COMPACTION_REFLECT = False
    (shop.parent / "lab" / "AGENTS.md").write_text("LAB RULE: be brief.\n")
    replies = [Reply(tool_calls=[big_output(i)]) for i in range(8)]

    def answer(body: dict[str, Any]) -> Reply:
        if is_compact_request(body):
            return Reply(text="1. Primary request: print digits.")
        return replies.pop(0) if replies else Reply(text="finished")

    llm.script("scripted", [answer] * 40)

    result = runner.run_result(user("print big digits"), RunConfig(project="lab", stream=False))

    assert result.status == "completed"
    requests = llm.requests_for("scripted")
    compacts = [r for r in requests if is_compact_request(r.body)]
    calls = [r for r in requests if not is_compact_request(r.body)]
    assert compacts and all("LAB RULE" not in str(r.messages) for r in compacts)
    assert all("LAB RULE: be brief." in system_prompt(r) for r in calls)
    assert TraceEvent.objects.filter(trace_id=result.trace_id, type="compaction", payload__level=2).exists()


# --- start-up checks -----------------------------------------------------------------


def check_messages() -> list[str]:
    return [m.msg for m in projects_are_usable()]


def test_startup_names_a_missing_project_directory(settings, tmp_path):
    settings.AGENT_PROJECTS = {"gone": {"path": str(tmp_path / "gone"), "writable": False}}
    (message,) = check_messages()
    assert "'gone'" in message and "is not a directory" in message


def test_startup_refuses_a_project_holding_the_server_its_database_or_workspaces(
    settings, tmp_path, workspace_root
):
    base = Path(settings.BASE_DIR)
    settings.AGENT_PROJECTS = {"all": {"path": str(base.parent), "writable": False}}
    assert "overlaps the server's own checkout" in check_messages()[0]
    settings.AGENT_PROJECTS = {"mine": {"path": str(settings.AGENT_WORKSPACE_ROOT), "writable": False}}
    Path(settings.AGENT_WORKSPACE_ROOT).mkdir(parents=True, exist_ok=True)
    assert "overlaps the trace workspaces" in check_messages()[0]
    data = tmp_path / "data"
    data.mkdir()
    project = Project("data", data, writable=False)
    assert "contains the database" in (problem(project, databases=[data / "db.sqlite3"]) or "")
    assert problem(project, databases=[tmp_path / "db.sqlite3"]) is None


def test_startup_accepts_a_project_of_its_own(settings, shop):
    assert check_messages() == []


# --- the corners: sub-agents, bash without a sandbox, oversized results, the cap ----------


def test_a_sub_agent_works_in_its_parents_project_workspace(runner, llm, shop):
    (shop / "backend" / "AGENTS.md").write_text("BACKEND rules\n")
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("agent", {"task": "what does app.py print?"})]),
            Reply(tool_calls=[ToolCall("read", {"path": "app.py"})]),  # the child
            "it prints shop",  # the child's answer
            "shop",
        ],
    )

    parent = runner.run_result(
        user("ask a helper"), RunConfig(project="shop/backend", tools=["agent", "read"])
    )

    child = Trace.objects.get(parent_trace_id=parent.trace_id)
    assert child.run_settings["project"] == "shop/backend"
    _, child_first, child_second, _ = llm.requests_for("scripted")
    assert "BACKEND rules" in system_prompt(child_first)
    assert "print('shop')" in tool_results(child_second)[0]


def test_bash_is_refused_in_a_read_only_project_when_the_sandbox_is_off(runner, llm, shop, settings):
    settings.AGENT_SANDBOX = False
    llm.script("scripted", [Reply(tool_calls=[ToolCall("bash", {"command": "touch made.txt"})]), "ok"])

    runner.run_result(user("touch"), RunConfig(project="shop/backend", tools=["bash"]))

    (output,) = tool_results(llm.requests_for("scripted")[1])
    assert "The sandbox is off on this server (AGENT_SANDBOX)" in output and "commands are refused" in output
    assert not (shop / "backend" / "made.txt").exists()


def test_an_oversized_result_in_a_read_only_project_is_cut_not_spilled(runner, llm, shop, settings):
    settings.AGENT_TOOL_SPILL_CHARS = 2_000
    settings.AGENT_TOOL_SPILL_PREVIEW = 300
    (shop / "backend" / "big.txt").write_text("".join(f"line {i}\n" for i in range(1_000)))
    llm.script("scripted", [Reply(tool_calls=[ToolCall("read", {"path": "big.txt"})]), "ok"])

    runner.run_result(user("read it"), RunConfig(project="shop/backend", tools=["read"]))

    (output,) = tool_results(llm.requests_for("scripted")[1])
    assert "only the first 300 kept; the workspace is read-only, so the rest was not saved" in output
    assert "line 0" in output and "line 999" not in output
    assert not list(shop.rglob(".agentsite"))


def test_the_context_over_the_cap_ends_with_a_note_naming_what_was_cut(runner, llm, shop, settings):
    settings.AGENT_PROJECT_CONTEXT_MAX_CHARS = 1_000
    (shop / "AGENTS.md").write_text("ROOT " * 60)
    (shop / "backend" / "AGENTS.md").write_text("BACKEND " * 250)
    (shop / "backend" / "AGENTS.local.md").write_text("LOCAL rules\n")
    llm.script("scripted", ["ok"])

    result = runner.run_result(user("hi"), RunConfig(project="shop/backend"))

    stored = Trace.objects.get(pk=result.trace_id).context["project_context"]
    assert [f["included"] for f in stored["files"]] == ["whole", "partly", "no"]
    note = (
        f"[project context truncated: {stored['truncated']:,} characters left out (limit 1,000, "
        "AGENT_PROJECT_CONTEXT_MAX_CHARS), from: backend/AGENTS.md, backend/AGENTS.local.md]"
    )
    prompt = system_prompt(llm.requests_for("scripted")[0])
    assert prompt.endswith(note) and "LOCAL rules" not in prompt
    assert len(stored["text"]) == 1_000 + len("\n\n") + len(note)
