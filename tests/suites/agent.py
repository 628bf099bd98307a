"""A scripted model for the suite tests: does three small tasks with the tools it is
offered, and judges rubrics as the reviewer run."""

from __future__ import annotations

import json
from typing import Any

from tests.scripted_llm import Reply, ToolCall

TASKS = {
    "write": "write the word hello into hello.txt",
    "sum": "what is 2+2?",
    "list": "list the files of the workspace",
}


def text(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


def scripted_agent(body: dict[str, Any]) -> Reply:
    """A model that does the tasks above with the tools it is offered (and judges rubrics)."""
    messages = body["messages"]
    task = next(text(m["content"]) for m in messages if m["role"] == "user")
    offered = {t["function"]["name"] for t in body.get("tools") or []}
    if "strict reviewer" in task:
        verdict = "pass" if "Tools it called: list_files" in task else "fail"
        return Reply(text=json.dumps({"verdict": verdict, "reasoning": "by the rubric"}))
    if messages[-1]["role"] == "tool":
        return Reply(text="done: hello.txt written" if "hello" in task else "done: the workspace is empty")
    if "hello.txt" in task:
        if "write" not in offered:
            return Reply(text="I may not write files with these tools.")
        return Reply(tool_calls=[ToolCall("write", {"path": "hello.txt", "content": "hello"})])
    if "list the files" in task:
        return Reply(tool_calls=[ToolCall("list_files", {})])
    return Reply(text="2+2 is 4")


CHECKS = {
    "write": [{"kind": "file_exists", "path": "hello.txt", "contains": "hello"}],
    "sum": [{"kind": "answer_matches", "pattern": r"\b4\b"}, {"kind": "tool_not_called", "tool": "write"}],
    "list": [
        {"kind": "tool_called", "tool": "list_files"},
        {"kind": "rubric", "rubric": "the agent looked at the workspace before answering"},
    ],
}
