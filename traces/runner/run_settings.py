"""A run's settings that hold: stored on the trace, kept by every later run of it.

A new run resolves its RunConfig against the preset and the deployment and
stores the result in `Trace.run_settings` (the effective values: the tools it
was offered, its step limit, confirm policy, temperature, ...). Every later run
of the trace (continue, rewind, regenerate, the resume after an approval or an
answer, the sweep's resume) starts from those stored values; a field its request
sets explicitly replaces the stored one, and the change is a `settings_changed`
event. So a run started read-only stays read-only however it is resumed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from django.conf import settings

from traces.projects import place
from traces.runner.config import InvalidRun, RunConfig
from traces.runner.extensions import Preset

# R11 (traces/runner/strategies/): the first is the default.
STRATEGIES = ("react", "routed", "plan_execute")

# RunConfig fields that are a run's settings, with the value meaning "not set".
UNSET: dict[str, Any] = {
    "tools": None,
    "temperature": None,
    "max_iterations": None,
    "skills": None,
    "system_prompt": None,
    "llm_params": {},
    "confirm_policy": None,
    "enable_memory": True,
    "experiences": None,
    "context_every": None,
    "microcompact_keep": None,
    "stream": None,
    "sandbox_network": None,
    "project": None,
    "strategy": None,
    "reflexion": None,
}
FIELDS = tuple(UNSET)


def preset_policy(preset: Preset) -> str | None:
    """The confirm policy a preset sets (`extra.confirm_policy`), if any."""
    return (preset.extra or {}).get("confirm_policy")


def default_project(preset: Preset) -> str | None:
    """The project a preset works in (`extra.project`), if any."""
    return (preset.extra or {}).get("project")


def default_strategy(preset: Preset) -> str:
    """A run's strategy when it asks none (R11): the preset's `extra.strategy`, else react."""
    return (preset.extra or {}).get("strategy") or STRATEGIES[0]


def default_reflexion(preset: Preset, strategy: str) -> bool:
    """Whether a run uses Reflexion when it asks nothing: the preset's
    `extra.reflexion`, else on for plan_execute only."""
    return bool((preset.extra or {}).get("reflexion", strategy == "plan_execute"))


def default_network(preset: Preset) -> bool:
    """Whether a run's sandboxed tools get the network when it asks nothing: the
    preset's `extra.sandbox_network`, else AGENT_SANDBOX_NETWORK."""
    return bool((preset.extra or {}).get("sandbox_network", settings.AGENT_SANDBOX_NETWORK))


def requested(config: RunConfig) -> dict[str, Any]:
    """The settings `config` sets explicitly (differs from "not set")."""
    return {name: getattr(config, name) for name in FIELDS if getattr(config, name) != UNSET[name]}


def with_stored(config: RunConfig, stored: dict[str, Any] | None) -> RunConfig:
    """`config` with every setting it leaves unset taken from the trace's stored settings.

    `llm_params` merge (the request's keys win). A trace stored before settings
    were kept has none: the config stays as it is (the preset's defaults).
    """
    if not stored:
        return config
    explicit = requested(config)
    values: dict[str, Any] = {}
    for name in FIELDS:
        if name in stored and name not in explicit:
            values[name] = stored[name]
    if "llm_params" in explicit and isinstance(stored.get("llm_params"), dict):
        values["llm_params"] = {**stored["llm_params"], **explicit["llm_params"]}
    return dataclasses.replace(config, **values)


