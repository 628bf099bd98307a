"""GET /api/tools: every tool a preset offers, with its source (built-in or an MCP server)."""

from __future__ import annotations

import pytest

from tests.tools.mcp.conftest import counter_stdio

pytestmark = pytest.mark.django_db


def test_the_tools_of_the_default_preset_are_listed_with_their_source(
    api_client, integrator, declare, sandboxed
):
    declare(counter_stdio(tools={"increment": {"risk": "safe"}}))

    response = api_client(integrator).get("/api/tools")

    assert response.status_code == 200
    tools = {t["name"]: t for t in response.json()}
    assert tools["read"]["source"] == "builtin"
    increment = tools["mcp__counter__increment"]
    assert (increment["source"], increment["risk"]) == ("mcp:counter", "safe")
    assert tools["mcp__counter__slow"]["risk"] == "risky"
    assert increment["parameters"]["properties"]["by"]["type"] == "integer"


def test_an_unknown_preset_and_a_missing_login_answer_json_errors(api_client, integrator):
    unknown = api_client(integrator).get("/api/tools", {"preset": "no-such-preset"})
    assert unknown.status_code == 400 and unknown.json()["code"] == "unknown_preset"
    anonymous = api_client().get("/api/tools")
    assert anonymous.status_code in (401, 403) and "error" in anonymous.json()
