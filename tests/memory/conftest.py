"""Memory tests share the trace tests' users, clients, runner and inline worker."""

from __future__ import annotations

from typing import Any

import pytest

from tests.traces.conftest import (  # noqa: F401 (fixtures)
    api_client,
    expert,
    inline_worker,
    integrator,
    runner,
    stranger,
    workspace_root,
)


@pytest.fixture
def make_experience(db: Any) -> Any:
    """`make_experience(rule=..., **fields)`: an experience with the next code (approved by default)."""
    from memory.models import ExperienceStatus
    from memory.services import experience_create

    def make(rule: str = "do the thing", **fields: Any) -> Any:
        fields.setdefault("status", ExperienceStatus.APPROVED)
        return experience_create(rule=rule, **fields)

    return make


@pytest.fixture
def skills_dirs(tmp_path: Any, settings: Any) -> Any:
    """Empty project and user skill dirs, so the machine's own skills do not leak in."""
    project, user = tmp_path / "project-skills", tmp_path / "user-skills"
    project.mkdir()
    user.mkdir()
    settings.AGENT_SKILLS_DIRS = [project]
    settings.AGENT_USER_SKILLS_DIR = user
    return project, user


@pytest.fixture
def embedder(llm: Any, settings: Any) -> Any:
    """AGENT_EMBEDDING_MODEL pointed at the scripted server's "embedder" queue."""
    settings.AGENT_EMBEDDING_MODEL = "openai/embedder"
    settings.AGENT_EMBEDDING_API_BASE = llm.url
    settings.AGENT_EMBEDDING_API_KEY = "sk-test-not-a-secret"
    return llm
