"""Settings for agentsite, read from the environment.

This package is the settings module (DJANGO_SETTINGS_MODULE=agentsite.settings):
Django's own settings here, the agent runtime's in `runtime.py`, the service's
(API, channels, workers, notifications) in `service.py`, all read from the
environment through the typed helpers of `agentsite/env.py`.

Every knob has an embedded default that works on a laptop (SQLite, django-q2's ORM
broker, the in-memory channel layer); production overrides them with environment
variables (see README "Configuration").
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from agentsite.env import env_bool, env_float, env_int, env_list, env_str

# litellm fetches its price map from the internet at import unless told otherwise.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# litellm copies every request's messages after each call to shorten base64 images
# for its logging callbacks; we configure none, and the copy of a long history
# costs more than our whole step (bench/README.md). 0 turns the copy off.
os.environ.setdefault("MAX_BASE64_LENGTH_FOR_LOGGING", "0")

from agentsite.settings.paths import BASE_DIR

DEBUG = env_bool("DJANGO_DEBUG", False)
SECRET_KEY = env_str("DJANGO_SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG and env_bool("DJANGO_REQUIRE_SECRET_KEY", False):
        raise ImproperlyConfigured("DJANGO_SECRET_KEY must be set in production")
    # A per-checkout development key; production sets DJANGO_SECRET_KEY.
    SECRET_KEY = "agentsite-insecure-development-key-change-me"
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "channels",
    "django_q",
    "traces",
    "memory",
    "review",  # X6: scores, review queues (issue 23)
    "suites",  # X6: regression suites replayed from traces (issue 23)
    "tools",
    "portal",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Serves the admin's and portal's static files from the ASGI server itself.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "agentsite.urls"
ASGI_APPLICATION = "agentsite.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


def _database() -> Mapping[str, Any]:
    url = env_str("DATABASE_URL")
    if url:
        import dj_database_url

        # Web servers (ASGI) close their connection after each request, as Django's docs
        # ask of ASGI deployments: each request runs in a thread of its own, and a
        # persistent connection outlived its thread until the garbage collector found it
        # (a burst of 256 start requests held PostgreSQL's 200 connections: 503s).
        db = dj_database_url.parse(url, conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 0))
        db["CONN_HEALTH_CHECKS"] = True
        if db["ENGINE"] == "django.db.backends.sqlite3":
            db["ENGINE"] = "agentsite.backends.sqlite3"  # writers take turns, as below
        pool_size = env_int("AGENT_DB_POOL_SIZE", 8, minimum=0)
        if pool_size and db["ENGINE"] == "django.db.backends.postgresql" and sys.argv[1:2] == ["qcluster"]:
            # A worker cluster: one bounded pool per process (psycopg_pool), shared by
            # its run threads, which give their connection back while they wait
            # (traces/runner/connections.py). A pool replaces persistent connections.
            # Web servers keep one persistent connection per thread (bounded by their
            # threads): a pool would hold a request for its timeout in an outage,
            # where a direct connect fails at once and the request answers 503.
            db["CONN_MAX_AGE"] = 0
            db.setdefault("OPTIONS", {})["pool"] = {
                "min_size": 0,
                "max_size": pool_size,
                "timeout": env_float("AGENT_DB_POOL_TIMEOUT", 30.0, minimum=1.0),
            }
        return db
    return {
        # Django's SQLite backend whose writers take turns (agentsite/backends/sqlite3/base.py).
        "ENGINE": "agentsite.backends.sqlite3",
        # A worker cluster's threads keep their connection: opening one costs ~2 ms of
        # CPU (Django's functions and the PRAGMAs below), and django-q2's broker asks
        # for its connection anew five times a second, closing it each time at age 0
        # (an idle cluster: 2.3 % of a core, 1.1 % with connections kept). Runs, tools and the
        # heartbeats close theirs when they end, as on PostgreSQL.
        "CONN_MAX_AGE": None if sys.argv[1:2] == ["qcluster"] else 0,
        "NAME": env_str("SQLITE_PATH") or str(BASE_DIR / "db.sqlite3"),
        "OPTIONS": {
            # WAL lets the ASGI server read while a worker writes; IMMEDIATE
            # transactions take the write lock up front instead of failing late.
            "init_command": ("PRAGMA journal_mode=WAL;PRAGMA synchronous=NORMAL;PRAGMA busy_timeout=20000;"),
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
        },
    }


DATABASES = {"default": _database()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# Also serve straight from the apps' static folders, so `serve` works before collectstatic.
WHITENOISE_USE_FINDERS = True
LOGIN_URL = "portal:login"
LOGIN_REDIRECT_URL = "portal:trace-list"
LOGOUT_REDIRECT_URL = "portal:login"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        "LiteLLM": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
    },
}


from agentsite.settings.runtime import *  # noqa: E402, F403
from agentsite.settings.service import *  # noqa: E402, F403
