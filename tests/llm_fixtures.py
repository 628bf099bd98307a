"""Pytest plugin: the scripted model server and a `llm` fixture pointing settings at it.

Listed in tests/conftest.py's `pytest_plugins`. Needs no database.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.scripted_llm import ScriptedLLM

TEST_API_KEY = "sk-test-not-a-secret"


@pytest.fixture(scope="session")
def scripted_llm_server() -> Iterator[ScriptedLLM]:
    """One scripted model server for the whole session."""
    server = ScriptedLLM().start()
    yield server
    server.stop()


@pytest.fixture
def llm(scripted_llm_server: ScriptedLLM, settings: Any) -> Iterator[ScriptedLLM]:
    """The scripted server, reset, with AGENT_MODEL / AGENT_UTILITY_MODEL pointing at it.

    The main model answers from the "scripted" queue, the utility model from "utility".
    """
    scripted_llm_server.reset()
    settings.AGENT_MODEL = "openai/scripted"
    settings.AGENT_API_BASE = scripted_llm_server.url
    settings.AGENT_API_KEY = TEST_API_KEY
    settings.AGENT_UTILITY_MODEL = "openai/utility"
    settings.AGENT_UTILITY_API_BASE = scripted_llm_server.url
    settings.AGENT_UTILITY_API_KEY = TEST_API_KEY
    yield scripted_llm_server
    scripted_llm_server.reset()
