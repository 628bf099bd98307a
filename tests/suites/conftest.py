from __future__ import annotations

# The named users (expert = staff, integrator = owner, stranger), api_client, inline workers.
from tests.traces.conftest import (  # noqa: F401
    api_client,
    expert,
    inline_worker,
    integrator,
    stranger,
    workspace_root,
)
