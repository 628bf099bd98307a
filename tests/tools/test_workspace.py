from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.tools.conftest import RunTool
from tools.workspace import resolve_in_workspace, truncate_output
from traces.runner.tool_api import ToolError, workspace_for


def test_relative_path_resolves_to_real_path_inside_workspace(workspace: Path) -> None:
    (workspace / "src").mkdir()

    assert resolve_in_workspace(workspace, "src/app.py") == workspace.resolve() / "src" / "app.py"


def test_dotdot_that_stays_inside_workspace_is_allowed(workspace: Path) -> None:
    assert resolve_in_workspace(workspace, "a/../b.txt") == workspace.resolve() / "b.txt"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("../outside/secret.txt", "leaves the workspace through '..'; refused"),
        ("src/../../outside/secret.txt", "leaves the workspace through '..'; refused"),
        ("..", "leaves the workspace through '..'; refused"),
        ("/etc/passwd", "is absolute; refused"),
        ("notes\x00.txt", "contains a NUL byte; refused"),
        ("  ", "Path is empty"),
    ],
)
def test_unsafe_paths_are_refused_with_a_clear_message(workspace: Path, path: str, message: str) -> None:
    with pytest.raises(ToolError, match=re.escape(message)):
        resolve_in_workspace(workspace, path)


def test_symlink_pointing_outside_is_refused(workspace: Path, outside: Path) -> None:
    (workspace / "link.txt").symlink_to(outside / "secret.txt")

    with pytest.raises(ToolError, match="resolves outside the workspace through a symlink; refused"):
        resolve_in_workspace(workspace, "link.txt")


def test_path_under_symlinked_directory_pointing_outside_is_refused(workspace: Path, outside: Path) -> None:
    (workspace / "escape").symlink_to(outside, target_is_directory=True)

    with pytest.raises(ToolError, match="outside the workspace through a symlink"):
        resolve_in_workspace(workspace, "escape/new-file.txt")


def test_symlink_inside_workspace_is_followed(workspace: Path) -> None:
    (workspace / "real.txt").write_text("hi\n")
    (workspace / "alias.txt").symlink_to("real.txt")

    assert resolve_in_workspace(workspace, "alias.txt") == workspace.resolve() / "real.txt"


def test_symlink_loop_is_refused_not_crashing(workspace: Path) -> None:
    (workspace / "loop").symlink_to("loop")

    with pytest.raises(ToolError):
        resolve_in_workspace(workspace, "loop/file.txt", must_exist=True)


def test_missing_path_is_refused_only_when_it_must_exist(workspace: Path) -> None:
    assert resolve_in_workspace(workspace, "new.txt") == workspace.resolve() / "new.txt"
    with pytest.raises(ToolError, match="'new.txt' does not exist in the workspace"):
        resolve_in_workspace(workspace, "new.txt", must_exist=True)


def test_workspace_itself_may_be_reached_through_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real-workspace"
    real.mkdir()
    (tmp_path / "ws-link").symlink_to(real, target_is_directory=True)

    assert resolve_in_workspace(tmp_path / "ws-link", "a.txt") == real.resolve() / "a.txt"


@pytest.mark.parametrize(
    ("path", "tool", "arguments"),
    [
        ("../outside/secret.txt", "read", {}),
        ("/etc/passwd", "read", {}),
        ("link/secret.txt", "read", {}),
        ("../outside/new.txt", "write", {"content": "x"}),
        ("link/new.txt", "write", {"content": "x"}),
        ("link/secret.txt", "edit", {"old_string": "top", "new_string": "bottom"}),
        ("..", "list_files", {}),
        ("link", "grep", {"pattern": "secret"}),
        ("link", "glob", {"pattern": "*"}),
    ],
)
def test_every_file_tool_refuses_paths_outside_the_workspace(
    run_tool: RunTool, workspace: Path, outside: Path, path: str, tool: str, arguments: dict[str, str]
) -> None:
    (workspace / "link").symlink_to(outside, target_is_directory=True)

    result = run_tool(tool, {"path": path, **arguments})

    assert result.is_error
    assert result.output.startswith(f"{tool} failed: Path {path!r}")
    assert "refused" in result.output
    assert "top secret" not in result.output
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "top secret\n"


def test_nul_byte_in_path_is_refused_through_the_registry(run_tool: RunTool) -> None:
    result = run_tool("write", {"path": "a\x00b", "content": "x"})

    assert result.is_error
    assert "contains a NUL byte; refused" in result.output


def test_workspace_for_creates_a_directory_per_root_trace(settings, tmp_path: Path) -> None:
    settings.AGENT_WORKSPACE_ROOT = tmp_path / "workspaces"

    directory = workspace_for("abc123")

    assert directory == (tmp_path / "workspaces" / "abc123").resolve()
    assert directory.is_dir()


def test_delegated_sub_traces_share_the_root_trace_workspace(settings, tmp_path: Path) -> None:
    settings.AGENT_WORKSPACE_ROOT = tmp_path

    assert workspace_for("abc123@delegate-1") == workspace_for("abc123")
    assert workspace_for("abc123@delegate-1@delegate-2") == workspace_for("abc123")


@pytest.mark.parametrize("trace_id", ["../../etc", "..", "a/b", "a b", ".hidden", "x" * 300])
def test_workspace_for_makes_unsafe_ids_into_a_single_safe_directory(
    settings, tmp_path: Path, trace_id: str
) -> None:
    settings.AGENT_WORKSPACE_ROOT = tmp_path

    directory = workspace_for(trace_id)

    assert directory.parent == tmp_path.resolve()
    assert not directory.name.startswith(".")
    assert len(directory.name) <= 100


def test_workspace_for_keeps_ids_that_sanitize_alike_apart(settings, tmp_path: Path) -> None:
    settings.AGENT_WORKSPACE_ROOT = tmp_path

    assert workspace_for("a/b") != workspace_for("a_b")
    assert workspace_for("a/b") != workspace_for("a b")


def test_workspace_for_rejects_an_id_without_root_part(settings, tmp_path: Path) -> None:
    settings.AGENT_WORKSPACE_ROOT = tmp_path

    with pytest.raises(ValueError):
        workspace_for("@delegate-1")


def test_truncate_output_leaves_short_text_alone() -> None:
    assert truncate_output("short", limit=10) == "short"


def test_truncate_output_cuts_to_the_limit_and_says_how_much_was_cut(settings) -> None:
    settings.AGENT_TOOL_OUTPUT_LIMIT = 1000

    text = truncate_output("a" * 1500)

    assert text == "a" * 1000 + "\n[truncated: 500 more characters]"
