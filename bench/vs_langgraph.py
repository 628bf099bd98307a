"""The same scripted N-step tool loop through LangGraph and through AgentRunner.

Both sides run against one throwaway PostgreSQL (separate databases) with an
instant scripted model, so what is timed is the framework:

- LangGraph: `langgraph.prebuilt.create_react_agent` with the `PostgresSaver`
  checkpointer and a fake `BaseChatModel` that emits the scripted tool calls;
  also without a checkpointer, for reference.
- ours: `AgentRunner` with the real `traces.llm.LLMClient` (litellm) and the
  instant model behind litellm's custom-provider hook (bench/instant_model.py).

Each model step is one tool call and its result; after N steps the model answers
in text. Prints ms per step for both and the ratio ours/theirs (target <= 0.5).
Runs are interleaved (ours N=200, theirs N=200, ours N=800, ...) and repeated,
each in a fresh process after a short warm-up run; medians are shown.

Needs the bench virtualenv (bench/requirements.txt); see bench/README.md.
Usage: <bench venv>/bin/python bench/vs_langgraph.py [--steps 200,800] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.harness import TOOL_OUTPUT, database_env, median  # noqa: E402
from bench.instant_model import TOOL_NAME, next_move, task_message  # noqa: E402

RESULT_MARK = "BENCH_RESULT "
RATIO_TARGET = 0.5
WARM_UP_STEPS = 5


# --- LangGraph side --------------------------------------------------------------


def langgraph_agent(checkpointer: Any) -> Any:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool
    from langgraph.prebuilt import create_react_agent

    roles = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}

    class InstantChatModel(BaseChatModel):
        """Answers at once with the scripted move (the same script as ours)."""

        @property
        def _llm_type(self) -> str:
            return "instant-scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
        ) -> Any:
            tail: list[tuple[str, str]] = []
            for message in reversed(messages):
                role = roles.get(message.type, message.type)
                tail.append((role, message.content if isinstance(message.content, str) else ""))
                if role == "user":
                    break
            text, call = next_move(tail[::-1])
            if call is None:
                reply = AIMessage(content=text or "")
            else:
                args = json.loads(call["function"]["arguments"])
                reply = AIMessage(
                    content="",
                    tool_calls=[{"name": TOOL_NAME, "args": args, "id": call["id"], "type": "tool_call"}],
                )
            reply.usage_metadata = {"input_tokens": 20, "output_tokens": 5, "total_tokens": 25}
            return ChatResult(generations=[ChatGeneration(message=reply)])

    @tool(TOOL_NAME)
    def note(text: str) -> str:
        """Write down a short note."""
        return TOOL_OUTPUT

    return create_react_agent(InstantChatModel(), [note], checkpointer=checkpointer)


def langgraph_run(agent: Any, steps: int) -> float:
    config = {"configurable": {"thread_id": str(uuid.uuid4())}, "recursion_limit": 2 * steps + 20}
    started = time.perf_counter()
    state = agent.invoke({"messages": [("user", task_message(steps))]}, config=config)
    wall = time.perf_counter() - started
    tool_results = sum(1 for m in state["messages"] if m.type == "tool")
    if tool_results != steps:
        raise RuntimeError(f"LangGraph ran {tool_results} tool steps, expected {steps}")
    return wall


def langgraph_worker(steps: int, url: str) -> dict[str, Any]:
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
        agent = langgraph_agent(saver)
        langgraph_run(agent, WARM_UP_STEPS)
        with_checkpointer = langgraph_run(agent, steps)
    plain = langgraph_agent(None)
    langgraph_run(plain, WARM_UP_STEPS)
    without = langgraph_run(plain, steps)
    return {
        "ms_per_step": with_checkpointer / steps * 1000,
        "no_checkpointer_ms_per_step": without / steps * 1000,
    }


# --- our side ----------------------------------------------------------------------


def ours_worker(steps: int) -> dict[str, Any]:
    from bench.harness import bench_registry, setup_django, timed_run

    setup_django()
    from bench.instant_model import register_litellm_provider
    from traces.llm import LLMClient

    register_litellm_provider()
    registry = bench_registry()
    client = LLMClient(retries=0)
    timed_run(client, steps=WARM_UP_STEPS, trace_id=None, registry=registry)
    run = timed_run(client, steps=steps, trace_id=None, registry=registry)
    return {
        "ms_per_step": run.wall / steps * 1000,
        "litellm_ms_per_step": run.inside_model / run.steps * 1000,
        "outside_ms_per_step": (run.wall - run.inside_model) / run.steps * 1000,
    }


# --- driver ---------------------------------------------------------------------------


def run_worker(side: str, steps: int, env: dict[str, str]) -> dict[str, Any]:
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", side, f"--steps={steps}"]
    try:
        done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True)
    finally:
        if "BENCH_SCRATCH" in env:
            shutil.rmtree(env["BENCH_SCRATCH"], ignore_errors=True)
    for line in done.stdout.splitlines():
        if line.startswith(RESULT_MARK):
            return json.loads(line[len(RESULT_MARK) :])
    raise RuntimeError(f"{side} worker failed (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")


def create_database(url: str, name: str) -> str:
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    return url.rsplit("/", 1)[0] + "/" + name


def measure(step_counts: list[int], repeats: int) -> dict[int, dict[str, list[dict[str, Any]]]]:
    sys.path.insert(0, str(ROOT / "scripts"))
    from throwaway_pg import start

    results: dict[int, dict[str, list[dict[str, Any]]]] = {
        n: {"ours": [], "langgraph": []} for n in step_counts
    }
    with start(dbname="bench_ours") as pg:
        langgraph_url = create_database(pg.url, "bench_langgraph").replace("postgres://", "postgresql://", 1)
        theirs_env = {**os.environ, "PYTHONPATH": str(ROOT), "LANGGRAPH_URL": langgraph_url}
        for _ in range(repeats):
            for steps in step_counts:
                results[steps]["ours"].append(run_worker("ours", steps, database_env("postgresql", pg.url)))
                results[steps]["langgraph"].append(run_worker("langgraph", steps, theirs_env))
    return results


def report(results: dict[int, dict[str, list[dict[str, Any]]]], repeats: int) -> None:
    print(f"== ours vs LangGraph: scripted N-step tool loop on PostgreSQL, median of {repeats} runs ==")
    print(f"langgraph {_version('langgraph')}, litellm {_version('litellm')}; instant models on both sides")
    print()
    header = (
        f"{'N':>5}{'ours ms/step':>14}{'(litellm':>10}{'+ rest)':>9}"
        f"{'LangGraph+PostgresSaver':>25}{'LG no ckpt':>12}{'ours/theirs':>13}"
    )
    print(header)
    print("-" * len(header))
    verdicts = []
    for steps, sides in results.items():
        ours = median([r["ms_per_step"] for r in sides["ours"]])
        litellm_ms = median([r["litellm_ms_per_step"] for r in sides["ours"]])
        rest = median([r["outside_ms_per_step"] for r in sides["ours"]])
        theirs = median([r["ms_per_step"] for r in sides["langgraph"]])
        plain = median([r["no_checkpointer_ms_per_step"] for r in sides["langgraph"]])
        ratio = ours / theirs
        verdicts.append(f"N={steps}: {'met' if ratio <= RATIO_TARGET else 'MISSED'}")
        print(
            f"{steps:>5}{ours:>14.2f}{litellm_ms:>10.2f}{rest:>9.2f}{theirs:>25.2f}{plain:>12.2f}{ratio:>13.2f}"
        )
    print()
    print(f"target ours/theirs <= {RATIO_TARGET}: " + ", ".join(verdicts))
    print(
        "raw ms/step:",
        {
            n: {side: [round(r["ms_per_step"], 2) for r in runs] for side, runs in sides.items()}
            for n, sides in results.items()
        },
    )


def _version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "?"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", default="200,800", help="model steps per run (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per side and N; the median is shown")
    parser.add_argument("--worker", choices=["ours", "langgraph"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker == "ours":
        result = ours_worker(int(args.steps))
    elif args.worker == "langgraph":
        result = langgraph_worker(int(args.steps), os.environ["LANGGRAPH_URL"])
    else:
        step_counts = [int(x) for x in args.steps.split(",")]
        report(measure(step_counts, args.repeats), args.repeats)
        return 0
    print(RESULT_MARK + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
