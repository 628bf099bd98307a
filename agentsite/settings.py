"""Settings for agentsite, read from the environment.

Every knob has an embedded default that works on a laptop (SQLite, django-q2's ORM
broker, the in-memory channel layer); production overrides them with environment
variables (see README "Configuration").
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from agentsite.env import env_bool, env_float, env_int, env_list, env_str

# litellm fetches its price map from the internet at import unless told otherwise.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# litellm copies every request's messages after each call to shorten base64 images
# for its logging callbacks; we configure none, and the copy of a long history
# costs more than our whole step (bench/README.md). 0 turns the copy off.
os.environ.setdefault("MAX_BASE64_LENGTH_FOR_LOGGING", "0")

BASE_DIR = Path(__file__).resolve().parent.parent


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

        db = dj_database_url.parse(url, conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60))
        db["CONN_HEALTH_CHECKS"] = True
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
        "ENGINE": "django.db.backends.sqlite3",
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

# --- The agent runtime -------------------------------------------------------

AGENT_MODEL = env_str("AGENT_MODEL")
AGENT_API_BASE = env_str("AGENT_API_BASE")
AGENT_API_KEY = env_str("AGENT_API_KEY")
AGENT_UTILITY_MODEL = env_str("AGENT_UTILITY_MODEL") or AGENT_MODEL
AGENT_UTILITY_API_BASE = env_str("AGENT_UTILITY_API_BASE") or AGENT_API_BASE
AGENT_UTILITY_API_KEY = env_str("AGENT_UTILITY_API_KEY") or AGENT_API_KEY
# JSON object {"model": {"input_cost_per_token": ..., "output_cost_per_token": ...}}
# registered with litellm so local or private models get a cost.
AGENT_MODEL_PRICES = env_str("AGENT_MODEL_PRICES")
AGENT_LLM_RETRIES = env_int("AGENT_LLM_RETRIES", 2, minimum=0)
AGENT_LLM_TIMEOUT = env_float("AGENT_LLM_TIMEOUT", 120.0, minimum=1.0)
AGENT_STREAM = env_bool("AGENT_STREAM", True)
AGENT_MAX_ITERATIONS = env_int("AGENT_MAX_ITERATIONS", 200, minimum=1)
AGENT_CONTEXT_EVERY = env_int("AGENT_CONTEXT_EVERY", 10, minimum=1)
AGENT_WORKSPACE_ROOT = Path(env_str("AGENT_WORKSPACE_ROOT") or str(BASE_DIR / "workspaces"))
AGENT_TOOL_TIMEOUT = env_float("AGENT_TOOL_TIMEOUT", 60.0, minimum=0.1)
# Read-only calls of one reply run at once, at most this many (1 = one at a time).
AGENT_PARALLEL_TOOLS = env_int("AGENT_PARALLEL_TOOLS", 4, minimum=1)
# A sub-agent's parent hears a subagent_checkpoint every this many child rounds (seed 002: 8; 0 = never).
AGENT_SUBAGENT_CHECKPOINT_ROUNDS = env_int("AGENT_SUBAGENT_CHECKPOINT_ROUNDS", 8, minimum=0)
# query_subagent_status (seed 002): asks per parent turn, and the seconds between two.
AGENT_STATUS_QUERY_BUDGET_PER_TURN = env_int("AGENT_STATUS_QUERY_BUDGET_PER_TURN", 2, minimum=0)
AGENT_STATUS_QUERY_COOLDOWN_SECONDS = env_float("AGENT_STATUS_QUERY_COOLDOWN_SECONDS", 8.0, minimum=0.0)
# L5 images and PDF pages in messages (traces/media/): bytes are stored once, by
# sha256, under AGENT_MEDIA_ROOT (shared by the web and worker processes, like the
# workspaces); messages keep a reference. Limits are on decoded bytes.
AGENT_MEDIA_ROOT = Path(env_str("AGENT_MEDIA_ROOT") or str(BASE_DIR / "media"))
AGENT_MEDIA_IMAGE_BYTES = env_int("AGENT_MEDIA_IMAGE_BYTES", 5 * 1024 * 1024, minimum=1024)
AGENT_MEDIA_PDF_BYTES = env_int("AGENT_MEDIA_PDF_BYTES", 20 * 1024 * 1024, minimum=1024)
AGENT_MEDIA_MESSAGE_BYTES = env_int("AGENT_MEDIA_MESSAGE_BYTES", 25 * 1024 * 1024, minimum=1024)
AGENT_MEDIA_PARTS = env_int("AGENT_MEDIA_PARTS", 10, minimum=1)  # images and PDFs per message
AGENT_MEDIA_PDF_PAGES = env_int("AGENT_MEDIA_PDF_PAGES", 20, minimum=1)  # pages rendered per PDF
AGENT_MEDIA_ALLOW_PRIVATE_URLS = env_bool("AGENT_MEDIA_ALLOW_PRIVATE_URLS", False)
AGENT_BASH_TIMEOUT = env_float("AGENT_BASH_TIMEOUT", 30.0, minimum=0.1)
AGENT_TOOL_OUTPUT_LIMIT = env_int("AGENT_TOOL_OUTPUT_LIMIT", 50_000, minimum=1000)
# X1: every process a tool starts runs under bubblewrap (tools/sandbox/). Off only by
# an explicit AGENT_SANDBOX=off, which runs commands unconfined (a warning says so).
AGENT_SANDBOX = env_bool("AGENT_SANDBOX", True)
# G5 per-call confirmation: which bash commands ask an expert under ask-risky
# (tools/bash_rules.py); a JSON object name -> regex replaces the built-in rules.
AGENT_BASH_CONFIRM_RULES: dict[str, str] | None = None
if _rules := env_str("AGENT_BASH_CONFIRM_RULES"):
    try:
        AGENT_BASH_CONFIRM_RULES = json.loads(_rules)
        if not isinstance(AGENT_BASH_CONFIRM_RULES, dict):
            raise ValueError("not a JSON object")
        for _name, _pattern in AGENT_BASH_CONFIRM_RULES.items():
            re.compile(_pattern)
    except (ValueError, TypeError, re.error) as exc:
        raise ImproperlyConfigured(
            f"AGENT_BASH_CONFIRM_RULES must be a JSON object of name -> regular expression: {exc}"
        ) from None
AGENT_SANDBOX_BWRAP = env_str("AGENT_SANDBOX_BWRAP", "bwrap")
AGENT_SANDBOX_NETWORK = env_bool("AGENT_SANDBOX_NETWORK", False)
# Variables of the server's environment a sandboxed command may see (names only).
AGENT_SANDBOX_ENV = env_list("AGENT_SANDBOX_ENV", [])
if bad_names := [n for n in AGENT_SANDBOX_ENV if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n)]:
    raise ImproperlyConfigured(f"AGENT_SANDBOX_ENV names what is not a variable name: {', '.join(bad_names)}")
AGENT_SANDBOX_CPU_SECONDS = env_int("AGENT_SANDBOX_CPU_SECONDS", 60, minimum=1)
AGENT_SANDBOX_MEMORY_MB = env_int("AGENT_SANDBOX_MEMORY_MB", 2048, minimum=64)
AGENT_SANDBOX_MAX_PROCESSES = env_int("AGENT_SANDBOX_MAX_PROCESSES", 256, minimum=8)
AGENT_SANDBOX_FILE_MB = env_int("AGENT_SANDBOX_FILE_MB", 1024, minimum=1)

# MCP servers as tool sources (tools/mcp/): a JSON file of server declarations for
# deployments (the admin declares others), and how long a server's tool list is
# trusted before it is listed again (a list_changed notification relists at once).
AGENT_MCP_SERVERS_FILE = env_str("AGENT_MCP_SERVERS_FILE")
AGENT_MCP_LIST_SECONDS = env_int("AGENT_MCP_LIST_SECONDS", 300, minimum=1)
AGENT_LEASE_SECONDS = env_int("AGENT_LEASE_SECONDS", 30, minimum=2)
AGENT_STOP_POLL_SECONDS = env_float("AGENT_STOP_POLL_SECONDS", 0.25, minimum=0.01)
# Memory (M4, M6): experiences retrieved per new trace, optional embeddings, skill dirs.
AGENT_EXPERIENCE_TOP_K = env_int("AGENT_EXPERIENCE_TOP_K", 5, minimum=0)
# relevance (tags + full text) an experience needs to be injected (memory/retrieval/search.py)
AGENT_EXPERIENCE_MIN_SCORE = env_float("AGENT_EXPERIENCE_MIN_SCORE", 0.75, minimum=0.0)
AGENT_EMBEDDING_MODEL = env_str("AGENT_EMBEDDING_MODEL")
AGENT_EMBEDDING_API_BASE = env_str("AGENT_EMBEDDING_API_BASE") or AGENT_API_BASE
AGENT_EMBEDDING_API_KEY = env_str("AGENT_EMBEDDING_API_KEY") or AGENT_API_KEY
AGENT_SKILLS_DIRS = [
    path if path.is_absolute() else BASE_DIR / path
    for path in map(Path, env_list("AGENT_SKILLS_DIRS", ["skills"]))
]
AGENT_USER_SKILLS_DIR = Path(env_str("AGENT_USER_SKILLS_DIR") or str(Path.home() / ".agentsite" / "skills"))
# G3 timeouts: a call over AGENT_TIMEOUT_HARD is abandoned; a stream silent for
# AGENT_TIMEOUT_HEARTBEAT is abandoned; no first token within
# AGENT_TIMEOUT_FIRST_FEEDBACK emits a `waiting` pulse event. The per-request
# (invoke) timeout is AGENT_LLM_TIMEOUT.
AGENT_TIMEOUT_HARD = env_float("AGENT_TIMEOUT_HARD", 300.0, minimum=1.0)
AGENT_TIMEOUT_HEARTBEAT = env_float("AGENT_TIMEOUT_HEARTBEAT", 60.0, minimum=0.5)
AGENT_TIMEOUT_FIRST_FEEDBACK = env_float("AGENT_TIMEOUT_FIRST_FEEDBACK", 8.0, minimum=0.1)
# G4: dotted paths of functions that register lifecycle hooks (traces/guards/hooks.py).
AGENT_HOOKS = env_list("AGENT_HOOKS", [])
# R7: dotted paths of context hooks (trace, goal_tree) -> str | None added to every
# run's periodic context injection (traces/runner/context.py:default_context_hooks).
# Built-in, off unless named: traces.context_hooks.system_alerts, traces.context_hooks.running_time_reminder.
AGENT_CONTEXT_HOOKS = env_list("AGENT_CONTEXT_HOOKS", [])
AGENT_ALERT_DISK_PERCENT = env_int("AGENT_ALERT_DISK_PERCENT", 90, minimum=0)
AGENT_ALERT_LOAD_PER_CPU = env_float("AGENT_ALERT_LOAD_PER_CPU", 2.0, minimum=0.0)
AGENT_REMINDER_MINUTES = env_int("AGENT_REMINDER_MINUTES", 30, minimum=0)
# G5: which tool calls wait for an expert: auto | ask-risky | ask-all.
AGENT_CONFIRM_POLICY = env_str("AGENT_CONFIRM_POLICY", "auto")
if AGENT_CONFIRM_POLICY not in ("auto", "ask-risky", "ask-all"):
    raise ImproperlyConfigured(
        f"AGENT_CONFIRM_POLICY={AGENT_CONFIRM_POLICY!r}: use auto, ask-risky or ask-all"
    )
# G5: sub-agents are gated like their parent unless this lets them auto-approve.
AGENT_SUBAGENT_AUTO_APPROVE = env_bool("AGENT_SUBAGENT_AUTO_APPROVE", False)
# G5: who may approve, deny or edit a waiting tool call: staff (experts) only, or
# also the trace's owner.
AGENT_APPROVERS = env_str("AGENT_APPROVERS", "staff")
if AGENT_APPROVERS not in ("staff", "owner"):
    raise ImproperlyConfigured(f"AGENT_APPROVERS={AGENT_APPROVERS!r}: use staff or owner")
# C1-C5: context management. The model's context comes from litellm's model info
# unless AGENT_CONTEXT_TOKENS says (needed for models litellm does not know);
# compaction starts above AGENT_COMPACTION_THRESHOLD of it.
AGENT_CONTEXT_TOKENS = env_int("AGENT_CONTEXT_TOKENS", 0, minimum=0)
AGENT_COMPACTION_THRESHOLD = env_float("AGENT_COMPACTION_THRESHOLD", 0.8, minimum=0.1)
AGENT_COMPACTION_REFLECT = env_bool("AGENT_COMPACTION_REFLECT", True)
# Seed 001 layer 2, microcompact (traces/runner/microcompact.py): above
# AGENT_MICROCOMPACT_THRESHOLD of the context (0: always), tool results older than the
# newest AGENT_MICROCOMPACT_KEEP (0: off; run setting microcompact_keep) are stubs in requests.
AGENT_MICROCOMPACT_KEEP = env_int("AGENT_MICROCOMPACT_KEEP", 5, minimum=0)
AGENT_MICROCOMPACT_THRESHOLD = env_float("AGENT_MICROCOMPACT_THRESHOLD", 0.5, minimum=0.0)
# C3: tool results longer than this are spilled to the workspace with a preview.
AGENT_TOOL_SPILL_CHARS = env_int("AGENT_TOOL_SPILL_CHARS", 20_000, minimum=1000)
AGENT_TOOL_SPILL_PREVIEW = env_int("AGENT_TOOL_SPILL_PREVIEW", 2_000, minimum=100)
# G6: loop detection thresholds (repeats of one pattern).
AGENT_LOOP_WARNING = env_int("AGENT_LOOP_WARNING", 4, minimum=2)
AGENT_LOOP_CRITICAL = env_int("AGENT_LOOP_CRITICAL", 8, minimum=3)
# T3 webfetch: bytes read per page, seconds for a whole fetch (redirects included),
# and whether loopback/private/link-local targets are allowed (tests, intranets).
AGENT_WEBFETCH_MAX_BYTES = env_int("AGENT_WEBFETCH_MAX_BYTES", 2 * 1024 * 1024, minimum=1024)
AGENT_WEBFETCH_TIMEOUT = env_float("AGENT_WEBFETCH_TIMEOUT", 20.0, minimum=0.1)
AGENT_WEBFETCH_ALLOW_PRIVATE = env_bool("AGENT_WEBFETCH_ALLOW_PRIVATE", False)
# C3: a webfetch page or browser page state longer than this is shown to the model once,
# then stands in the history as a one-line note (ToolResult.include_output_only_once).
AGENT_SHOWN_ONCE_CHARS = env_int("AGENT_SHOWN_ONCE_CHARS", 4000, minimum=100)
# The browser tools (tools/browser/): Chromium's path, seconds per action and per call,
# open pages, characters of page text per result, bytes per download. Pages obey
# AGENT_WEBFETCH_ALLOW_PRIVATE like webfetch.
AGENT_BROWSER_CHROMIUM = os.environ.get("AGENT_BROWSER_CHROMIUM", "/usr/bin/chromium")
AGENT_BROWSER_ACTION_TIMEOUT = env_float("AGENT_BROWSER_ACTION_TIMEOUT", 10.0, minimum=0.5)
AGENT_BROWSER_CALL_TIMEOUT = env_float("AGENT_BROWSER_CALL_TIMEOUT", 60.0, minimum=1.0)
AGENT_BROWSER_MAX_PAGES = env_int("AGENT_BROWSER_MAX_PAGES", 5, minimum=1)
AGENT_BROWSER_TEXT_LIMIT = env_int("AGENT_BROWSER_TEXT_LIMIT", 8000, minimum=500)
AGENT_BROWSER_DOWNLOAD_MAX_BYTES = env_int("AGENT_BROWSER_DOWNLOAD_MAX_BYTES", 20 * 1024 * 1024, minimum=1024)
# Chromium's memory (MB) and tasks (processes and threads) per browser session, held by a
# cgroup where the server runs as root with a memory controller (tools/browser/cgroup.py);
# elsewhere the memory is not bounded and the system check says so.
AGENT_BROWSER_MEMORY_MB = env_int("AGENT_BROWSER_MEMORY_MB", 1024, minimum=128)
AGENT_BROWSER_MAX_TASKS = env_int("AGENT_BROWSER_MAX_TASKS", 1024, minimum=64)
# A paused run's browser (cookies, pages, typed form values) until its next run segment
# (tools/browser/pause.py): private 0600 files, outside every workspace, shared by the
# web and worker processes like the workspaces.
AGENT_BROWSER_STATE_ROOT = Path(env_str("AGENT_BROWSER_STATE_ROOT") or str(BASE_DIR / "browser-state"))
# T3 web_search: "" (off) | "searxng" (AGENT_SEARCH_URL) | dotted path of a callable
# (query, max_results) -> [{"title", "url", "snippet"}]. The key goes as a bearer token.
AGENT_SEARCH_BACKEND = env_str("AGENT_SEARCH_BACKEND")
AGENT_SEARCH_URL = env_str("AGENT_SEARCH_URL")
AGENT_SEARCH_API_KEY = env_str("AGENT_SEARCH_API_KEY")
if AGENT_SEARCH_BACKEND not in ("", "searxng") and not re.fullmatch(
    r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+", AGENT_SEARCH_BACKEND
):
    raise ImproperlyConfigured(
        f"AGENT_SEARCH_BACKEND={AGENT_SEARCH_BACKEND!r}: use searxng or the dotted path of a callable"
    )
if AGENT_SEARCH_BACKEND == "searxng" and not re.match(r"https?://", AGENT_SEARCH_URL):
    raise ImproperlyConfigured(
        "AGENT_SEARCH_BACKEND=searxng needs AGENT_SEARCH_URL, the http(s) address of the SearXNG instance"
    )


def _remote_agents() -> dict[str, str]:
    raw = env_str("AGENT_REMOTE_AGENTS")
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"AGENT_REMOTE_AGENTS is not valid JSON: {exc}") from None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ImproperlyConfigured(
            'AGENT_REMOTE_AGENTS must be a JSON object {"http://host:port": "api key"}'
        )
    return value


# S5: other instances of this service the agent tool may call, with their API keys.
AGENT_REMOTE_AGENTS = _remote_agents()
AGENT_REMOTE_TIMEOUT = env_float("AGENT_REMOTE_TIMEOUT", 600.0, minimum=1.0)
AGENT_REMOTE_POLL_SECONDS = env_float("AGENT_REMOTE_POLL_SECONDS", 0.5, minimum=0.05)
AGENT_REMOTE_REQUEST_TIMEOUT = env_float("AGENT_REMOTE_REQUEST_TIMEOUT", 30.0, minimum=1.0)

# A2A server (traces/a2a_protocol): the card's name, the presets offered as skills
# (empty: every preset), how long a blocking SendMessage waits, how often a stream
# reads the event log, and the workspace files a task's artifacts carry.
AGENT_A2A_NAME = env_str("AGENT_A2A_NAME", "agentsite")
AGENT_A2A_DESCRIPTION = env_str(
    "AGENT_A2A_DESCRIPTION", "Agents that plan, use tools and delegate; every task is a reviewable trace."
)
AGENT_A2A_VERSION = env_str("AGENT_A2A_VERSION", "0.1.0")
AGENT_A2A_PRESETS = env_list("AGENT_A2A_PRESETS", [])
AGENT_A2A_BLOCKING_TIMEOUT = env_float("AGENT_A2A_BLOCKING_TIMEOUT", 600.0, minimum=1.0)
AGENT_A2A_POLL_SECONDS = env_float("AGENT_A2A_POLL_SECONDS", 0.25, minimum=0.02)
AGENT_A2A_MAX_FILES = env_int("AGENT_A2A_MAX_FILES", 20, minimum=0)
AGENT_A2A_MAX_FILE_BYTES = env_int("AGENT_A2A_MAX_FILE_BYTES", 1_000_000, minimum=0)
# A2A client: how long a remote agent's fetched card is used before it is fetched again.
AGENT_A2A_CARD_TTL = env_float("AGENT_A2A_CARD_TTL", 300.0, minimum=0.0)


def _projects() -> dict[str, dict[str, Any]]:
    """AGENT_PROJECTS as {name: {"path": ..., "writable": ...}}; the directories are
    checked at start-up (traces/checks.py), the JSON's shape here."""
    raw = env_str("AGENT_PROJECTS")
    writable = set(env_list("AGENT_PROJECTS_WRITABLE", []))
    try:
        value = json.loads(raw) if raw else {}
    except ValueError as exc:
        raise ImproperlyConfigured(f"AGENT_PROJECTS is not valid JSON: {exc}") from None
    usage = (
        'AGENT_PROJECTS must be a JSON object {"name": "/absolute/path"} or '
        '{"name": {"path": "/absolute/path", "writable": true}} (names of letters, digits, . _ -)'
    )
    if not isinstance(value, dict):
        raise ImproperlyConfigured(usage)
    projects: dict[str, dict[str, Any]] = {}
    for name, entry in value.items():
        spec = {"path": entry} if isinstance(entry, str) else entry
        if (
            not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", name)
            or not isinstance(spec, dict)
            or set(spec) - {"path", "writable"}
            or not isinstance(spec.get("path"), str)
            or not os.path.isabs(spec["path"])
            or not isinstance(spec.get("writable", False), bool)
        ):
            raise ImproperlyConfigured(f"{usage}; {name!r} is not")
        projects[name] = {"path": spec["path"], "writable": spec.get("writable", False) or name in writable}
    if unknown := writable - set(projects):
        raise ImproperlyConfigured(
            f"AGENT_PROJECTS_WRITABLE names no project of AGENT_PROJECTS: {', '.join(sorted(unknown))}"
        )
    return projects


