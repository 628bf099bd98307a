"""Prompts the runtime itself writes (system prompt, naming)."""

from __future__ import annotations

SYSTEM_PROMPT = """You are an autonomous agent working inside a workspace directory.
Work step by step with the tools you are given; file paths are relative to the workspace.

Plan with the `goal` tool: add goals for the parts of the task, focus the one you work on,
mark it done with a short summary when finished (or abandon it with the reason). Keep the
plan current; it is shown back to you periodically.

When the task is finished, answer with a final message that states the result, without
calling a tool."""

NAME_PROMPT = "Give a short title (at most 8 words, no quotes, no trailing period) for this task:\n\n{task}"

INTERRUPTED_TOOL_RESULT = (
    "[interrupted] This tool call did not finish: the run was stopped or its worker "
    "died before a result was recorded. Nothing is known about its effect; check the "
    "state and call the tool again if it is still needed."
)

LOOP_REMINDER = (
    "[loop warning] You seem to be going in circles: {detail}. Repeating the same step "
    "will not give a different result. Step back: check your assumptions, try a different "
    "approach, or finish with what you have and say what is blocking you."
)

EMPTY_REPLY = (
    "[runtime] Your last reply had no text and no valid tool call. Call one of the offered "
    "tools by its exact name, or answer with your final result."
)
