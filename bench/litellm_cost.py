"""What one model call costs in CPU at 10, 1,000 and 10,000 history messages, and where.

No network and no thinking: the instant scripted model behind litellm's
custom-provider hook (bench/instant_model.py), as in step_overhead.py (b).
One process, no database (the client reads settings only). Per length:

- ours: `traces/llm_request.py:request_messages` (remembered per message) against
  the full pass it replaced (`normalize_tool_call_ids(media_for_model(...))`),
  ms per request on a history it has seen before but the newest message;
- client: `traces.llm.LLMClient.__call__`, wall ms inside the call, and CPU ms per
  call of every thread of the process (litellm logs each call in a background
  thread, which copies the messages again; the bench waits for it before reading
  the CPU clock);
- litellm alone: `litellm.completion` on the prepared request, same two figures,
  with litellm's switches: `litellm.turn_off_message_logging` (global, documented
  for redacting logs) and the same as a per-call parameter (one of litellm's
  dynamic callback parameters), `litellm.disable_token_counter`, the per-call
  `no-log` parameter;
- of which: two of litellm's own passes over every message, timed alone on the same
  request (`function_setup`'s thought-signature strip for non-Gemini models, which
  copies each message and each tool call, and `completion`'s
  `validate_and_fix_openai_messages`, which copies each message again). Neither
  has a switch in litellm 1.100.5.

Usage: python bench/litellm_cost.py [--lengths 10,1000,10000] [--calls 10] [--rounds 3]
Medians of `rounds` rounds of `calls` calls; the variants take turns in each round.
The machine is shared: compare figures within one run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.harness import _main_fields, database_env  # noqa: E402
from bench.instant_model import MODEL, TOOL_NAME, task_message  # noqa: E402

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": TOOL_NAME,
            "description": "Write down a short note.",
            "parameters": {
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            },
        },
    }
]


def history(length: int) -> list[dict[str, Any]]:
    """A main path as bench/harness.py stores it, plus a new user message asking for a step."""
    out = []
    for index in range(length):
        fields = _main_fields(index, length)
        fields.pop("finish_reason", None)
        out.append(fields)
    out.append({"role": "user", "content": task_message(1)})
    return out


def setup() -> None:
    os.environ.update({k: v for k, v in database_env("sqlite").items() if k != "BENCH_SCRATCH"})
    import django

    django.setup()
    from bench.instant_model import register_litellm_provider

    register_litellm_provider()
    import litellm

    litellm.suppress_debug_info = True  # no "Provider List" banner for the bench's provider


def _drain() -> None:
    """Wait for litellm's background logging of the calls made so far."""
    from litellm import utils

    utils.executor.submit(lambda: None).result()


def timed(call: Callable[[], Any], calls: int) -> tuple[float, float]:
    """(wall ms per call inside `call`, CPU ms per call of all threads, background logging included)."""
    _drain()
    cpu = time.process_time()
    wall = 0.0
    for _ in range(calls):
        started = time.perf_counter()
        call()
        wall += time.perf_counter() - started
    _drain()
    return wall / calls * 1000, (time.process_time() - cpu) / calls * 1000


def measure(length: int, calls: int, rounds: int) -> dict[str, tuple[float, float]]:
    import litellm
    from litellm.litellm_core_utils.prompt_templates.factory import THOUGHT_SIGNATURE_SEPARATOR
    from litellm.utils import _remove_thought_signatures_from_messages, validate_and_fix_openai_messages

    from traces.llm import LLMClient, agent_model
    from traces.llm_request import RequestMemo, normalize_tool_call_ids
    from traces.media.request import media_for_model

    messages = history(length)
    model = agent_model(MODEL)
    client = LLMClient(retries=0)
    memo = RequestMemo()
    memo.prepare(messages[:-1], MODEL)  # seen before: all but the newest message

    def remembered() -> Any:
        fresh = [*messages[:-1], dict(messages[-1])]  # the newest message is new to the memo
        return memo.prepare(fresh, MODEL)

    def litellm_call(**extra: Any) -> Callable[[], Any]:
        prepared = normalize_tool_call_ids(media_for_model(messages, MODEL), MODEL)
        kwargs = {"model": MODEL, "messages": prepared, "tools": TOOLS, "num_retries": 0, **extra}
        return lambda: litellm.completion(**kwargs)

    def switched(name: str) -> Callable[[], Any]:
        inner = litellm_call()

        def call() -> Any:
            setattr(litellm, name, True)
            try:
                return inner()
            finally:
                setattr(litellm, name, False)

        return call

    variants: dict[str, Callable[[], Any]] = {
        "ours: full pass": lambda: normalize_tool_call_ids(media_for_model(messages, MODEL), MODEL),
        "ours: remembered": remembered,
        "client (LLMClient)": lambda: client(messages, model=model, tools=TOOLS),
        "litellm alone": litellm_call(),
        "  litellm.turn_off_message_logging": switched("turn_off_message_logging"),
        "  turn_off_message_logging=True": litellm_call(turn_off_message_logging=True),
        "  disable_token_counter": switched("disable_token_counter"),
        "  no-log=True": litellm_call(**{"no-log": True}),
        "  of which thought-signature strip": lambda: _remove_thought_signatures_from_messages(
            messages, THOUGHT_SIGNATURE_SEPARATOR
        ),
        "  of which validate_and_fix": lambda: validate_and_fix_openai_messages([dict(m) for m in messages]),
    }
    for call in variants.values():  # warm-up
        call()
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    for turn in range(rounds):
        names = list(variants)
        names = names[turn % len(names) :] + names[: turn % len(names)]
        for name in names:
            results[name].append(timed(variants[name], calls))
    return {
        name: (statistics.median(w for w, _ in values), statistics.median(c for _, c in values))
        for name, values in results.items()
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lengths", default="10,1000,10000")
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    setup()
    lengths = [int(x) for x in args.lengths.split(",")]
    table = {length: measure(length, args.calls, args.rounds) for length in lengths}
    print(
        f"== one model call's CPU by history length (litellm {version('litellm')}); "
        f"median of {args.rounds} rounds of {args.calls} calls =="
    )
    print(
        "wall = ms inside the call; cpu = ms of CPU per call, all threads (litellm's logging thread included)"
    )
    header = f"{'':<38}" + "".join(f"{f'{n:,} msgs':>22}" for n in lengths)
    print(header)
    print(f"{'':<38}" + "".join(f"{'wall':>11}{'cpu':>11}" for _ in lengths))
    print("-" * len(header))
    for name in table[lengths[0]]:
        print(
            f"{name:<38}" + "".join(f"{table[n][name][0]:>11.2f}{table[n][name][1]:>11.2f}" for n in lengths)
        )
    low, high = lengths[0], lengths[-1]
    client = {n: table[n]["client (LLMClient)"][1] for n in lengths}
    alone = {n: table[n]["litellm alone"][1] for n in lengths}
    print()
    print(
        f"client cpu {high:,}/{low:,}: {client[high] / client[low]:.1f}x; "
        f"litellm's share of the client's cpu at {high:,}: {alone[high] / client[high]:.0%}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