# M9: directories a run may work in (run setting / preset `project`), read-only
# unless marked writable; AGENTS.md files there and the user layer make the
# project context of the system prompt (traces/runner/project.py).
AGENT_PROJECTS = _projects()
AGENT_USER_AGENTS_FILE = env_str("AGENT_USER_AGENTS_FILE")
AGENT_PROJECT_CONTEXT_MAX_CHARS = env_int("AGENT_PROJECT_CONTEXT_MAX_CHARS", 32_000, minimum=1000)

# --- Service: API, channels, workers ----------------------------------------

REDIS_URL = env_str("REDIS_URL")
# Largest API request body; bigger ones get 413 (W6).
AGENT_MAX_REQUEST_BYTES = env_int("AGENT_MAX_REQUEST_BYTES", 1024 * 1024, minimum=1024)
# POST /api/traces and /run carry images and PDFs as data URLs (base64: 4/3 of the bytes).
AGENT_MAX_MESSAGES_REQUEST_BYTES = env_int(
    "AGENT_MAX_MESSAGES_REQUEST_BYTES", 36 * 1024 * 1024, minimum=AGENT_MAX_REQUEST_BYTES
)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "traces.api.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "traces.api.errors.api_exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "agentsite API",
    "DESCRIPTION": "Start, steer, rewind and watch agent traces.",
    "VERSION": "0.1.0",
    # Request bodies get their own components: no read-only fields in them, and
    # minLength 1 for the strings that may not be blank (what the API enforces).
    "COMPONENT_SPLIT_REQUEST": True,
    # The schema document is not one of the API's operations.
    "SERVE_INCLUDE_SCHEMA": False,
    "ENUM_NAME_OVERRIDES": {
        "ExperienceStatusEnum": "memory.models.ExperienceStatus",
        "TraceStatusEnum": "traces.models.TraceStatus",
    },
}