def changes(before: dict[str, Any] | None, after: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{field: {"from": old, "to": new}} for the settings that differ (none for a first run)."""
    if not before:
        return {}
    return {
        name: {"from": before.get(name), "to": value}
        for name, value in after.items()
        if before.get(name) != value
    }


# --- a request's settings (API, portal, CLI) -----------------------------------------

# Model parameters a request may pass through to litellm: sampling and output
# shape only (never the endpoint, key, model or messages).
LLM_PARAMS_ALLOWED = frozenset(
    {
        "top_p",
        "top_k",
        "max_tokens",
        "max_completion_tokens",
        "presence_penalty",
        "frequency_penalty",
        "seed",
        "stop",
        "reasoning_effort",
        "response_format",
        "parallel_tool_calls",
    }
)
POLICY_ORDER = {"auto": 0, "ask-risky": 1, "ask-all": 2}
MAX_ITERATIONS_LIMIT = 10_000


def check_request(
    values: dict[str, Any], *, baseline_policy: str, may_loosen: bool, baseline_network: bool = False
) -> dict[str, Any]:
    """A request's run settings, checked: InvalidRun names the field at fault.

    `confirm_policy` may be made stricter than `baseline_policy` (the preset's or
    deployment's, or the trace's own) by anyone; looser only when `may_loosen`
    (an expert): the gate cannot be switched off by the run's owner. Likewise
    `sandbox_network` may be turned off by anyone, on (beyond `baseline_network`)
    only by an expert.
    """
    unknown = set(values) - set(FIELDS)
    if unknown:
        raise InvalidRun(f"unknown run setting(s): {', '.join(sorted(unknown))}")
    checked = {k: v for k, v in values.items() if v is not None}
    temperature = checked.get("temperature")
    if temperature is not None and (
        isinstance(temperature, bool) or not isinstance(temperature, int | float) or not 0 <= temperature <= 2
    ):
        raise InvalidRun("temperature: a number from 0 to 2")
    steps = checked.get("max_iterations")
    if steps is not None and (
        isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= MAX_ITERATIONS_LIMIT
    ):
        raise InvalidRun(f"max_iterations: an integer from 1 to {MAX_ITERATIONS_LIMIT}")
    codes = checked.get("experiences")
    if codes is not None and (
        not isinstance(codes, list) or len(codes) > 200 or not all(isinstance(c, str) and c for c in codes)
    ):
        raise InvalidRun('experiences: a list of experience codes (at most 200), e.g. ["ex_001"]')
    for name in ("tools", "skills"):
        names = checked.get(name)
        if names is not None and (not isinstance(names, list) or not all(isinstance(n, str) for n in names)):
            raise InvalidRun(f"{name}: a list of names")
    prompt = checked.get("system_prompt")
    if prompt is not None and (not isinstance(prompt, str) or not prompt.strip()):
        raise InvalidRun("system_prompt: a non-empty string")
    params = checked.get("llm_params")
    if params is not None:
        if not isinstance(params, dict):
            raise InvalidRun("llm_params: an object")
        refused = set(params) - LLM_PARAMS_ALLOWED
        if refused:
            raise InvalidRun(
                f"llm_params: {', '.join(sorted(refused))} may not be set; allowed: "
                + ", ".join(sorted(LLM_PARAMS_ALLOWED))
            )
    if checked.get("sandbox_network") and not baseline_network and not may_loosen:
        raise InvalidRun("sandbox_network: only an expert may give a run's tools the network")
    strategy = checked.get("strategy")
    if strategy is not None and strategy not in STRATEGIES:
        raise InvalidRun(f"strategy: one of {', '.join(STRATEGIES)}")
    for name in ("enable_memory", "stream", "sandbox_network", "reflexion"):
        if name in checked and not isinstance(checked[name], bool):
            raise InvalidRun(f"{name}: true or false")
    project = checked.get("project")
    if project is not None:
        if not isinstance(project, str):
            raise InvalidRun("project: the name of a project (AGENT_PROJECTS)")
        try:
            place(project)
        except ValueError as exc:
            raise InvalidRun(str(exc)) from None
    every = checked.get("context_every")
    if every is not None and (isinstance(every, bool) or not isinstance(every, int) or every < 1):
        raise InvalidRun("context_every: a positive integer")
    keep = checked.get("microcompact_keep")
    if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 0):
        raise InvalidRun("microcompact_keep: an integer from 0 (off) up")
    policy = checked.get("confirm_policy")
    if policy is not None:
        if policy not in POLICY_ORDER:
            raise InvalidRun(f"confirm_policy: one of {', '.join(POLICY_ORDER)}")
        if POLICY_ORDER[policy] < POLICY_ORDER.get(baseline_policy, 0) and not may_loosen:
            raise InvalidRun(
                f"confirm_policy: {policy!r} is looser than this run's {baseline_policy!r}; "
                "only an expert may loosen the gate"
            )
    return checked
