from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import tools.builtin.glob as glob_module
import tools.builtin.grep as grep_module
import tools.builtin.list_files as list_files_module
from tests.tools.conftest import BUILTIN_TOOLS, RunTool
from tools.registry import default_registry


def write_lines(path: Path, count: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"line {n}\n" for n in range(1, count + 1)))


# read


def test_read_numbers_every_line(run_tool: RunTool, workspace: Path) -> None:
    (workspace / "notes.txt").write_text("alpha\nbeta\n")

    result = run_tool("read", {"path": "notes.txt"})

    assert not result.is_error
    assert result.title == "Read notes.txt (lines 1-2 of 2)"
    assert result.output == "     1\talpha\n     2\tbeta"


def test_read_pages_through_long_files_and_says_where_to_continue(run_tool: RunTool, workspace: Path) -> None:
    write_lines(workspace / "long.txt", 50)

    result = run_tool("read", {"path": "long.txt", "offset": 11, "limit": 5})

    assert result.title == "Read long.txt (lines 11-15 of 50)"
    assert result.output.splitlines()[:5] == [f"    {n}\tline {n}" for n in range(11, 16)]
    assert "(Showing lines 11-15 of 50. Use offset=16 to read more.)" in result.output


def test_read_reports_total_lines_on_the_last_page(run_tool: RunTool, workspace: Path) -> None:
    write_lines(workspace / "long.txt", 12)

    result = run_tool("read", {"path": "long.txt", "offset": 10})

    assert result.output.endswith("(Showing lines 10-12 of 12.)")


def test_read_offset_past_the_end_is_a_clear_error(run_tool: RunTool, workspace: Path) -> None:
    write_lines(workspace / "short.txt", 3)

    result = run_tool("read", {"path": "short.txt", "offset": 10})

    assert result.is_error
    assert "offset 10 is past the end of short.txt, which has 3 lines" in result.output


def test_read_refuses_binary_files(run_tool: RunTool, workspace: Path) -> None:
    (workspace / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")

    result = run_tool("read", {"path": "image.png"})

    assert result.is_error
    assert "image.png looks like a binary file" in result.output


def test_read_refuses_directories_and_missing_files(run_tool: RunTool, workspace: Path) -> None:
    (workspace / "src").mkdir()

    assert "src is a directory; use list_files" in run_tool("read", {"path": "src"}).output
    assert "'nope.txt' does not exist in the workspace" in run_tool("read", {"path": "nope.txt"}).output


def test_read_of_an_empty_file_says_so(run_tool: RunTool, workspace: Path) -> None:
    (workspace / "empty.txt").write_text("")

    assert run_tool("read", {"path": "empty.txt"}).title == "Read empty.txt (empty file)"


def test_read_cuts_very_long_lines(run_tool: RunTool, workspace: Path) -> None:
    (workspace / "wide.txt").write_text("x" * 2500 + "\n")

    result = run_tool("read", {"path": "wide.txt"})

    assert "[line cut: 500 more characters]" in result.output


# write


def test_write_creates_the_file_and_missing_parent_directories(run_tool: RunTool, workspace: Path) -> None:
    result = run_tool("write", {"path": "src/pkg/app.py", "content": "print('hi')\n"})

    assert not result.is_error
    assert result.title == "Created src/pkg/app.py (1 lines, 12 bytes)"
    assert (workspace / "src" / "pkg" / "app.py").read_text() == "print('hi')\n"


def test_write_overwrites_an_existing_file_exactly(run_tool: RunTool, workspace: Path) -> None:
    (workspace / "a.txt").write_text("old\n")

    result = run_tool("write", {"path": "a.txt", "content": "new\r\nno final newline"})

    assert result.title.startswith("Overwrote a.txt")
    assert (workspace / "a.txt").read_bytes() == b"new\r\nno final newline"


def test_write_refuses_to_replace_a_directory(run_tool: RunTool, workspace: Path) -> None:
    (workspace / "src").mkdir()

    result = run_tool("write", {"path": "src", "content": "x"})

    assert result.is_error
    assert "src is a directory" in result.output


# edit


def test_edit_replaces_a_unique_match_and_shows_the_result(run_tool: RunTool, workspace: Path) -> None:
    (workspace / "app.py").write_text("def f():\n    return 1\n\n\ndef g():\n    return 2\n")

    result = run_tool("edit", {"path": "app.py", "old_string": "return 1", "new_string": "return 10"})

    assert not result.is_error
    assert result.title == "Edited app.py (1 replacement)"
    assert "     2\t    return 10" in result.output
    assert (workspace / "app.py").read_text() == "def f():\n    return 10\n\n\ndef g():\n    return 2\n"


def test_edit_that_finds_nothing_changes_nothing(run_tool: RunTool, workspace: Path) -> None:
    (workspace / "app.py").write_text("x = 1\n")

    result = run_tool("edit", {"path": "app.py", "old_string": "x = 2", "new_string": "x = 3"})

    assert result.is_error
    assert "old_string was not found in app.py" in result.output
    assert (workspace / "app.py").read_text() == "x = 1\n"


def test_edit_with_an_ambiguous_match_says_how_many(run_tool: RunTool, workspace: Path) -> None:
    (workspace / "app.py").write_text("x = 1\nx = 1\nx = 1\n")

    result = run_tool("edit", {"path": "app.py", "old_string": "x = 1", "new_string": "x = 2"})

    assert result.is_error
    assert "old_string matches 3 places in app.py" in result.output
    assert "replace_all" in result.output
    assert (workspace / "app.py").read_text() == "x = 1\nx = 1\nx = 1\n"


def test_edit_replace_all_replaces_every_occurrence(run_tool: RunTool, workspace: Path) -> None:
    (workspace / "app.py").write_text("x = 1\nx = 1\n")

    result = run_tool(
        "edit", {"path": "app.py", "old_string": "x = 1", "new_string": "x = 2", "replace_all": True}
    )

    assert result.title == "Edited app.py (2 replacements)"
    assert (workspace / "app.py").read_text() == "x = 2\nx = 2\n"


def test_edit_matches_files_with_windows_line_endings(run_tool: RunTool, workspace: Path) -> None:
    (workspace / "win.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")

    result = run_tool("edit", {"path": "win.txt", "old_string": "one\ntwo", "new_string": "1\n2"})

    assert not result.is_error
    assert (workspace / "win.txt").read_bytes() == b"1\r\n2\r\nthree\r\n"


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [("", "x", "old_string is empty"), ("same", "same", "old_string and new_string are identical")],
)
def test_edit_rejects_pointless_replacements(
    run_tool: RunTool, workspace: Path, old: str, new: str, message: str
) -> None:
    (workspace / "a.txt").write_text("same\n")

    result = run_tool("edit", {"path": "a.txt", "old_string": old, "new_string": new})

    assert result.is_error
    assert message in result.output


