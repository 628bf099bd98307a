"""The served OpenAPI schema and the API agree (W2, W6): schemathesis generates
requests from `/api/schema/` for every operation in it (valid and invalid data,
fixed seed, 25 examples each) and runs all its checks on the answers (no server
error, status codes, content types, response schemas, invalid data refused, valid
data accepted, auth not ignored), in-process through the WSGI app on the test
database, authenticated as an expert. About 40 s on SQLite, 45 s on PostgreSQL.

Not covered: `WS /api/traces/{id}/watch` is no HTTP operation and not in the
schema (tests/traces/test_watch.py covers it).

No run starts: POSTs that start runs only enqueue a django-q task on commit, and
a test transaction never commits; no worker runs in tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import hypothesis
import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from rest_framework.authtoken.models import Token

from tests.factories import make_trace, make_user

SEED = 20261123
# GETs under /api/traces/{trace_id} read this trace, so their 200 answers are
# checked against the response schemas too (random ids would all be 404s).
TRACE_ID = "conformance-trace"
# Valid by the schema, refused by a check the schema cannot state: a body that
# passes the schema may still get 400 here (and only here).
SEMANTIC_400 = [
    # preset and tool names are looked up in the registry; the messages need a user one
    ("POST", "/api/traces"),
    ("GET", "/api/tools"),
    # the text must be a well-formed experiences.md
    ("POST", "/api/experiences/import"),
    # memory entries pass the write gate (no code, paths, git commands; Rule/Why/How to apply)
    ("POST", "/api/memory"),
    ("PATCH", "/api/memory/{entry_id}"),
    ("POST", "/api/memory/import"),
]
ACCEPTED_WITH_SEMANTIC_400 = ["2xx", "3xx", "400", "401", "403", "404", "409", "429"]
CONFIG = schemathesis.Config.from_dict(
    {
        "seed": SEED,
        "generation": {"max-examples": 25, "database": "none"},
        "continue-on-failure": True,
        "operations": [
            {
                "include-method": "GET",
                "include-path-regex": "^/api/traces/[{]trace_id[}]",
                "parameters": {"path.trace_id": TRACE_ID},
            },
            *(
                {
                    "include-method": method,
                    "include-path": path,
                    "checks": {"positive_data_acceptance": {"expected-statuses": ACCEPTED_WITH_SEMANTIC_400}},
                }
                for method, path in SEMANTIC_400
            ),
        ],
    }
)

schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", get_wsgi_application(), config=CONFIG)


@pytest.fixture
def expert_token(db: Any, settings: Any) -> Iterator[str]:
    """A staff user's token, and the trace the GETs read; requests keep the test's connection.

    Django's request signals close "old" connections, which inside a test
    transaction would spoil it; Django's own test client unhooks them the same way.
    """
    settings.AGENT_MODEL = "openai/scripted"  # runs are only queued, never called
    expert = make_user("expert", staff=True)
    make_trace(expert, trace_id=TRACE_ID, messages=[("user", "hi"), ("assistant", "hello")])
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield Token.objects.create(user=expert).key
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@schema.parametrize()
# One expert and one token for all the examples of an operation is what we want.
@hypothesis.settings(suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture])
def test_api_answers_as_its_schema_says(case: Any, expert_token: str) -> None:
    case.call_and_validate(headers={"Authorization": f"Token {expert_token}"})
