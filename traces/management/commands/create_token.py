"""Issue an API token for a user, replacing any old one (W4)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from rest_framework.authtoken.models import Token


class Command(BaseCommand):
    help = (
        "Print a new API token for USERNAME (use it as 'Authorization: Token <key>'). "
        "The user's previous token stops working. Tokens can also be issued and revoked in the admin."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")

    def handle(self, *args: Any, username: str, **options: Any) -> None:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(
                f"no user named {username!r}; create it first (e.g. manage.py createsuperuser)"
            )
        with transaction.atomic():
            Token.objects.filter(user=user).delete()
            token = Token.objects.create(user=user)
        self.stdout.write(token.key)
