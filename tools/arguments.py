"""A tool's arguments (T1, T2): a pydantic model built from the function's signature.

The model gives the JSON schema the model is shown (`parameters_schema`) and checks
every call's arguments before the tool runs (`validate_arguments`), so a wrong
type comes back to the model as a tool error naming the field instead of reaching
the tool's code.

Checking is pydantic's lax mode plus numbers for strings: "5" is accepted as the
int 5, "true"/"false" (also yes/no, on/off, 1/0) as a bool, 2 or 2.1 where a string
is expected as "2" or "2.1" (goal ids); what does not fit — a list for a string,
"five" for an int — is refused. A null for a parameter that has a default but
does not take None means "not given" (the tool's default applies). Unknown
arguments are refused, naming the expected ones, so a model learns the schema
rather than having a typo ignored.
"""

from __future__ import annotations

import inspect
import json
import re
import typing
from collections.abc import Callable
from typing import Any

import pydantic

from traces.runner.tool_api import ToolContext, ToolError

_CONFIG = pydantic.ConfigDict(extra="forbid", coerce_numbers_to_str=True)

# Keys of a JSON schema whose values are data, not schemas.
_DATA_KEYS = frozenset({"default", "enum", "const", "examples"})
_NULL = {"type": "null"}


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its description and `Args:` entries."""
    doc = inspect.cleandoc(doc or "")
    parts = re.split(r"^\s*(?:Args|Arguments|Parameters):\s*$", doc, maxsplit=1, flags=re.M)
    description = parts[0].strip()
    params: dict[str, str] = {}
    if len(parts) > 1:
        current = None
        for line in parts[1].splitlines():
            if re.match(r"^\s*(Returns|Raises|Examples?):\s*$", line):
                break
            match = re.match(r"^\s*(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", line)
            if match:
                current = match.group(1)
                params[current] = match.group(2).strip()
            elif current and line.strip():
                params[current] += " " + line.strip()
    return description, params


def arguments_model(
    func: Callable[..., Any], *, name: str, descriptions: dict[str, str]
) -> type[pydantic.BaseModel]:
    """The model of `func`'s arguments, its `ToolContext` parameter left out.

    Fields get internal names and the parameter's name as alias, so any Python
    name (`json`, `model_config`) can be a parameter. An unannotated parameter
    is a string.
    """
    hints = typing.get_type_hints(func, include_extras=True)
    fields: dict[str, Any] = {}
    for index, (pname, param) in enumerate(inspect.signature(func).parameters.items()):
        annotation = hints.get(pname, str)
        if annotation is ToolContext:
            continue
        if param.kind not in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
            raise ValueError(f"tool {name}: parameter {pname} must be passable by keyword")
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[f"arg{index}"] = (
            annotation,
            pydantic.Field(default, alias=pname, description=descriptions.get(pname)),
        )
    return pydantic.create_model(name, __config__=_CONFIG, **fields)


def parameters_schema(model: type[pydantic.BaseModel]) -> dict[str, Any]:
    """The OpenAI `parameters` object: the model's JSON schema, cleaned for providers.

    No titles, no `$defs` (references are inlined), `X | None` shown as `X`, no
    null defaults, `const` as a one-value `enum`; unknown properties refused.
    """
    raw = model.model_json_schema()
    cleaned = _clean(raw, raw.get("$defs", {}), ())
    parameters: dict[str, Any] = {"type": "object", "properties": cleaned.get("properties", {})}
    if cleaned.get("required"):
        parameters["required"] = cleaned["required"]
    parameters["additionalProperties"] = False
    return parameters


def validate_arguments(model: type[pydantic.BaseModel], arguments: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments to call the tool with, checked and coerced by `model`.

    Only the arguments given are returned, so the function's own defaults apply.
    ToolError says what is wrong, field by field.
    """
    # A null where None is no valid value but a default exists: the model meant "not given".
    defaulted = {
        f.alias for f in model.model_fields.values() if not f.is_required() and not _admits_none(f.annotation)
    }
    given = {k: v for k, v in arguments.items() if not (v is None and k in defaulted)}
    try:
        validated = model.model_validate(given)
    except pydantic.ValidationError as exc:
        expected = [f.alias or n for n, f in model.model_fields.items()]
        raise ToolError(_describe(exc, expected)) from None
    return {
        field.alias or fname: getattr(validated, fname)
        for fname, field in model.model_fields.items()
        if fname in validated.model_fields_set
    }


def _admits_none(annotation: Any) -> bool:
    return annotation in (Any, None, type(None)) or type(None) in typing.get_args(annotation)


def _describe(error: pydantic.ValidationError, expected: list[str]) -> str:
    unknown: list[str] = []
    missing: list[str] = []
    problems: list[str] = []
    for item in error.errors(include_url=False):
        loc = item["loc"]
        if item["type"] == "extra_forbidden" and len(loc) == 1:
            unknown.append(str(loc[0]))
        elif item["type"] == "missing" and len(loc) == 1:
            missing.append(str(loc[0]))
        else:
            path = ".".join(str(part) for part in loc)
            problems.append(f"{path}: {item['msg']} (got {_shown(item['input'])})")
    parts = []
    if unknown:
        parts.append(
            f"unknown parameter(s) {', '.join(sorted(unknown))}; "
            f"expected {', '.join(expected) or 'no parameters'}"
        )
    if missing:
        parts.append(f"missing {', '.join(missing)}")
    return "; ".join(parts + problems) + "."


def _shown(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _clean(node: Any, defs: dict[str, Any], resolving: tuple[str, ...]) -> Any:
    if isinstance(node, list):
        return [_clean(item, defs, resolving) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        ref = node["$ref"].rsplit("/", 1)[-1]
        if ref in resolving:
            raise ValueError(f"recursive type {ref} cannot be a tool parameter")
        rest = {k: v for k, v in node.items() if k != "$ref"}
        return _clean({**defs[ref], **rest}, defs, (*resolving, ref))
    schema: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("title", "$defs") or (key == "default" and value is None):
            continue
        if key == "additionalProperties" and value is True:
            continue
        if key in _DATA_KEYS:
            schema[key] = value
        elif key in ("properties", "patternProperties"):
            schema[key] = {pname: _clean(sub, defs, resolving) for pname, sub in value.items()}
        else:
            schema[key] = _clean(value, defs, resolving)
    if "const" in schema:
        schema["enum"] = [schema.pop("const")]
    return _without_null(schema)


def _without_null(schema: dict[str, Any]) -> dict[str, Any]:
    """`X | None` shown as `X`: a null is still accepted, but never worth offering."""
    options = schema.get("anyOf")
    if not options or _NULL not in options:
        return schema
    rest = [option for option in options if option != _NULL]
    outer = {k: v for k, v in schema.items() if k != "anyOf"}
    if len(rest) == 1:
        return {**rest[0], **outer}
    return {"anyOf": rest, **outer}
