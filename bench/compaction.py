"""Context compaction bench (issue 6, C1-C5): a long scripted run whose raw history
is several times the model's context.

Runs the same 300-step tool loop twice through the real runner (SQLite, an
instant in-process model that records every request): once with compaction
(AGENT_CONTEXT_TOKENS = the context below) and once without (a context so large
it never triggers). Prints the estimated tokens sent per step, the largest
request against the limit, and how many summaries were written.

    python bench/compaction.py [--steps 300] [--context 20000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# One tool result is about this many characters (~330 tokens): 300 of them make a
# raw history about 5x a 20,000-token context.
RESULT_CHARS = 1_250


def setup(context_tokens: int) -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "agentsite.settings"
    os.environ["SQLITE_PATH"] = str(Path(tempfile.mkdtemp(prefix="bench-compaction-")) / "db.sqlite3")
    os.environ["AGENT_WORKSPACE_ROOT"] = tempfile.mkdtemp(prefix="bench-compaction-ws-")
    os.environ["AGENT_MODEL"] = "bench/instant"
    os.environ["AGENT_CONTEXT_TOKENS"] = str(context_tokens)
    os.environ["AGENT_COMPACTION_REFLECT"] = "false"  # the instant model writes no experiences
    # The scripted loop repeats one call on purpose; loop detection would (rightly) stop it.
    os.environ["AGENT_LOOP_WARNING"] = "100000"
    os.environ["AGENT_LOOP_CRITICAL"] = "100001"
    os.environ["LOG_LEVEL"] = "WARNING"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


class InstantModel:
    """Answers every step with one `read` call, summary requests with a summary."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.requests: list[tuple[bool, int]] = []  # (is_summary_request, estimated tokens)

    def __call__(self, messages: list[dict[str, Any]], **_: Any) -> Any:
        from traces.llm import LLMResponse
        from traces.runner.compaction import estimate_tokens

        tokens = sum(estimate_tokens(m) for m in messages)
        last = messages[-1].get("content") if messages else ""
        summary = isinstance(last, str) and last.startswith("[COMPACT REQUEST]")
        self.requests.append((summary, tokens))
        if summary:
            text = "1. Primary request: read data.txt repeatedly.\n" + "- progress noted\n" * 60
            return LLMResponse(content=text, prompt_tokens=tokens)
        done = sum(1 for s, _ in self.requests if not s)
        if done > self.steps:
            return LLMResponse(content="All steps done.", prompt_tokens=tokens, finish_reason="stop")
        call = {
            "id": f"call_{done}",
            "type": "function",
            "function": {"name": "read", "arguments": '{"path": "data.txt"}'},
        }
        return LLMResponse(content=None, tool_calls=[call], prompt_tokens=tokens, finish_reason="tool_calls")


def run(steps: int) -> tuple[InstantModel, Any, float]:
    from django.conf import settings

    from traces.runner import AgentRunner, RunConfig

    model = InstantModel(steps)
    trace_id = f"bench-compaction-{time.time_ns()}"
    workspace = Path(settings.AGENT_WORKSPACE_ROOT) / trace_id
    workspace.mkdir(parents=True)
    line = "The quick brown fox jumps over the lazy dog; " * 2
    (workspace / "data.txt").write_text("\n".join(line for _ in range(RESULT_CHARS // len(line))))
    runner = AgentRunner(llm_call=model, utility_llm_call=model)
    started = time.perf_counter()
    result = runner.run_result(
        [{"role": "user", "content": "Read data.txt again and again, then say you are done."}],
        RunConfig(new_trace_id=trace_id, name="compaction bench", max_iterations=steps + 5, stream=False),
    )
    return model, result, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--context", type=int, default=20_000)
    parser.add_argument("--worker", choices=["with", "without"])
    args = parser.parse_args()
    if args.worker:
        limit = args.context if args.worker == "with" else 100_000_000
        setup(limit)
        model, result, seconds = run(args.steps)
        steps = [t for s, t in model.requests if not s]
        summaries = sum(1 for s, _ in model.requests if s)
        print(f"RESULT {args.worker} {result.status} {seconds:.1f} {summaries} " + ",".join(map(str, steps)))
        return
    import subprocess

    rows = {}
    for mode in ("with", "without"):
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--worker",
                mode,
                "--steps",
                str(args.steps),
                "--context",
                str(args.context),
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        line = next(row for row in out.splitlines() if row.startswith("RESULT"))
        _, _, status, seconds, summaries, tokens = line.split(" ", 5)
        rows[mode] = (status, float(seconds), int(summaries), [int(t) for t in tokens.split(",")])
    raw = rows["without"][3][-1]
    print(
        f"== compaction: {args.steps} tool steps, model context {args.context:,} tokens "
        f"(threshold {int(args.context * 0.8):,}), raw history at the end {raw:,} tokens "
        f"= {raw / args.context:.1f}x the context"
    )
    print(f"{'step':>6} {'with compaction':>16} {'without':>10}")
    with_tokens, without_tokens = rows["with"][3], rows["without"][3]
    for step in sorted({*range(0, len(with_tokens), 25), len(with_tokens) - 1}):
        print(f"{step:>6} {with_tokens[step]:>16,} {without_tokens[step]:>10,}")
    for mode in ("with", "without"):
        status, seconds, summaries, tokens = rows[mode]
        over = sum(1 for t in tokens if t > args.context)
        print(
            f"{mode:>8} compaction: status {status}, {len(tokens)} model requests, largest {max(tokens):,} tokens, "
            f"{over} over the {args.context:,} limit, {summaries} summaries, {seconds:.1f} s"
        )


if __name__ == "__main__":
    main()
