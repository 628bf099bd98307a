"""The registry: schemas from signatures, arguments checked by pydantic before a tool runs."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any, Literal

import jsonschema
import pytest

from tools.registry import ToolRegistry, build_tool, load_builtin_tools
from traces.runner.tool_api import ToolContext, ToolError, ToolResult

CALLS: list[dict[str, Any]] = []


@pytest.fixture(autouse=True)
def no_calls() -> Iterator[None]:
    CALLS.clear()
    yield
    CALLS.clear()


def sample(
    ctx: ToolContext,
    text: str,
    count: int,
    ratio: float,
    flag: bool,
    names: list[str],
    options: dict,
    mode: Literal["fast", "slow"],
    task: str | list[str],
    note: str | None = None,
    limit: int = 10,
) -> str:
    """Do a sample thing with every kind of parameter.

    Args:
        text: Some text.
        count: How many.
        ratio: A fraction.
        flag: Whether to.
        names: Some names.
        options: Free-form options.
        mode: How fast.
        task: One task, or several.
        note: An optional note.
        limit: At most this many.
    """
    CALLS.append({"text": text, "count": count, "ratio": ratio, "flag": flag, "names": names})
    CALLS[-1].update(options=options, mode=mode, task=task, note=note, limit=limit)
    return "done"


VALID = {
    "text": "hi",
    "count": 2,
    "ratio": 0.5,
    "flag": True,
    "names": ["a"],
    "options": {},
    "mode": "fast",
    "task": "t",
}


def buggy(ctx: ToolContext, path: str) -> str:
    """Fail the way a tool with a bug fails.

    Args:
        path: Any path.
    """
    return "x" + len(path)  # type: ignore[operator]


def waits_on_a_socket(path: str) -> str:
    """Time out on its own, as a socket would.

    Args:
        path: Any path.
    """
    raise TimeoutError("socket read timed out")


def odd_names(json: dict[str, Any], model_config: str = "x") -> str:
    """Take parameters whose names a pydantic model uses itself.

    Args:
        json: A body.
        model_config: A setting.
    """
    CALLS.append({"json": json, "model_config": model_config})
    return "ok"


async def async_sample(count: int) -> str:
    """Count asynchronously.

    Args:
        count: How many.
    """
    CALLS.append({"count": count})
    return str(count)


def registry_of(*funcs: Any, inline: bool = True) -> ToolRegistry:
    registry = ToolRegistry()
    for func in funcs:
        registry.register(build_tool(func, inline=inline))
    return registry


def run(registry: ToolRegistry, name: str, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
    return registry.execute(name, json.dumps(arguments), ctx, timeout=5)


def test_schema_covers_every_supported_hint() -> None:
    parameters = build_tool(sample).schema()["function"]["parameters"]

    assert parameters == {
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "Some text."},
            "count": {"type": "integer", "description": "How many."},
            "ratio": {"type": "number", "description": "A fraction."},
            "flag": {"type": "boolean", "description": "Whether to."},
            "names": {"type": "array", "items": {"type": "string"}, "description": "Some names."},
            "options": {"type": "object", "description": "Free-form options."},
            "mode": {"type": "string", "enum": ["fast", "slow"], "description": "How fast."},
            "task": {
                "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
                "description": "One task, or several.",
            },
            "note": {"type": "string", "description": "An optional note."},
            "limit": {"type": "integer", "default": 10, "description": "At most this many."},
        },
        "required": ["text", "count", "ratio", "flag", "names", "options", "mode", "task"],
        "additionalProperties": False,
    }
    jsonschema.Draft202012Validator.check_schema(parameters)


def _keys(schema: Any) -> Iterator[str]:
    """Every schema keyword in `schema` (property names and data values skipped)."""
    if isinstance(schema, list):
        for item in schema:
            yield from _keys(item)
    elif isinstance(schema, dict):
        for key, value in schema.items():
            yield key
            if key == "properties":
                for sub in value.values():
                    yield from _keys(sub)
            elif key not in ("default", "enum"):
                yield from _keys(value)


@pytest.mark.parametrize("name", load_builtin_tools().names())
def test_every_builtin_schema_is_a_valid_json_schema_providers_accept(name: str) -> None:
    tool = load_builtin_tools().get(name)
    assert tool is not None
    parameters = tool.schema()["function"]["parameters"]

    jsonschema.Draft202012Validator.check_schema(parameters)
    assert parameters["type"] == "object"
    assert set(parameters.get("required", [])) <= set(parameters["properties"])
    assert not {"title", "$defs", "$ref", "const"} & set(_keys(parameters))
    for param, spec in parameters["properties"].items():
        assert "type" in spec or "anyOf" in spec, f"{name}.{param} has no type"
        assert {"type": "null"} not in [spec, *spec.get("anyOf", [])], f"{name}.{param} offers null"


def test_agent_task_stays_a_string_or_a_list_of_strings() -> None:
    task = load_builtin_tools().get("agent").parameters["properties"]["task"]  # type: ignore[union-attr]

    assert task["anyOf"] == [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]


def test_a_wrong_type_is_a_tool_error_naming_the_field_and_the_tool_does_not_run(
    ctx: ToolContext,
) -> None:
    result = run(registry_of(sample), "sample", VALID | {"names": "a.txt"}, ctx)

    assert result.is_error
    assert result.output == 'Invalid arguments for sample: names: Input should be a valid list (got "a.txt").'
    assert CALLS == []


def test_a_builtin_tool_refuses_a_list_for_a_path(run_tool: Any) -> None:
    result = run_tool("read", {"path": ["a.txt"]})

    assert result.is_error
    assert result.output.startswith("Invalid arguments for read: path: Input should be a valid string")


def test_every_wrong_field_is_named_at_once(ctx: ToolContext) -> None:
    arguments = VALID | {"count": "five", "flag": "maybe", "mode": "slowest", "task": {"a": 1}}
    output = run(registry_of(sample), "sample", arguments, ctx).output

    assert "count: Input should be a valid integer, unable to parse string as an integer" in output
    assert "flag: Input should be a valid boolean" in output
    assert "mode: Input should be 'fast' or 'slow' (got \"slowest\")" in output
    assert 'task.str: Input should be a valid string (got {"a": 1})' in output
    assert 'task.list[str]: Input should be a valid list (got {"a": 1})' in output
    assert CALLS == []


def test_lax_values_are_coerced_to_the_hinted_types(ctx: ToolContext) -> None:
    arguments = VALID | {"count": "5", "ratio": "0.25", "flag": "false", "text": 7, "limit": 3.0}
    result = run(registry_of(sample), "sample", arguments, ctx)

    assert not result.is_error, result.output
    call = CALLS[0]
    assert (call["count"], call["ratio"], call["flag"], call["text"], call["limit"]) == (
        5,
        0.25,
        False,
        "7",
        3,
    )
    assert type(call["count"]) is int and type(call["limit"]) is int


def test_a_fractional_number_for_an_int_is_refused(ctx: ToolContext) -> None:
    result = run(registry_of(sample), "sample", VALID | {"count": 2.5}, ctx)

    assert result.output.startswith("Invalid arguments for sample: count: Input should be a valid integer")
    assert CALLS == []


def test_null_for_a_parameter_with_a_default_means_not_given(ctx: ToolContext) -> None:
    result = run(registry_of(sample), "sample", VALID | {"limit": None, "note": None}, ctx)

    assert not result.is_error, result.output
    assert (CALLS[0]["limit"], CALLS[0]["note"]) == (10, None)


def test_a_missing_required_argument_is_named(ctx: ToolContext) -> None:
    arguments = {k: v for k, v in VALID.items() if k not in ("text", "task")}
    result = run(registry_of(sample), "sample", arguments, ctx)

    assert result.output == "Invalid arguments for sample: missing text, task."
    assert CALLS == []


def test_an_unknown_argument_is_refused_listing_the_expected_ones(ctx: ToolContext) -> None:
    result = run(registry_of(sample), "sample", VALID | {"colour": "red"}, ctx)

    assert result.output == (
        "Invalid arguments for sample: unknown parameter(s) colour; expected text, count, ratio, "
        "flag, names, options, mode, task, note, limit."
    )
    assert CALLS == []


def test_arguments_of_an_async_tool_are_checked_too(ctx: ToolContext) -> None:
    registry = registry_of(async_sample, inline=False)

    assert run(registry, "async_sample", {"count": "4"}, ctx).output == "4"
    assert run(registry, "async_sample", {"count": []}, ctx).is_error
    assert CALLS == [{"count": 4}]


def test_any_python_name_can_be_a_parameter(ctx: ToolContext) -> None:
    tool = build_tool(odd_names)
    result = run(registry_of(odd_names), "odd_names", {"json": {"a": 1}, "model_config": "y"}, ctx)

    assert list(tool.parameters["properties"]) == ["json", "model_config"]
    assert tool.parameters["required"] == ["json"]
    assert result.output == "ok"
    assert CALLS == [{"json": {"a": 1}, "model_config": "y"}]


@pytest.mark.parametrize("inline", [True, False])
def test_a_type_error_inside_a_tool_is_an_internal_error_and_logged(
    ctx: ToolContext, inline: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="tools.registry")
    result = run(registry_of(buggy, inline=inline), "buggy", {"path": "a.txt"}, ctx)

    assert result.is_error
    assert result.output.startswith("buggy failed with an internal error: TypeError: ")
    assert "Invalid arguments" not in result.output
    (record,) = caplog.records
    assert record.exc_info is not None and record.exc_info[0] is TypeError


def test_a_timeout_raised_by_an_inline_tool_itself_is_an_internal_error(ctx: ToolContext) -> None:
    result = run(registry_of(waits_on_a_socket), "waits_on_a_socket", {"path": "a"}, ctx)

    assert (
        result.output
        == "waits_on_a_socket failed with an internal error: TimeoutError: socket read timed out"
    )


def test_a_tool_error_is_still_the_model_s_failure(ctx: ToolContext) -> None:
    def refuses(path: str) -> str:
        """Refuse every path.

        Args:
            path: Any path.
        """
        raise ToolError(f"{path} is not allowed")

    result = run(registry_of(refuses), "refuses", {"path": "a"}, ctx)

    assert result.output == "refuses failed: a is not allowed"


def test_a_parameter_that_cannot_be_passed_by_keyword_is_refused_at_registration() -> None:
    def positional(path: str, /) -> str:
        """Take a positional-only path."""
        return path

    with pytest.raises(ValueError, match="positional: parameter path must be passable by keyword"):
        build_tool(positional)