if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
# Without Redis the in-memory layer stays in one process; the doorbell crosses
# processes by PostgreSQL LISTEN/NOTIFY, or on SQLite by Unix datagram sockets in
# this directory (default `<SQLite file>.doorbells`; traces/events/bells.py).
AGENT_DOORBELL_DIR = env_str("AGENT_DOORBELL_DIR")
# How often a WebSocket watcher re-reads the event log without a doorbell: a
# safety net for a lost ring (a doorbell only wakes it sooner).
AGENT_WATCH_POLL_SECONDS = env_float("AGENT_WATCH_POLL_SECONDS", 5.0, minimum=0.05)
# While the channel layer fails (Redis down) watch sockets read the event table this
# often instead (traces/events/consumers.py), and try to join their groups again.
AGENT_WATCH_DEGRADED_POLL_SECONDS = env_float("AGENT_WATCH_DEGRADED_POLL_SECONDS", 1.0, minimum=0.05)

# A run may take long; its own lease and heartbeat (W5) guard it, so the
# broker's timeout only bounds a wedged task. timeout must stay below retry.
_task_timeout = env_int("AGENT_TASK_TIMEOUT", 3600, minimum=10)
_task_retry = env_int("AGENT_TASK_RETRY", 3700, minimum=20)
if _task_timeout >= _task_retry:
    raise ImproperlyConfigured("AGENT_TASK_TIMEOUT must be below AGENT_TASK_RETRY")