# glob


@pytest.fixture
def project(workspace: Path) -> Path:
    for name in ["README.md", "src/app.py", "src/pkg/models.py", "src/pkg/view.ts", "docs/guide.md"]:
        path = workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {name}\nTODO: document {name}\n")
    (workspace / ".git").mkdir()
    (workspace / ".git" / "config.py").write_text("TODO: hidden\n")
    return workspace


def test_glob_matches_recursively_and_sorts(run_tool: RunTool, project: Path) -> None:
    result = run_tool("glob", {"pattern": "**/*.py"})

    assert result.output.splitlines() == ["src/app.py", "src/pkg/models.py"]
    assert result.title == "glob '**/*.py' in .: 2 matches"


def test_glob_star_stays_within_one_directory_level(run_tool: RunTool, project: Path) -> None:
    assert run_tool("glob", {"pattern": "*"}).output.splitlines() == ["README.md", "docs/", "src/"]


def test_glob_under_a_path_gives_workspace_relative_results(run_tool: RunTool, project: Path) -> None:
    result = run_tool("glob", {"pattern": "*.{py,ts}", "path": "src/pkg"})

    assert result.output.splitlines() == ["src/pkg/models.py", "src/pkg/view.ts"]


def test_glob_without_matches_is_not_an_error(run_tool: RunTool, project: Path) -> None:
    result = run_tool("glob", {"pattern": "*.rs"})

    assert not result.is_error
    assert result.output == "No files matched."


@pytest.mark.parametrize("pattern", ["../*", "src/../../*", "/etc/*", "**/../outside/*"])
def test_glob_refuses_patterns_that_leave_the_search_directory(run_tool: RunTool, pattern: str) -> None:
    result = run_tool("glob", {"pattern": pattern})

    assert result.is_error
    assert f"Pattern {pattern!r} points outside the search directory; refused" in result.output


def test_glob_does_not_list_symlinks_leading_outside(
    run_tool: RunTool, workspace: Path, outside: Path
) -> None:
    (workspace / "inside.txt").write_text("ok\n")
    (workspace / "leak.txt").symlink_to(outside / "secret.txt")
    (workspace / "leakdir").symlink_to(outside, target_is_directory=True)

    assert run_tool("glob", {"pattern": "**/*"}).output.splitlines() == ["inside.txt"]


