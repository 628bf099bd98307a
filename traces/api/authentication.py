"""API tokens (DRF's `rest_framework.authtoken`): a key's token and user in one read.

Every front door that takes a token (the REST API, the WebSocket handshake, /mcp,
A2A) checks it here, so an unknown key, a deleted token or an inactive user is
refused the same way everywhere, with DRF's own answers.

The read is one raw statement, written once per process from the models' metadata,
instead of `Token.objects.select_related("user").get(key=...)`, which the ORM
compiles again on every request. `User.objects.raw` still turns the row into a
user as the ORM does (each field's database converters). Pays (PostgreSQL 15, CPU
per look-up, median of 500, 2026-11-28): 0.24 against 0.48 ms; during a burst of
starts a request thread holds daphne's interpreter lock for the look-up, while
the event loop waits to deliver live events (bench/density.py, README).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connections, router
from django.utils.translation import gettext_lazy as _
from rest_framework import authentication, exceptions
from rest_framework.authtoken.models import Token


def token_for_key(key: str) -> Token | None:
    """The token with `key`, its user already loaded (active or not), or None."""
    user_model = get_user_model()
    alias = router.db_for_read(Token)
    users = list(user_model._default_manager.db_manager(alias).raw(_token_user_sql(alias), [key]))
    if not users:
        return None
    user = users[0]
    token = Token.from_db(alias, ["key", "user_id"], [key, user.pk])  # `created` deferred: read if asked for
    token.user = user
    return token


def active_user_for_key(key: str) -> Any | None:
    """The active user whose token `key` is, or None."""
    token = token_for_key(key)
    return token.user if token is not None and token.user.is_active else None


@cache
def _token_user_sql(alias: str) -> str:
    quote = connections[alias].ops.quote_name
    user_meta = get_user_model()._meta
    token_meta = Token._meta
    columns = ", ".join(f"u.{quote(field.column)}" for field in user_meta.concrete_fields)
    return (
        f"SELECT {columns} FROM {quote(token_meta.db_table)} t "
        f"JOIN {quote(user_meta.db_table)} u ON u.{quote(user_meta.pk.column)} = "
        f"t.{quote(token_meta.get_field('user').column)} "
        f"WHERE t.{quote(token_meta.get_field('key').column)} = %s"
    )


class TokenAuthentication(authentication.TokenAuthentication):
    """DRF's token authentication (`Authorization: Token <key>`, its answers and
    errors), the look-up done by `token_for_key`."""

    def authenticate_credentials(self, key: str) -> tuple[Any, Token]:
        token = token_for_key(key)
        if token is None:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        return token.user, token