# Runs one worker process holds at once, each in its own thread (traces/runhost.py):
# a run mostly waits on the model, so a few processes hold hundreds of runs.
AGENT_RUNS_PER_WORKER = env_int("AGENT_RUNS_PER_WORKER", 32, minimum=1)
Q_CLUSTER: dict[str, Any] = {
    "name": "agentsite",
    "workers": env_int("AGENT_WORKERS", 4, minimum=1),
    # A task only hands its run over, so a worker sees many; a recycling worker
    # lets its runs finish first, holding no new ones meanwhile.
    "recycle": env_int("AGENT_WORKER_RECYCLE", 10_000, minimum=1),
    "timeout": _task_timeout,
    "retry": _task_retry,
    "max_attempts": 3,
    "catch_up": False,
    "ack_failures": True,
    "save_limit": 1000,
    "label": "Django Q2",
}
if REDIS_URL:
    Q_CLUSTER["redis"] = REDIS_URL
else:
    Q_CLUSTER["orm"] = "default"
# A queued run no worker has claimed after this long was lost by the broker (the
# ORM broker redelivers after `retry`; Redis delivers at most once): the sweep
# ends it as failed (W5).
AGENT_QUEUE_GRACE_SECONDS = env_int("AGENT_QUEUE_GRACE_SECONDS", 2 * _task_retry, minimum=60)
# A queued run not claimed this long after it was sent is sent again from its stored
# request (traces/services/queue.py), the wait doubling up to the maximum.
AGENT_QUEUE_REQUEUE_SECONDS = env_int("AGENT_QUEUE_REQUEUE_SECONDS", 30, minimum=1)
AGENT_QUEUE_REQUEUE_MAX_SECONDS = env_int("AGENT_QUEUE_REQUEUE_MAX_SECONDS", 600, minimum=1)
# Besides the django-q2 schedule (every minute) each worker process sweeps this often
# (traces/sweeper.py), so a dead machine's runs, queued ones included, resume within
# about AGENT_LEASE_SECONDS + this; 0 turns it off.
AGENT_SWEEP_SECONDS = env_float("AGENT_SWEEP_SECONDS", 10.0, minimum=0)
# Delete finished traces (completed, failed, stopped) older than this many days, daily
# (traces/tasks.py:prune_old_traces); 0 keeps everything. `manage.py prune_traces` does it by hand.
AGENT_RETENTION_DAYS = env_float("AGENT_RETENTION_DAYS", 0.0, minimum=0.0)

