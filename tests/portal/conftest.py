from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

# Named users and the inline worker, shared with the API tests.
from tests.traces.conftest import expert, inline_worker, integrator, stranger, workspace_root  # noqa: F401


@pytest.fixture
def browser_client() -> Any:
    """`browser_client(user)`: a Django test client logged in as `user` (session, like a browser)."""

    def make(user: Any = None, **kwargs: Any) -> Client:
        client = Client(**kwargs)
        if user is not None:
            client.force_login(user)
        return client

    return make
