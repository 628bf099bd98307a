"""Against npm's reference server @modelcontextprotocol/server-everything, over stdio and streamable HTTP."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.scripted_llm import Reply, ToolCall
from tests.tools.mcp.conftest import HttpServer, everything_stdio, kill_processes
from traces.models import Message
from traces.runner import RunConfig

pytestmark = pytest.mark.django_db


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def tool_messages(trace_id: str) -> list[Message]:
    return list(Message.objects.filter(trace_id=trace_id, role="tool").order_by("sequence"))


@pytest.fixture(params=["stdio", "http"])
def transport(request: Any, everything: Any, declare: Any, http_server: Any) -> Callable[[], None]:
    """Declares the server `everything` over the transport; returns how to kill it (and, for HTTP, restart it)."""
    if request.param == "stdio":
        request.getfixturevalue("sandboxed")
        declare(everything_stdio())
        return lambda: None if kill_processes(str(everything)) else pytest.fail("no server process to kill")
    server: HttpServer = http_server(["node", str(everything), "streamableHttp"])
    declare({"name": "everything", "transport": "http", "url": server.url})

    def kill_and_restart() -> None:
        server.stop()
        server.start()

    return kill_and_restart


def test_a_run_lists_calls_gets_an_image_and_a_tool_error(runner, llm, transport):
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("mcp__everything__echo", {"message": "hello mcp"})]),
            Reply(tool_calls=[ToolCall("mcp__everything__get-tiny-image", {})]),
            Reply(tool_calls=[ToolCall("mcp__everything__get-sum", {"a": "one", "b": 2})]),
            Reply(tool_calls=[ToolCall("mcp__everything__get-structured-content", {"location": "New York"})]),
            Reply(tool_calls=[ToolCall("mcp__everything__get-resource-reference", {"resourceId": 2})]),
            Reply(text="all seen"),
        ],
    )

    result = runner.run_result(user("try the tools"), RunConfig())

    assert result.status == "completed"
    requests = llm.requests_for("scripted")
    names = {t["function"]["name"] for t in requests[0]["tools"]}
    assert {"mcp__everything__echo", "mcp__everything__get-tiny-image", "mcp__everything__get-sum"} <= names
    echo, image, failed, structured, resource = tool_messages(result.trace_id)
    assert echo.kind == "" and "hello mcp" in echo.content
    assert image.kind == "" and "an image (image/png" in image.content
    after_image = requests[2]["messages"]
    parts = [p for m in after_image if isinstance(m.get("content"), list) for p in m["content"]]
    assert any(p.get("type") == "image_url" for p in parts)  # the model saw the image
    assert failed.kind == "tool_error" and "get-sum" in failed.content
    assert structured.kind == "" and "temperature" in structured.content
    assert (
        resource.kind == "" and "[resource demo://resource/dynamic/text/2]" in resource.content
    )  # embedded, inline


def test_a_run_survives_the_server_being_killed_between_two_calls(runner, llm, transport):
    def kill_then_echo(_request: dict[str, Any]) -> Reply:
        transport()
        return Reply(tool_calls=[ToolCall("mcp__everything__echo", {"message": "second"})])

    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("mcp__everything__echo", {"message": "first"})]),
            kill_then_echo,
            Reply(tool_calls=[ToolCall("mcp__everything__echo", {"message": "third"})]),
            Reply(text="survived"),
        ],
    )

    result = runner.run_result(user("echo"), RunConfig())

    assert result.status == "completed"
    first, second, third = tool_messages(result.trace_id)
    assert "first" in first.content and "third" in third.content and third.kind == ""
    # the server was gone before the call: it starts again and the call is made, or it fails
    # clearly and the next one works
    assert "second" in second.content or (second.kind == "tool_error" and "started again" in second.content)