# --- Notifications (traces/notifications.py) --------------------------------

# Who is told when a run waits for an approval or an answer, needs attention or
# fails: signed webhooks (these URLs plus a preset's extra["notify_webhooks"]) and,
# with AGENT_NOTIFY_EMAIL, e-mail to the trace's owner and the experts.
notify_kinds = ("waiting_approval", "waiting_answer", "attention", "failed")
AGENT_NOTIFY_WEBHOOK_URLS = env_list("AGENT_NOTIFY_WEBHOOK_URLS", [])
if bad_urls := [u for u in AGENT_NOTIFY_WEBHOOK_URLS if not re.match(r"https?://[^/\s]+", u)]:
    # Not quoted: a webhook URL may carry a token.
    raise ImproperlyConfigured(f"AGENT_NOTIFY_WEBHOOK_URLS: {len(bad_urls)} entries are not http(s) URLs")
AGENT_NOTIFY_WEBHOOK_SECRET = env_str("AGENT_NOTIFY_WEBHOOK_SECRET")
if AGENT_NOTIFY_WEBHOOK_URLS and not AGENT_NOTIFY_WEBHOOK_SECRET:
    raise ImproperlyConfigured(
        "AGENT_NOTIFY_WEBHOOK_URLS needs AGENT_NOTIFY_WEBHOOK_SECRET (every webhook is signed)"
    )
