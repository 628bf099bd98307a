"""API tokens (traces/api/authentication.py): one raw read gives what DRF's ORM look-up gave."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.test import APIClient

from memory.models import AgentPreset
from memory.presets import get_preset
from traces.api.authentication import TokenAuthentication, active_user_for_key, token_for_key

pytestmark = pytest.mark.django_db


def test_a_key_reads_its_token_and_user_in_one_query_as_the_orm_loads_them(integrator):
    integrator.first_name = "Ada"
    integrator.save()
    stored = Token.objects.create(user=integrator)

    with CaptureQueriesContext(connection) as queries:
        token = token_for_key(stored.key)
        assert token is not None
        user = token.user
    assert len(queries) == 1

    orm_user = User.objects.get(pk=integrator.pk)
    for field in User._meta.concrete_fields:
        ours, orm = getattr(user, field.attname), getattr(orm_user, field.attname)
        assert (ours, type(ours)) == (orm, type(orm)), field.name
    assert (token.key, token.user_id, token.created) == (stored.key, stored.user_id, stored.created)
    assert not token._state.adding and not user._state.adding


def test_an_unknown_key_reads_nothing_and_an_inactive_user_is_no_user(integrator):
    key = Token.objects.create(user=integrator).key
    assert token_for_key("0" * 40) is None
    assert active_user_for_key(key) == integrator

    integrator.is_active = False
    integrator.save()

    assert token_for_key(key) is not None
    assert active_user_for_key(key) is None


def test_the_api_refuses_an_inactive_users_token_as_drf_does(integrator):
    key = Token.objects.create(user=integrator).key
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/traces").status_code == 200

    integrator.is_active = False
    integrator.save()

    response = client.get("/api/traces")
    assert response.status_code == 401
    assert response.json() == {"error": "User inactive or deleted.", "code": "authentication_failed"}
    with pytest.raises(AuthenticationFailed, match="Invalid token"):
        TokenAuthentication().authenticate_credentials(key[::-1])


def test_a_stored_preset_is_read_in_one_query_with_its_json_fields_decoded():
    AgentPreset.objects.create(
        name="auditor", allowed_tools=["read_file"], max_iterations=7, temperature=0.5, extra={"k": [1]}
    )

    with CaptureQueriesContext(connection) as queries:
        preset = get_preset("auditor")
    assert len(queries) == 1

    assert (preset.allowed_tools, preset.max_iterations, preset.temperature, preset.extra) == (
        ["read_file"],
        7,
        0.5,
        {"k": [1]},
    )
    assert preset.denied_tools is None
