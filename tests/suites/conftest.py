from __future__ import annotations

import pytest

from tests.suites.agent import TASKS, scripted_agent

# The named users (expert = staff, integrator = owner, stranger), api_client, inline workers.
from tests.traces.conftest import (  # noqa: F401
    api_client,
    expert,
    inline_worker,
    integrator,
    stranger,
    workspace_root,
)
from traces.models import Trace


@pytest.fixture
def source_traces(api_client, expert, llm, inline_worker) -> dict[str, str]:  # noqa: F811
    """Three traces an expert ran through the API: the material cases are made from."""
    llm.script("scripted", [scripted_agent] * 6)
    made = {}
    client = api_client(expert)
    for key, task in TASKS.items():
        with inline_worker():
            answer = client.post(
                "/api/traces", {"messages": [{"role": "user", "content": task}]}, format="json"
            )
        assert answer.status_code == 201, answer.json()
        made[key] = answer.json()["trace_id"]
        assert Trace.objects.get(pk=made[key]).status == "completed"
    return made