AGENT_NOTIFY_EVENTS = env_list("AGENT_NOTIFY_EVENTS", list(notify_kinds))
if unknown_kinds := sorted(set(AGENT_NOTIFY_EVENTS) - set(notify_kinds)):
    raise ImproperlyConfigured(
        f"AGENT_NOTIFY_EVENTS names unknown kinds {', '.join(unknown_kinds)}; use {', '.join(notify_kinds)}"
    )
# Retries after the first attempt, on connection errors, 5xx and 429; waits of
# AGENT_NOTIFY_BACKOFF seconds, doubling, at most AGENT_NOTIFY_BACKOFF_MAX.
AGENT_NOTIFY_RETRIES = env_int("AGENT_NOTIFY_RETRIES", 5, minimum=0)
AGENT_NOTIFY_BACKOFF = env_float("AGENT_NOTIFY_BACKOFF", 2.0, minimum=0.0)
AGENT_NOTIFY_BACKOFF_MAX = env_float("AGENT_NOTIFY_BACKOFF_MAX", 120.0, minimum=0.0)
AGENT_NOTIFY_TIMEOUT = env_float("AGENT_NOTIFY_TIMEOUT", 10.0, minimum=0.1)
AGENT_NOTIFY_EMAIL = env_bool("AGENT_NOTIFY_EMAIL", False)
# The address people open the portal and the API at: the base of every link sent.
AGENT_PUBLIC_URL = env_str("AGENT_PUBLIC_URL", "http://localhost:8000").rstrip("/")
if not re.match(r"https?://[^/\s]+", AGENT_PUBLIC_URL):
    raise ImproperlyConfigured(f"AGENT_PUBLIC_URL={AGENT_PUBLIC_URL!r} is not an http(s) URL")
# Django's mail settings, for AGENT_NOTIFY_EMAIL (SMTP unless EMAIL_BACKEND says otherwise).
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 30, minimum=1)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "agentsite@localhost")
