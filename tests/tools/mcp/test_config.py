"""Declaring MCP servers: names, the operator's file, the admin's rows, provider-safe tool names."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from tools.mcp.adapter import server_of, tool_name
from tools.mcp.config import ServerConfigError, file_servers, server_from_dict
from tools.mcp.models import McpServer
from tools.mcp.selectors import enabled_servers


def test_tool_names_are_provider_safe_stable_and_distinct():
    assert tool_name("github", "create_issue") == "mcp__github__create_issue"
    assert tool_name("fs", "read.file") != tool_name("fs", "read_file")  # rewritten names get a digest
    long = tool_name("server-with-a-long-name", "a_tool_whose_name_goes_on_and_on_and_on_forever")
    assert len(long) == 64 and long == tool_name(
        "server-with-a-long-name", "a_tool_whose_name_goes_on_and_on_and_on_forever"
    )
    for name in (long, tool_name("fs", "read.file"), tool_name("fs", "ünïcode tool/x")):
        assert all(c.isascii() and (c.isalnum() or c in "_-") for c in name)
    assert server_of("mcp__github__create_issue") == "github" and server_of("read") is None


def test_a_declaration_is_checked_and_its_secrets_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("ISSUES_TOKEN", "s3cret")
    server = server_from_dict(
        {
            "name": "issues",
            "transport": "http",
            "url": "https://mcp.example.com/mcp",
            "bearer_token": "${ISSUES_TOKEN}",
        },
        source="file",
    )
    assert server.http_headers() == {"Authorization": "Bearer s3cret"}
    assert "s3cret" not in repr(server)
    assert server.policy("anything").risk == "risky" and server.policy("anything").offered
    for bad, message in [
        ({"name": "Bad Name", "command": "x"}, "name"),
        ({"name": "a", "transport": "ftp"}, "transport"),
        ({"name": "a", "transport": "stdio"}, "command"),
        ({"name": "a", "transport": "http", "url": "file:///x"}, "url"),
        ({"name": "a", "command": "x", "env": {"K": "${NOT_SET_ANYWHERE}"}}, "NOT_SET_ANYWHERE"),
        ({"name": "a", "command": "x", "tools": {"t": {"risk": "low"}}}, "risk"),
    ]:
        with pytest.raises(ServerConfigError, match=message):
            server_from_dict(bad, source="file")


@pytest.mark.django_db
def test_the_file_and_the_admin_declare_servers_and_a_bad_entry_leaves_the_others(
    tmp_path: Any, settings: Any, declare: Any
):
    declare(
        {"name": "files", "command": "node", "args": ["index.js"]},
        {"name": "broken", "transport": "http"},
        {"name": "off", "command": "x", "enabled": False},
        {"name": "shared", "command": "from-the-file"},
    )
    McpServer.objects.create(name="shared", command="from-the-admin")
    McpServer.objects.create(name="disabled", command="x", enabled=False)

    servers = enabled_servers()

    assert sorted(servers) == ["files", "shared"]
    assert servers["shared"].command == "from-the-admin" and servers["shared"].source == "admin"


@pytest.mark.django_db
def test_the_admin_refuses_a_row_runs_could_not_use():
    row = McpServer(name="remote", transport="http", url="not a url")
    with pytest.raises(ValidationError, match="url"):
        row.full_clean()
    row = McpServer(name="local", transport="stdio", command="node", env=["not", "an", "object"])
    with pytest.raises(ValidationError, match="env"):
        row.full_clean()


def test_the_servers_file_must_hold_a_list(tmp_path: Any, settings: Any):
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"servers": {"name": "x"}}))
    settings.AGENT_MCP_SERVERS_FILE = str(path)
    with pytest.raises(ServerConfigError, match="must hold"):
        file_servers()


@pytest.mark.django_db
def test_an_expert_declares_a_server_in_the_admin_and_runs_see_it_at_once(admin_client: Any):
    response = admin_client.post(
        "/admin/tools/mcpserver/add/",
        {
            "name": "remote",
            "transport": "http",
            "enabled": "on",
            "timeout_seconds": "30",
            "command": "",
            "args": "[]",
            "env": "{}",
            "read_only_paths": "[]",
            "url": "https://mcp.example.com/mcp",
            "headers": "{}",
            "bearer_token": "admin-token",
            "default_risk": "risky",
            "tool_policy": '{"delete": {"offered": false}}',
        },
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    assert enabled_servers()["remote"].http_headers() == {"Authorization": "Bearer admin-token"}
    assert b"remote" in admin_client.get("/admin/tools/mcpserver/").content
