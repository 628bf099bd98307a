"""Shared pieces of the benchmarks: Django per database, trace fixtures, timed runs.

Django is configured once per process, so each database gets its own worker
process: the driver re-invokes its script with DATABASE_URL or SQLITE_PATH set,
and the worker calls `setup_django()` (settings + migrate on a fresh database).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.instant_model import MODEL, TOOL_NAME, task_message  # noqa: E402


def start_scripted_model(
    reply: Callable[[dict[str, Any]], Any],
) -> tuple[multiprocessing.process.BaseProcess, str]:
    """tests/scripted_llm.py answering every request with `reply(body)`, in a forked process
    of its own (its CPU and threads apart from the bench's, its collector off); the process
    and its /v1 URL.
    Call it before Django or any thread of the bench starts (fork)."""
    context = multiprocessing.get_context("fork")
    port = context.Value("i", 0)
    process = context.Process(target=_serve_scripted, args=(reply, port), daemon=True)
    process.start()
    deadline = time.monotonic() + 30
    while not port.value and time.monotonic() < deadline:
        time.sleep(0.05)
    if not port.value:
        raise RuntimeError("the scripted model did not start")
    return process, f"http://127.0.0.1:{port.value}/v1"


def _serve_scripted(reply: Callable[[dict[str, Any]], Any], port: Any) -> None:
    import gc
    import threading

    from tests.scripted_llm import ScriptedLLM

    # A provider does not pause for our collector: in this process a full collection
    # (up to 183 ms logged during a 64-run burst) stalled every stream at once, and the
    # workers then took the stalled chunks all together. Off for the bench's life: its
    # garbage is ~75 KB a request (RSS 21 -> 81 MB over density.py's 64-run stacks).
    gc.freeze()
    gc.disable()
    port.value = ScriptedLLM(default=reply).start().port
    threading.Event().wait()


TOOL_OUTPUT = (
    "Noted. The workspace holds 14 files in 3 directories; the configuration reads "
    "DATABASE_URL and AGENT_MODEL from the environment, and the last test run passed "
    "128 of 128 tests in 41 s. Nothing else changed since the previous step."
)


def database_env(kind: str, url: str | None = None) -> dict[str, str]:
    """Environment for a worker on `kind` ("sqlite" or "postgresql")."""
    scratch = tempfile.mkdtemp(prefix="bench-")
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "SQLITE_PATH")}
    env["BENCH_SCRATCH"] = scratch  # _run_worker's `finally` removes it
    env["AGENT_WORKSPACE_ROOT"] = str(Path(scratch) / "workspaces")
    env["DJANGO_SETTINGS_MODULE"] = "agentsite.settings"
    env["LOG_LEVEL"] = "WARNING"
    env["AGENT_MODEL"] = MODEL
    env["AGENT_STOP_POLL_SECONDS"] = env.get("AGENT_STOP_POLL_SECONDS", "0.25")
    env["PYTHONPATH"] = str(ROOT)
    # Every step sends the whole history, as LangGraph's agent does: the bench
    # times the loop and the client at these lengths, not context compaction
    # (C1/C2), which a 10,000-message history would otherwise trigger.
    env["AGENT_CONTEXT_TOKENS"] = "100000000"
    if kind == "postgresql":
        assert url, "postgresql needs a DATABASE_URL"
        env["DATABASE_URL"] = url
    else:
        env["SQLITE_PATH"] = str(Path(scratch) / "bench.sqlite3")
    return env


# A worker prints its result as one line: RESULT_MARK + JSON.
RESULT_MARK = "BENCH_RESULT "


def measure_in_worker(script: str, worker_args: list[str], kind: str, dbname: str) -> dict[str, Any]:
    """Run `script --worker ARGS` in a fresh process on a fresh `kind` database (a
    SQLite file, or a throwaway PostgreSQL named `dbname`); its result line, decoded."""
    if kind != "sqlite":
        sys.path.insert(0, str(ROOT / "scripts"))
        from throwaway_pg import start

        with start(dbname=dbname) as pg:
            return _run_worker(script, worker_args, kind, pg.url)
    return _run_worker(script, worker_args, kind, None)


def _run_worker(script: str, worker_args: list[str], kind: str, url: str | None) -> dict[str, Any]:
    env = database_env(kind, url)
    command = [sys.executable, str(Path(script).resolve()), "--worker", *worker_args]
    try:
        done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True)
    finally:
        shutil.rmtree(env["BENCH_SCRATCH"], ignore_errors=True)
    for line in done.stdout.splitlines():
        if line.startswith(RESULT_MARK):
            result: dict[str, Any] = json.loads(line[len(RESULT_MARK) :])
            return result
    raise RuntimeError(f"{kind} worker failed (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")


def setup_django() -> None:
    """django.setup() and migrate the (fresh) database named by the environment."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
    os.environ.setdefault("AGENT_WORKSPACE_ROOT", tempfile.mkdtemp(prefix="bench-workspaces-"))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def bench_registry() -> Any:
    """A private registry holding one cheap tool, `note`."""
    from tools.registry import ToolRegistry, build_tool

    def note(text: str) -> str:
        """Write down a short note.

        Args:
            text: What to note.
        """
        return TOOL_OUTPUT

    registry = ToolRegistry()
    registry.register(build_tool(note, name=TOOL_NAME))
    return registry


# --- trace fixtures -----------------------------------------------------------


def _main_fields(index: int, length: int) -> dict[str, Any]:
    """Role and content of the index-th message of a `length`-message main path."""
    if index == 0:
        return {"role": "system", "content": "You are a careful agent. Use tools; answer briefly."}
    if index == 1:
        return {"role": "user", "content": "Survey the workspace step by step."}
    if index == length - 1:
        return {"role": "assistant", "content": "Survey done; nothing is broken.", "finish_reason": "stop"}
    pairs_end = 2 + 2 * ((length - 3) // 2)  # the pairs stop before the final answer
    if index >= pairs_end:
        return {"role": "user", "content": "Keep going, then wrap up."}
    if index % 2 == 0:
        call = {
            "id": f"call_p{index}",
            "type": "function",
            "function": {"name": TOOL_NAME, "arguments": f'{{"text": "step {index // 2}"}}'},
        }
        return {"role": "assistant", "content": None, "tool_calls": [call], "finish_reason": "tool_calls"}
    return {"role": "tool", "content": TOOL_OUTPUT, "tool_call_id": f"call_p{index - 1}", "name": TOOL_NAME}


def _branch_fields(index: int, branch: int) -> dict[str, Any]:
    if index % 2 == 0:
        call = {
            "id": f"call_b{branch}_{index}",
            "type": "function",
            "function": {"name": TOOL_NAME, "arguments": '{"text": "abandoned"}'},
        }
        return {"role": "assistant", "content": None, "tool_calls": [call], "finish_reason": "tool_calls"}
    return {
        "role": "tool",
        "content": TOOL_OUTPUT,
        "tool_call_id": f"call_b{branch}_{index - 1}",
        "name": TOOL_NAME,
    }


def branch_shape(length: int) -> tuple[int, int]:
    """(branches, messages per branch) for a main path of `length` messages."""
    if length >= 10_000:
        return 10, 100
    if length >= 1_000:
        return 2, 10
    return 2, 4


def populate_trace(trace_id: str, length: int) -> dict[str, int]:
    """A completed trace whose main path holds `length` messages, plus side branches.

    Built as rewinds leave it: each side branch hangs from a tool result of the
    main path and holds lower sequences than the main path's continuation.
    Returns {"main": ..., "side": ..., "total": ...}.
    """
    from django.db import connection
    from django.utils import timezone

    from traces.models import Goal, GoalStatus, Message, Trace, TraceStatus

    now = timezone.now()
    branches, per_branch = branch_shape(length)
    branch_points = {max(3, (length * (j + 1) // (branches + 1)) | 1): j for j in range(branches)}
    rows: list[Message] = []
    sequence = 0
    head = 0
    for index in range(length):
        sequence += 1
        rows.append(_message(trace_id, sequence, head or None, _main_fields(index, length), now))
        head = sequence
        branch = branch_points.get(index)
        if branch is None or index >= length - 2:
            continue
        parent = head
        for side_index in range(per_branch):
            sequence += 1
            rows.append(_message(trace_id, sequence, parent, _branch_fields(side_index, branch), now))
            parent = sequence
    _set_segment_starts(rows)
    trace = Trace.objects.create(
        trace_id=trace_id,
        name=f"bench trace of {length} messages",
        task="Survey the workspace step by step.",
        status=TraceStatus.COMPLETED,
        model=MODEL,
        current_goal_id="1",
        total_messages=len(rows),
        last_sequence=sequence,
        head_sequence=head,
        context={"goal_counter": 1},
        created_at=now,
        updated_at=now,
    )
    Goal.objects.create(
        trace=trace,
        goal_id="1",
        description="Survey the workspace",
        status=GoalStatus.IN_PROGRESS,
        position=1.0,
        created_at=now,
    )
    Message.objects.bulk_create(rows, batch_size=2000)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE traces_message")
    return {"main": length, "side": len(rows) - length, "total": len(rows)}


def _set_segment_starts(rows: list[Any]) -> None:
    """Message.segment_start as RunStore sets it: a message whose parent is the one
    just before it continues the parent's linear segment; any other starts one."""
    if not hasattr(rows[0], "segment_start"):
        return  # a runner from before segments
    previous = None
    for row in rows:
        continues = previous is not None and row.parent_sequence == row.sequence - 1
        row.segment_start = previous.segment_start if continues else row.sequence
        previous = row


def _message(trace_id: str, sequence: int, parent: int | None, fields: dict[str, Any], now: Any) -> Any:
    from traces.models import Message

    assistant = fields["role"] == "assistant"
    return Message(
        message_id=Message.make_id(trace_id, sequence),
        trace_id=trace_id,
        sequence=sequence,
        parent_sequence=parent,
        goal_id="1",
        description=f"{fields['role']} message",
        created_at=now,
        prompt_tokens=20 if assistant else None,
        completion_tokens=5 if assistant else None,
        **fields,
    )


# --- timed runs ---------------------------------------------------------------


class TimedCall:
    """Wraps an llm_call; records when the first two calls started, the first's time
    inside and the time spent inside all of them."""

    def __init__(self, call: Any) -> None:
        self.call = call
        self.first_started: float | None = None
        self.second_started: float | None = None
        self.first_inside = 0.0
        self.inside = 0.0
        self.calls = 0

    def __call__(self, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        started = time.perf_counter()
        if self.first_started is None:
            self.first_started = started
        elif self.second_started is None:
            self.second_started = started
        try:
            return self.call(messages, **kwargs)
        finally:
            self.inside += time.perf_counter() - started
            if self.calls == 0:
                self.first_inside = self.inside
            self.calls += 1


@dataclass
class RunTiming:
    steps: int  # model calls (iterations) in the run
    wall: float  # run_result() from call to return
    prepare: float  # from the call to the first model call: claim, load, plan
    inside_model: float  # time inside llm_call
    runner_total: float  # last_run_stats
    runner_model: float  # last_run_stats
    status: str
    first_step: float  # outside llm_call from the first call's start to the second's

    @property
    def loop(self) -> float:
        return self.wall - self.prepare

    def loop_overhead_ms(self) -> float:
        """Framework time per step outside the llm_call, the one-off load excluded."""
        return (self.loop - self.inside_model) / self.steps * 1000

    def steady_overhead_ms(self) -> float:
        """As loop_overhead_ms, the first step also excluded: a run's first request on a
        long trace records the history it sends (traces/runner/request_log.py), once."""
        return (self.loop - self.inside_model - self.first_step) / (self.steps - 1) * 1000

    def loop_step_ms(self) -> float:
        """Whole step (model client included) per step, the one-off load excluded."""
        return self.loop / self.steps * 1000

    def runner_overhead_ms(self) -> float:
        """(total_seconds - model_seconds) / iterations, as the runner reports them."""
        return (self.runner_total - self.runner_model) / self.steps * 1000


def timed_run(llm_call: Any, *, steps: int, trace_id: str | None, registry: Any) -> RunTiming:
    """Run (continue `trace_id`, or a new trace) through `steps` tool steps and a final answer."""
    from traces.runner import AgentRunner, RunConfig

    timed = TimedCall(llm_call)
    runner = AgentRunner(llm_call=timed, utility_llm_call=timed, tool_registry=registry)
    config = RunConfig(
        trace_id=trace_id,
        name=None if trace_id else "bench run",
        model=MODEL,
        max_iterations=steps + 5,
        context_every=10,
        stream=False,
        tools=[TOOL_NAME],
    )
    started = time.perf_counter()
    result = runner.run_result([{"role": "user", "content": task_message(steps)}], config)
    wall = time.perf_counter() - started
    if result.status != "completed":
        raise RuntimeError(f"bench run ended {result.status}: {result.error}")
    stats = runner.last_run_stats
    return RunTiming(
        steps=int(stats["iterations"]),
        wall=wall,
        prepare=(timed.first_started or started) - started,
        inside_model=timed.inside,
        runner_total=float(stats["total_seconds"]),
        runner_model=float(stats["model_seconds"]),
        status=result.status,
        first_step=(timed.second_started or started) - (timed.first_started or started) - timed.first_inside,
    )


def median(values: list[float]) -> float:
    return statistics.median(values)
