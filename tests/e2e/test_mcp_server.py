"""agentsite as an MCP server (issue 20, X3): the `mcp` SDK's own client over streamable
HTTP against /mcp of a real daphne, with a real qcluster running the runs against the
scripted model (tests/e2e/stack.py: the embedded SQLite stack, and PostgreSQL).

Both protocol eras the SDK speaks are driven: the 2025 initialize handshake
(`mode="legacy"`) and the 2026-07-28 per-request envelope (`mode="auto"` probes it).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from tests.e2e.stack import Stack
from tests.e2e.test_service import need_servers
from tests.scripted_llm import Reply, ScriptedLLM, ToolCall

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        bool(os.environ.get("DATABASE_URL")),
        reason="e2e tests start their own databases and servers; they run once, in the SQLite pass",
    ),
]

ENDED = ("completed", "failed", "stopped")


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def stack(request: pytest.FixtureRequest, scripted_llm_server: ScriptedLLM) -> Iterator[Stack]:
    """daphne + one qcluster on a SQLite file, then on PostgreSQL; risky tools wait for
    an expert (ask-risky)."""
    if request.param == "postgresql":
        need_servers()
    stack = Stack(
        model_url=scripted_llm_server.url,
        redis=False,
        postgres=request.param == "postgresql",
        workers=1,
        AGENT_CONFIRM_POLICY="ask-risky",
    )
    yield stack
    stack.stop()


@pytest.fixture(scope="module")
def stranger_token(stack: Stack) -> str:
    """The API token of a third user, neither the traces' owner nor staff."""
    return stack.manage(
        "shell",
        "-c",
        "from django.contrib.auth.models import User; from rest_framework.authtoken.models import Token;"
        "print(Token.objects.create(user=User.objects.create_user('stranger', password='pw')).key)",
    ).split()[-1]


@pytest.fixture
def model(scripted_llm_server: ScriptedLLM) -> Iterator[ScriptedLLM]:
    scripted_llm_server.reset()
    yield scripted_llm_server
    scripted_llm_server.reset()


def url(stack: Stack) -> str:
    return f"http://127.0.0.1:{stack.port}/mcp"


@asynccontextmanager
async def connect(stack: Stack, token: str | None, mode: str = "legacy") -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        async with Client(streamable_http_client(url(stack), http_client=http), mode=mode) as client:
            yield client


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """A tool's JSON answer; fails the test on a tool error."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


async def refusal(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """A tool error's body: the REST API's {error, code} with the status it would answer."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.content
    return json.loads(result.content[0].text)


