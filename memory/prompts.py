"""Prompts of the memory features: task tagging (M4) and reflection (M3)."""

from __future__ import annotations

TAG_PROMPT = """Tag this task for looking up lessons from earlier runs.
Answer with JSON only, no prose: {{"state": [...], "intent": [...]}}
- state: 1-4 short snake_case words for the environment or situation (e.g. "docker", "large_file", "flaky_tests").
- intent: 1-3 short snake_case words for what the user wants done (e.g. "optimization", "debug", "refactor").
Prefer these tags, already used by the lessons, when one fits; invent a new one only when none does:
{known}

Task:
{task}"""

EXPERIENCES_HEADING = "## Relevant experiences"

EXPERIENCES_INTRO = (
    "Lessons from earlier runs, reviewed by experts. Apply the ones that fit and cite "
    "the id of each one you apply, like [ex_001]."
)

REFLECT_PROMPT = """Pause the task and reflect on this run so far. Extract the lessons a future
run of a similar task should know: what worked, what failed and why, tool pitfalls,
facts about the environment. Only lessons supported by messages above.
{focus}
Answer with JSON only, no prose, in this shape:
{{"experiences": [
  {{"category": "tool_usage | logic_flow | environment | domain | communication | other",
    "tags": {{"state": ["snake_case", ...], "intent": ["snake_case", ...]}},
    "condition": "when the lesson applies (one sentence)",
    "rule": "what to do (imperative, specific)",
    "evidence": [<message sequence numbers, shown as #N, that support it>]}}
]}}
Give 1 to {limit} experiences; an empty list if the run taught nothing.

The messages of this run, by sequence number:
{index}"""

REFLECT_FOCUS = "Focus on: {focus}\n"

REFLECT_RETRY = """That answer could not be used: {reason}.
Answer again with JSON only, exactly in the shape asked for."""
