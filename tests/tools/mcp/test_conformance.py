"""The official MCP conformance suite (@modelcontextprotocol/conformance, client mode) against our client.

The suite starts its own test server per scenario and runs conformance_client.py,
which connects through tools/mcp/client.py as runs do. The scenarios below are the
ones our client implements; elicitation and OAuth are not (README: MCP servers).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.tools.mcp.conftest import NPM_DIR, REPO

CONFORMANCE = NPM_DIR / "node_modules" / ".bin" / "conformance"
CLIENT = Path(__file__).with_name("conformance_client.py")


@pytest.mark.parametrize("scenario", ["initialize", "tools_call", "sse-retry"])
def test_our_client_passes_the_conformance_scenario(scenario: str, everything: Path):
    if not CONFORMANCE.exists():
        pytest.fail(f"{CONFORMANCE} is missing: run scripts/install_npm_packages.sh")
    done = subprocess.run(
        [str(CONFORMANCE), "client", "--command", f"{sys.executable} {CLIENT}", "--scenario", scenario],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = done.stdout + done.stderr
    assert "OVERALL: PASSED" in report, report[-3000:]
