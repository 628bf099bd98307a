"""What the strategies say to the models (R11): the router, planner, step, synthesis and self-critique prompts."""

from __future__ import annotations

ROUTE_PROMPT = """Classify how an agent should handle the request below. Answer with only a JSON object:
{{"route": "DIRECT" | "SIMPLE_TOOL" | "PLAN_REQUIRED", "reason": "<one short sentence>"}}

- DIRECT: a question answered from knowledge alone, no tool needed (greetings, facts, explanations).
- SIMPLE_TOOL: needs tools ({tools}) but is one focused task.
- PLAN_REQUIRED: several distinct parts that are best done as an ordered plan of steps.

Request:
{request}"""

PLAN_PROMPT = """Before acting, make a plan for the user's latest request: an ordered list of at most {limit} \
concrete steps, each one a piece of work you can finish with your tools and then report on. Answer with only \
a JSON object, no tool calls and no other text:
{{"steps": [{{"description": "<what this step does>"}}, ...]}}"""

PLAN_RETRY = """That plan could not be used: {error}
Answer again with only the JSON object {{"steps": [{{"description": "..."}}]}}."""

STEP_PROMPT = """Plan step {index} of {total}: {description}
Work only on this step. When it is done, answer (without a tool call) with a short summary of what you did \
and found. If it cannot be done, answer starting with [STEP FAILED] and say why."""

SYNTHESIS_PROMPT = """All steps of the plan have run. Their results:

{results}

Now answer the user's request: {request}
Use the results above; for each step marked [STEP i FAILED], say so with that mark and what is missing \
because of it. Do not call tools."""

CRITIQUE_PROMPT = """A tool call just failed:
{failures}

Critique your last step before retrying it. Answer with only a JSON object:
{{"what_went_wrong": "<the cause>", "lesson": "<a rule for next time, one sentence>", \
"retry_plan": "<what you will do differently now>"}}"""

LESSON_NOTE = """Reflexion {count}/{limit} on the failed call to {tool}: {what_went_wrong}
Lesson: {lesson}
Retry plan: {retry_plan}
Retry the step now, following the plan."""

LESSONS_SECTION = "## Lessons learned in this run (Reflexion)\n\n{lessons}"