async def until(
    client: Client, trace_id: str, statuses: tuple[str, ...], timeout: float = 60
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        trace = await call(client, "get_trace", trace_id=trace_id)
        if trace["trace"]["status"] in statuses:
            return trace
        await asyncio.sleep(0.2)
    raise AssertionError(f"trace {trace_id} did not reach {statuses} within {timeout} s")


def contents(trace: dict[str, Any]) -> list[Any]:
    return [m["content"] for m in trace["main_path"] if m["kind"] != "context"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_start_poll_rewind_and_read_as_a_resource(stack: Stack, model: ScriptedLLM, mode: str) -> None:
    model.script("scripted", ["first answer", "rewound answer"])

    async def scenario() -> None:
        async with connect(stack, stack.token, mode) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            assert tools == {
                "start_run",
                "continue_run",
                "stop_run",
                "get_trace",
                "list_traces",
                "answer_question",
                "decide_approval",
            }
            started = await call(client, "start_run", task="say something", name=f"mcp {mode}")
            assert started["status"] == "started"
            trace_id = started["trace_id"]

            done = await until(client, trace_id, ENDED)
            assert done["trace"]["status"] == "completed", done["trace"]
            assert done["trace"]["result_summary"] == "first answer"
            assert done["trace"]["goal_tree"]["goals"]
            assert contents(done)[-2:] == ["say something", "first answer"]

            listed = await call(client, "list_traces", q=f"mcp {mode}")
            assert [t["trace_id"] for t in listed["traces"]] == [trace_id]

            first_user = next(m for m in done["main_path"] if m["content"] == "say something")
            again = await call(
                client,
                "continue_run",
                trace_id=trace_id,
                message="say it differently",
                after_sequence=first_user["sequence"],
            )
            assert again == {"trace_id": trace_id, "status": "started"}
            rewound = await until(client, trace_id, ENDED)
            assert rewound["trace"]["result_summary"] == "rewound answer"
            assert contents(rewound)[-3:] == ["say something", "say it differently", "rewound answer"]
            assert "first answer" not in contents(rewound)

            # One page at a time: `after` and `limit`, `next_after` says where the next page starts.
            page = await call(client, "get_trace", trace_id=trace_id, limit=1)
            assert len(page["main_path"]) == 1 and page["next_after"] == page["main_path"][0]["sequence"]
            rest = await call(client, "get_trace", trace_id=trace_id, after=page["next_after"])
            assert rest["next_after"] is None
            assert page["main_path"] + rest["main_path"] == rewound["main_path"]

            templates = (await client.list_resource_templates()).resource_templates
            assert [t.uri_template for t in templates] == ["agentsite://traces/{trace_id}"]
            read = await client.read_resource(f"agentsite://traces/{trace_id}")
            resource = json.loads(read.contents[0].text)
            assert read.contents[0].mime_type == "application/json"
            assert resource["trace"]["result_summary"] == "rewound answer"

            busy = await refusal(client, "stop_run", trace_id=trace_id)
            assert busy["status"] == 409 and busy["code"] == "run_conflict"

    asyncio.run(scenario())


def test_a_request_without_a_valid_token_is_refused(stack: Stack) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
    for authorization in (None, "Bearer not-a-token"):
        extra = {"Authorization": authorization} if authorization else {}
        response = httpx2.post(url(stack), json=body, headers={**headers, **extra})
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert response.json()["code"] in ("not_authenticated", "authentication_failed")

    async def scenario() -> None:
        with pytest.raises(BaseExceptionGroup) as raised:
            async with connect(stack, None) as client:
                await client.list_tools()
        assert raised.group_contains(MCPError, match="error response", depth=None)

    asyncio.run(scenario())


def test_a_stranger_cannot_see_or_steer_another_users_trace(
    stack: Stack, stranger_token: str, model: ScriptedLLM
) -> None:
    async def scenario() -> None:
        async with connect(stack, stack.token) as owner:
            trace_id = (await call(owner, "start_run", task="private work"))["trace_id"]
            await until(owner, trace_id, ENDED)
        async with connect(stack, stranger_token) as stranger:
            for tool, arguments in [
                ("get_trace", {}),
                ("continue_run", {"message": "hijack"}),
                ("stop_run", {}),
            ]:
                refused = await refusal(stranger, tool, trace_id=trace_id, **arguments)
                assert refused == {
                    "error": f"trace {trace_id!r} does not exist",
                    "code": "trace_not_found",
                    "status": 404,
                }
            assert trace_id not in {t["trace_id"] for t in (await call(stranger, "list_traces"))["traces"]}
            with pytest.raises(MCPError) as unseen:
                await stranger.read_resource(f"agentsite://traces/{trace_id}")
            assert unseen.value.code == INVALID_PARAMS and "does not exist" in unseen.value.message

    asyncio.run(scenario())


def test_an_approval_is_decided_by_an_expert_not_by_the_owner(stack: Stack, model: ScriptedLLM) -> None:
    model.script(
        "scripted",
        [Reply(tool_calls=[ToolCall("write", {"path": "plan.md", "content": "draft"})]), "Written."],
    )

    async def scenario() -> None:
        async with connect(stack, stack.token) as owner:
            trace_id = (await call(owner, "start_run", task="write plan.md"))["trace_id"]
            waiting = await until(owner, trace_id, ("waiting", *ENDED))
            assert waiting["trace"]["status"] == "waiting", waiting["trace"]
            [pending] = waiting["pending_approvals"]
            assert pending["tool"] == "write"
            refused = await refusal(
                owner,
                "decide_approval",
                trace_id=trace_id,
                approval_id=pending["approval_id"],
                decision="approve",
            )
            assert refused["status"] == 403 and refused["code"] == "not_allowed"
        async with connect(stack, stack.expert_token) as expert:
            decided = await call(
                expert,
                "decide_approval",
                trace_id=trace_id,
                approval_id=pending["approval_id"],
                decision="approve",
            )
            assert decided["status"] == "approved" and decided["decided_by"] == "reviewer"
            again = await refusal(
                expert,
                "decide_approval",
                trace_id=trace_id,
                approval_id=pending["approval_id"],
                decision="deny",
            )
            assert again["status"] == 409
            done = await until(expert, trace_id, ENDED)
            assert done["trace"]["status"] == "completed" and done["trace"]["result_summary"] == "Written."

    asyncio.run(scenario())


def test_an_open_question_is_answered_and_the_run_resumes(stack: Stack, model: ScriptedLLM) -> None:
    model.script(
        "scripted",
        [Reply(tool_calls=[ToolCall("ask_human", {"question": "Which colour?"})]), "Blue it is."],
    )

    async def scenario() -> None:
        async with connect(stack, stack.token, "auto") as client:
            refused = await refusal(client, "start_run")
            assert refused["status"] == 400 and refused["code"] == "invalid"
            assert refused["error"] == "send either messages or task (one of them)"

            trace_id = (await call(client, "start_run", task="paint it"))["trace_id"]
            waiting = await until(client, trace_id, ("waiting", *ENDED))
            [question] = waiting["open_questions"]
            assert question["question"] == "Which colour?"
            answered = await call(client, "answer_question", trace_id=question["trace_id"], answer="blue")
            assert answered["status"] == "completed" and answered["parent_trace_id"] == trace_id
            done = await until(client, trace_id, ENDED)
            assert done["trace"]["result_summary"] == "Blue it is."
            assert done["open_questions"] == []

    asyncio.run(scenario())


def test_a_foreign_host_or_origin_is_refused_before_the_token_is_read(stack: Stack) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
        "Authorization": f"Bearer {stack.token}",
    }
    response = httpx2.post(url(stack), json=body, headers={**headers, "Host": "evil.example:80"})
    assert (response.status_code, response.json()["code"]) == (400, "invalid_host")
    response = httpx2.post(url(stack), json=body, headers={**headers, "Origin": "http://evil.example"})
    assert (response.status_code, response.json()["code"]) == (403, "invalid_origin")
    response = httpx2.post(url(stack), json=body, headers={**headers, "Origin": "http://localhost:3000"})
    assert response.status_code == 200, response.text
    for method in ("GET", "DELETE"):  # stateless: no stream to open, no session to end
        response = httpx2.request(method, url(stack), headers=headers)
        assert (response.status_code, response.headers["allow"]) == (405, "POST")
