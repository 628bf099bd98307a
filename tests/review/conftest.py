from __future__ import annotations

from typing import Any

import pytest

from review.models import ScoreDefinition, ScoreKind

# The named users (expert = staff, integrator = owner, stranger) and api_client.
from tests.traces.conftest import (  # noqa: F401
    api_client,
    expert,
    inline_worker,
    integrator,
    stranger,
    workspace_root,
)


@pytest.fixture
def definitions(db: Any) -> dict[str, ScoreDefinition]:
    return {
        "quality": ScoreDefinition.objects.create(
            name="quality", kind=ScoreKind.NUMERIC, minimum=1, maximum=5
        ),
        "verdict": ScoreDefinition.objects.create(
            name="verdict", kind=ScoreKind.CATEGORICAL, categories=["good", "bad"]
        ),
        "solved": ScoreDefinition.objects.create(name="solved", kind=ScoreKind.BOOLEAN),
    }


@pytest.fixture
def browser_client() -> Any:
    """`browser_client(user)`: a Django test client logged in as `user`."""
    from django.test import Client

    def make(user: Any = None) -> Client:
        client = Client()
        if user is not None:
            client.force_login(user)
        return client

    return make
