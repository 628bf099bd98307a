"""What one model call costs in CPU over HTTP, streamed and plain (issue 18).

A density burst is bound by CPU on 2 cores (README, Density), and the largest part
of a run's CPU is its model calls. This measures one call of the density workload
(a `write` tool call back, the 24 built-in tools offered, a short history) against
tests/scripted_llm.py in its own process, so the server's CPU is not counted: CPU
ms per call of every thread of this process (litellm logs in background threads;
the bench waits for them), for each layer from the wire up:

- httpx alone: the request and the reply's JSON or SSE lines parsed, nothing else;
- the OpenAI SDK (what litellm's default OpenAI path calls);
- `litellm.completion` on its default path, and with
  `EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER=true` (README, Production, Sizing);
- `traces.llm.LLMClient`, which the runner calls (litellm plus our reply folding).

Streamed calls ask for the usage chunk, as the runner does. Medians of `--rounds`
rounds of `--calls` calls; the variants take turns in each round. The machine is
shared: compare figures within one run.

Usage: python bench/stream_cost.py [--calls 50] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
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

from bench.harness import start_scripted_model  # noqa: E402
from tests.scripted_llm import Reply, ToolCall  # noqa: E402

HANDLER = "EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER"


def _reply(body: dict[str, Any]) -> Reply:
    return Reply(tool_calls=[ToolCall("write", {"path": "f0.txt", "content": "x"})])


def variants(base: str) -> dict[str, Callable[[bool], Any]]:
    import httpx
    import litellm
    import openai

    from tools.registry import load_builtin_tools
    from traces.llm import LLMClient, ModelSettings

    registry = load_builtin_tools()
    tools = [registry.get(name).schema() for name in registry.names()]  # type: ignore[union-attr]
    messages = [
        {"role": "system", "content": "You are a careful agent. " * 40},
        {"role": "user", "content": "Write three files (1)."},
    ]
    usage = {"include_usage": True}
    http = httpx.Client()
    sdk = openai.OpenAI(base_url=base, api_key="sk-bench")
    client = LLMClient()
    model = ModelSettings("openai/scripted", base, "sk-bench")

    def wire(stream: bool) -> Any:
        body = {"model": "scripted", "messages": messages, "tools": tools, "stream": stream}
        if not stream:
            return http.post(f"{base}/chat/completions", json=body).json()
        with http.stream("POST", f"{base}/chat/completions", json={**body, "stream_options": usage}) as reply:
            return [json.loads(line[6:]) for line in reply.iter_lines() if line.startswith("data: {")]

    def openai_sdk(stream: bool) -> Any:
        if not stream:
            return sdk.chat.completions.create(model="scripted", messages=messages, tools=tools)  # type: ignore[arg-type]
        return list(
            sdk.chat.completions.create(
                model="scripted",
                messages=messages,  # type: ignore[arg-type]
                tools=tools,  # type: ignore[arg-type]
                stream=True,
                stream_options=usage,  # type: ignore[arg-type]
            )
        )

    def litellm_call(handler: str) -> Callable[[bool], Any]:
        def call(stream: bool) -> Any:
            os.environ[HANDLER] = handler  # litellm reads it on every call
            kwargs = {"model": "openai/scripted", "api_base": base, "api_key": "sk-bench"}
            if not stream:
                return litellm.completion(messages=messages, tools=tools, **kwargs)
            return list(
                litellm.completion(
                    messages=messages, tools=tools, stream=True, stream_options=usage, **kwargs
                )
            )

        return call

    def ours(handler: str) -> Callable[[bool], Any]:
        def call(stream: bool) -> Any:
            os.environ[HANDLER] = handler
            on_token = (lambda text: None) if stream else None
            return client(messages, model=model, tools=tools, stream=stream, on_token=on_token)

        return call

    return {
        "httpx alone (the wire)": wire,
        "OpenAI SDK": openai_sdk,
        "litellm.completion, default path": litellm_call("false"),
        f"litellm.completion, {HANDLER}": litellm_call("true"),
        "LLMClient, default path": ours("false"),
        f"LLMClient, {HANDLER}": ours("true"),
    }


def cpu_ms(call: Callable[[bool], Any], stream: bool, calls: int) -> float:
    import litellm.litellm_core_utils.thread_pool_executor as pool

    started = time.process_time()
    for _ in range(calls):
        call(stream)
    pool.executor.submit(lambda: None).result()  # litellm's logging of the last call has run
    time.sleep(0.05)
    return (time.process_time() - started) * 1000 / calls


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    process, base = start_scripted_model(_reply)  # before Django or any thread of ours
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
    import django

    django.setup()
    try:
        table = variants(base)
        chunks = len(table["httpx alone (the wire)"](True))
        for call in table.values():  # warm: imports, connections
            cpu_ms(call, True, 3)
            cpu_ms(call, False, 3)
        figures: dict[str, dict[bool, list[float]]] = {name: {True: [], False: []} for name in table}
        for _ in range(args.rounds):
            for name, call in table.items():
                for stream in (True, False):
                    figures[name][stream].append(cpu_ms(call, stream, args.calls))
    finally:
        process.kill()
    print(
        f"# stream_cost, {time.strftime('%Y-%m-%d %H:%M %Z')}; {os.cpu_count()} CPUs;"
        f" litellm {version('litellm')}, openai {version('openai')}; load {os.getloadavg()[0]:.2f}"
    )
    print(f"# a tool-call reply, 24 tools offered; {chunks} SSE chunks streamed; CPU ms per call, medians")
    print(f"| {'layer':<62} | streamed | plain |\n|---|---:|---:|")
    for name, by_stream in figures.items():
        streamed, plain = (statistics.median(by_stream[s]) for s in (True, False))
        print(f"| {name:<62} | {streamed:8.2f} | {plain:5.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
