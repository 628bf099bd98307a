"""The official MCP conformance kit (`@modelcontextprotocol/conformance`, server mode)
against agentsite's /mcp on a real daphne (issue 20).

The kit cannot send an API token, so it talks to /mcp through a loopback proxy that
adds `Authorization: Bearer <token>` and passes everything else through as sent
(tests/e2e/header_proxy.py). It runs every active server scenario; the README lists
the results ("agentsite as an MCP server": Conformance).

Required here: the scenarios about what every MCP server owes its clients with what
agentsite offers (the lifecycle, ping, listing tools, resources and prompts, a tool
error as a result, DNS-rebinding protection). The others call the kit's own fixtures
(tools such as `test_image_content`, resources under `test://`, prompts named
`test_*`) that only its reference server has, or optional capabilities agentsite does
not declare (logging, completions, subscriptions, progress, and sampling and
elicitation, which a stateless server cannot send); they are reported, not required.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e import header_proxy
from tests.e2e.stack import Stack
from tests.npm_packages import NODE_22, node_22_path, npm_prefix
from tests.scripted_llm import ScriptedLLM

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        bool(os.environ.get("DATABASE_URL")),
        reason="e2e tests start their own databases and servers; they run once, in the SQLite pass",
    ),
]

CONFORMANCE = "@modelcontextprotocol/conformance@0.1.16"
REQUIRED = {
    "server-initialize",
    "ping",
    "tools-list",
    "tools-call-error",
    "resources-list",
    "prompts-list",
    "dns-rebinding-protection",
}


@pytest.fixture(scope="module")
def kit() -> Path:
    return npm_prefix("mcp-conformance", [CONFORMANCE, NODE_22])


@pytest.fixture(scope="module")
def proxied_mcp(scripted_llm_server: ScriptedLLM) -> Iterator[str]:
    stack = Stack(model_url=scripted_llm_server.url, redis=False, postgres=False, cluster=False)
    proxy = header_proxy.start(stack.port, f"Bearer {stack.token}")
    yield f"http://localhost:{proxy.server_address[1]}/mcp"
    proxy.shutdown()
    stack.stop()


def scenario_results(output: Path) -> dict[str, list[dict]]:
    """Each scenario's checks, from the kit's `<output>/server-<scenario>-<time>/checks.json`."""
    results: dict[str, list[dict]] = {}
    for checks in sorted(output.glob("server-*/checks.json")):
        name = re.sub(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$", "", checks.parent.name.removeprefix("server-"))
        results[name] = json.loads(checks.read_text())
    return results


def test_the_conformance_kit_passes_every_required_server_scenario(
    kit: Path, proxied_mcp: str, tmp_path: Path
) -> None:
    run = subprocess.run(
        [
            str(kit / "node_modules" / ".bin" / "conformance"),
            "server",
            "--url",
            proxied_mcp,
            "-o",
            str(tmp_path),
        ],
        env={**os.environ, "PATH": node_22_path(kit)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    results = scenario_results(tmp_path)
    assert REQUIRED <= set(results), (sorted(results), run.stdout[-3000:], run.stderr[-3000:])
    summary = {
        name: "passed" if all(c["status"] in ("SUCCESS", "WARNING") for c in checks) else "failed"
        for name, checks in results.items()
    }
    print(json.dumps(summary, indent=1))
    failed = {
        name: [c.get("errorMessage") for c in results[name] if c["status"] == "FAILURE"]
        for name in REQUIRED
        if summary[name] != "passed"
    }
    assert not failed, failed
