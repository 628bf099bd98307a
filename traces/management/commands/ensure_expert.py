"""Make sure the expert account exists: a staff superuser to log in to the portal."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

DEFAULT_USERNAME = "expert"


def default_password_file() -> Path:
    return Path(settings.BASE_DIR) / ".cache" / "expert_password"


def _write_secret(path: Path, secret: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        os.fchmod(handle.fileno(), 0o600)  # the file may have existed with wider rights
        handle.write(secret + "\n")


class Command(BaseCommand):
    help = (
        "Create the staff superuser 'expert' with a generated password (printed once and kept in "
        ".cache/expert_password), or reuse it if it exists. EXPERT_PASSWORD overrides the password."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default=DEFAULT_USERNAME)
        parser.add_argument("--password-file", type=Path, default=None)

    def handle(self, *args: Any, username: str, password_file: Path | None, **options: Any) -> None:
        password_file = password_file or default_password_file()
        given = os.environ.get("EXPERT_PASSWORD", "")
        User = get_user_model()
        with transaction.atomic():
            user = User.objects.select_for_update().filter(username=username).first()
            created = user is None
            if user is None:
                password = given or secrets.token_urlsafe(18)
                user = User.objects.create_superuser(username=username, email="", password=password)
            else:
                password = given
                user.is_staff = user.is_superuser = user.is_active = True
                if given:
                    user.set_password(given)
                user.save()
        if given:
            action = "Created" if created else "Updated"
            self.stdout.write(
                f"{action} staff superuser '{username}' with the password from EXPERT_PASSWORD."
            )
        elif created:
            _write_secret(password_file, password)
            self.stdout.write(
                f"Created staff superuser '{username}' with password: {password}\n"
                f"(shown once; kept in {password_file}, readable by you only)"
            )
        else:
            where = f"in {password_file}" if password_file.exists() else "the one set earlier"
            self.stdout.write(f"Staff superuser '{username}' exists; its password is {where}.")
