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


# --- API: named users, clients, and workers that run inline ---------------------


@pytest.fixture
def expert(db: Any) -> Any:
    """A staff expert: sees and steers every trace."""
    from tests.factories import make_user

    return make_user("expert", staff=True)


@pytest.fixture
def integrator(db: Any) -> Any:
    """An integration's user: sees and steers only its own traces."""
    from tests.factories import make_user

    return make_user("integrator")


@pytest.fixture
def stranger(db: Any) -> Any:
    """Another plain user, who must not see the integrator's traces."""
    from tests.factories import make_user

    return make_user("stranger")


@pytest.fixture
def api_client() -> Any:
    """A factory of DRF clients: `api_client(user)` is authenticated as `user`, `api_client()` anonymous."""
    from rest_framework.test import APIClient

    def make(user: Any = None) -> APIClient:
        client = APIClient()
        if user is not None:
            client.force_authenticate(user)
        return client

    return make


@pytest.fixture
def inline_worker(
    monkeypatch: Any, django_capture_on_commit_callbacks: Any, llm: Any, workspace_root: Any
) -> Any:
    """Run enqueued tasks in the test: django-q2's sync mode, triggered by the commit.

    django-q2 1.8 reads Q_CLUSTER["sync"] once, into `Conf.SYNC`, when django_q.conf
    is imported, so setting `settings.Q_CLUSTER` in a test has no effect: patch Conf.
    Services enqueue in `transaction.on_commit`, which a test transaction never
    fires, so `inline_worker()` captures the callbacks and runs them on exit.
    """
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", True)
    return lambda: django_capture_on_commit_callbacks(execute=True)
