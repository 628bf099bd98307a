"""A tool call as the runner reads it, from the OpenAI-format dict a message stores."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call of an assistant message: its id, the tool's name and the arguments as sent.

    Messages keep their calls as OpenAI dicts (that is what is stored and sent to
    providers); `ToolCall.of` reads one, tolerating a missing or malformed
    `function` (a healed or foreign history), so no caller digs through the dict.
    """

    id: str
    name: str
    arguments: Any  # a JSON string as the model sent it, or already a dict

    @classmethod
    def of(cls, call: Mapping[str, Any]) -> ToolCall:
        function = call.get("function")
        if not isinstance(function, Mapping):
            function = {}
        return cls(
            id=str(call.get("id") or ""),
            name=str(function.get("name") or ""),
            arguments=function.get("arguments"),
        )

    @staticmethod
    def name_of(call: Mapping[str, Any]) -> str:
        """Just the tool's name, for loops over a whole history (no object built:
        `of` for every call of a 10,000-message path cost ~60 ms a load)."""
        function = call.get("function")
        return str(function.get("name") or "") if isinstance(function, dict) else ""

    def with_arguments(self, call: Mapping[str, Any], arguments: str) -> dict[str, Any]:
        """The stored dict `call` with other arguments (an expert's edit)."""
        function = call.get("function")
        return {
            **call,
            "function": {**(function if isinstance(function, Mapping) else {}), "arguments": arguments},
        }