def test_glob_caps_the_number_of_results(
    run_tool: RunTool, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(glob_module, "MAX_MATCHES", 3)
    for n in range(5):
        (workspace / f"f{n}.txt").write_text("")

    result = run_tool("glob", {"pattern": "*.txt"})

    assert result.output.splitlines() == [
        "f0.txt",
        "f1.txt",
        "f2.txt",
        "[2 more matches not shown; use a narrower pattern or path]",
    ]
    assert result.title.endswith("5 matches")


# grep


def test_grep_reports_file_line_and_text(run_tool: RunTool, project: Path) -> None:
    result = run_tool("grep", {"pattern": r"TODO: document [\w/]+\.py$"})

    assert result.output.splitlines() == [
        "src/app.py:2:TODO: document src/app.py",
        "src/pkg/models.py:2:TODO: document src/pkg/models.py",
    ]
    assert result.title.endswith(": 2 matches in 2 files")


def test_grep_filters_files_with_include_and_can_ignore_case(run_tool: RunTool, project: Path) -> None:
    result = run_tool("grep", {"pattern": "todo", "path": "src", "include": "*.ts", "ignore_case": True})

    assert result.output == "src/pkg/view.ts:2:TODO: document src/pkg/view.ts"


def test_grep_searches_a_single_file(run_tool: RunTool, project: Path) -> None:
    assert run_tool("grep", {"pattern": "^#", "path": "README.md"}).output == "README.md:1:# README.md"


def test_grep_skips_binary_files_and_ignored_directories(run_tool: RunTool, workspace: Path) -> None:
    (workspace / "blob.bin").write_bytes(b"needle\x00\x01\x02")
    (workspace / ".git").mkdir()
    (workspace / ".git" / "HEAD").write_text("needle\n")
    (workspace / "text.txt").write_text("a needle here\n")

    assert run_tool("grep", {"pattern": "needle"}).output == "text.txt:1:a needle here"


def test_grep_without_matches_is_not_an_error(run_tool: RunTool, project: Path) -> None:
    result = run_tool("grep", {"pattern": "nothing-like-this"})

    assert not result.is_error
    assert result.title == "grep 'nothing-like-this': no matches"


def test_grep_with_an_invalid_regex_explains_the_error(run_tool: RunTool, project: Path) -> None:
    result = run_tool("grep", {"pattern": "def (unclosed"})

    assert result.is_error
    assert "Invalid regular expression 'def (unclosed': missing ), unterminated subpattern" in result.output


def test_grep_caps_the_number_of_matches(
    run_tool: RunTool, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(grep_module, "MAX_MATCHES", 3)
    write_lines(workspace / "many.txt", 10)

    lines = run_tool("grep", {"pattern": "line"}).output.splitlines()

    assert lines == [
        "many.txt:1:line 1",
        "many.txt:2:line 2",
        "many.txt:3:line 3",
        "[stopped after 3 matches; narrow the pattern, path or include]",
    ]


# list_files


def test_list_files_shows_a_tree_with_directories_marked(run_tool: RunTool, project: Path) -> None:
    result = run_tool("list_files", {})

    assert result.output.splitlines() == [
        "./",
        "  .git/ (not expanded)",
        "  docs/",
        "    guide.md",
        "  src/",
        "    pkg/ (2 entries)",
        "    app.py",
        "  README.md",
    ]
    assert result.title == "Listed . (depth 2): 4 directories, 3 files"


def test_list_files_expands_deeper_on_request(run_tool: RunTool, project: Path) -> None:
    result = run_tool("list_files", {"path": "src", "depth": 3})

    assert result.output.splitlines() == ["src/", "  pkg/", "    models.py", "    view.ts", "  app.py"]


def test_list_files_shows_symlinks_without_following_them(
    run_tool: RunTool, workspace: Path, outside: Path
) -> None:
    (workspace / "leak").symlink_to(outside, target_is_directory=True)

    result = run_tool("list_files", {"depth": 5})

    assert result.output.splitlines() == ["./", f"  leak -> {outside}"]


def test_list_files_caps_the_number_of_entries(
    run_tool: RunTool, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(list_files_module, "MAX_ENTRIES", 2)
    for n in range(4):
        (workspace / f"f{n}").write_text("")

    lines = run_tool("list_files", {}).output.splitlines()

    assert lines == [
        "./",
        "  f0",
        "  f1",
        "[listing stopped at 2 entries; list a subdirectory or lower depth]",
    ]


def test_list_files_on_a_file_or_bad_depth_is_a_clear_error(run_tool: RunTool, project: Path) -> None:
    assert "README.md is a file, not a directory" in run_tool("list_files", {"path": "README.md"}).output
    assert "depth must be between 1 and 10, got 0" in run_tool("list_files", {"depth": 0}).output


# registry: how the runner calls these tools


def test_unknown_tool_is_a_clear_error_listing_the_offered_tools(run_tool: RunTool) -> None:
    result = run_tool("delete_everything", {})

    assert result.is_error
    assert result.output.startswith("Unknown tool 'delete_everything'. Available tools: bash, edit, glob")


def test_arguments_that_are_not_json_are_a_clear_error(run_tool: RunTool) -> None:
    result = run_tool("read", '{"path": "a.txt"')

    assert result.is_error
    assert result.output.startswith("Invalid arguments for read: arguments are not valid JSON")


def test_missing_and_unknown_arguments_are_clear_errors(run_tool: RunTool) -> None:
    assert run_tool("edit", {"path": "a.txt"}).output == (
        "Invalid arguments for edit: missing old_string, new_string."
    )
    assert run_tool("read", {"path": "a.txt", "line": 3}).output.startswith(
        "Invalid arguments for read: unknown parameter(s) line; expected path, offset, limit."
    )


def test_a_tool_not_offered_cannot_execute(run_tool: RunTool, workspace: Path) -> None:
    result = run_tool("write", {"path": "a.txt", "content": "x"}, offered={"read", "grep"})

    assert result.is_error
    assert result.output == "Unknown tool 'write'. Available tools: grep, read."
    assert not (workspace / "a.txt").exists()


@pytest.mark.parametrize(
    ("name", "required", "optional", "risk", "read_only"),
    [
        ("read", ["path"], ["offset", "limit"], "safe", True),
        ("write", ["path", "content"], [], "risky", False),
        ("edit", ["path", "old_string", "new_string"], ["replace_all"], "risky", False),
        ("glob", ["pattern"], ["path"], "safe", True),
        ("grep", ["pattern"], ["path", "include", "ignore_case"], "safe", True),
        ("list_files", [], ["path", "depth"], "safe", True),
        ("bash", ["command"], ["timeout"], "risky", False),
        ("webfetch", ["url"], [], "safe", True),
        ("web_search", ["query"], ["max_results"], "safe", True),
    ],
)
def test_tool_schema_has_required_params_and_descriptions(
    name: str, required: list[str], optional: list[str], risk: str, read_only: bool
) -> None:
    tool = default_registry.get(name)
    assert tool is not None
    schema = tool.schema()["function"]
    parameters = schema["parameters"]

    assert schema["name"] == name
    assert len(schema["description"]) > 40
    assert "Args:" not in schema["description"]
    assert parameters.get("required", []) == required
    assert list(parameters["properties"]) == required + optional
    assert "ctx" not in parameters["properties"]
    for param, spec in parameters["properties"].items():
        assert spec.get("type"), f"{name}.{param} has no type"
        assert len(spec.get("description", "")) > 10, f"{name}.{param} has no description"
    assert (tool.risk, tool.read_only) == (risk, read_only)
    json.dumps(tool.schema())


def test_schema_types_and_defaults_follow_the_signature() -> None:
    read_params = default_registry.get("read").parameters["properties"]  # type: ignore[union-attr]
    grep_params = default_registry.get("grep").parameters["properties"]  # type: ignore[union-attr]
    bash_params = default_registry.get("bash").parameters["properties"]  # type: ignore[union-attr]

    assert read_params["offset"] == {
        "type": "integer",
        "description": read_params["offset"]["description"],
    } | {"default": 1}
    assert grep_params["include"]["type"] == "string"
    assert "default" not in grep_params["include"]
    assert grep_params["ignore_case"]["default"] is False
    assert bash_params["timeout"]["type"] == "number"
    assert "ten times" in bash_params["timeout"]["description"]


def test_all_builtin_file_tools_are_registered() -> None:
    assert BUILTIN_TOOLS <= set(default_registry.names())


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("read", {}),
        ("write", {"content": "x"}),
        ("edit", {"old_string": "a", "new_string": "b"}),
    ],
)
def test_file_tools_refuse_named_pipes_instead_of_hanging(
    run_tool: RunTool, workspace: Path, tool: str, arguments: dict[str, str]
) -> None:
    os.mkfifo(workspace / "pipe")

    result = run_tool(tool, {"path": "pipe", **arguments})

    assert result.is_error
    assert "pipe is not a regular file" in result.output
