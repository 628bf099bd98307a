from __future__ import annotations

from typing import Any

import pytest

from traces.runner import AgentRunner


@pytest.fixture
def workspace_root(tmp_path: Any, settings: Any) -> Any:
    settings.AGENT_WORKSPACE_ROOT = tmp_path / "workspaces"
    return settings.AGENT_WORKSPACE_ROOT


@pytest.fixture
def runner(llm: Any, workspace_root: Any) -> AgentRunner:
    """A runner whose models are the scripted server (through real litellm)."""
    return AgentRunner()
