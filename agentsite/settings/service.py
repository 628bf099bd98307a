"""The service's settings: API, channels, workers, notifications, e-mail. Part of
agentsite.settings."""

from __future__ import annotations

import re
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from agentsite.env import env_bool, env_float, env_int, env_list, env_str

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
        "traces.api.authentication.TokenAuthentication",
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

# channels_redis keeps one Redis list per web server process for all its sockets and
# drops a group message when that list is full (`capacity`, 100 by default; it logs at
# INFO only). A doorbell ring is ~100 bytes and a burst of runs rings a busy process's
# sockets hundreds of times before its receive loop catches up: a dropped last ring
# leaves a socket waiting for its poll.
AGENT_CHANNEL_CAPACITY = env_int("AGENT_CHANNEL_CAPACITY", 10_000, minimum=100)
REDIS_CHANNEL_LAYER_OPTIONS: dict[str, Any] = {"capacity": AGENT_CHANNEL_CAPACITY}
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL], **REDIS_CHANNEL_LAYER_OPTIONS},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
# Without Redis the in-memory layer stays in one process; the doorbell crosses
# processes by PostgreSQL LISTEN/NOTIFY, or on SQLite by Unix datagram sockets in
# this directory (default `<SQLite file>.doorbells`; traces/events/bells.py).
AGENT_DOORBELL_DIR = env_str("AGENT_DOORBELL_DIR")
# A web server keeps hearing those rings (its LISTEN connection, its socket) this
# long after its last watch socket closed, so the next one need not reconnect (0:
# stop with the last one).
AGENT_DOORBELL_LINGER_SECONDS = env_float("AGENT_DOORBELL_LINGER_SECONDS", 30.0, minimum=0.0)
# Where rings go with Redis: "database" (default), the same path as without Redis
# (NOTIFY on PostgreSQL, sent by the committing thread or a thread of each process)
# instead of channels_redis's group_send on an event loop that a busy worker's runs
# hold up (README, Density: in alternated 64-run bursts its events' p99 was lower in
# every pair); "layer", the channel layer's groups (for a database that cannot LISTEN,
# such as one behind a transaction-pooling proxy; traces/events/doorbell.py).
AGENT_DOORBELL = env_str("AGENT_DOORBELL", "database").lower()
if AGENT_DOORBELL not in ("layer", "database"):
    raise ImproperlyConfigured(f"AGENT_DOORBELL={AGENT_DOORBELL!r} is not layer or database")
# How often a WebSocket watcher re-reads the event log without a doorbell: a
# safety net for a lost ring (a doorbell only wakes it sooner).
AGENT_WATCH_POLL_SECONDS = env_float("AGENT_WATCH_POLL_SECONDS", 5.0, minimum=0.05)
# While the channel layer fails (Redis down) watch sockets read the event table this
# often instead (traces/events/consumers.py), and try to join their groups again.
AGENT_WATCH_DEGRADED_POLL_SECONDS = env_float("AGENT_WATCH_DEGRADED_POLL_SECONDS", 1.0, minimum=0.05)
# Watch sockets read the event log on this many threads per web server process, each
# keeping its database connection until idle this long (0: close after every read;
# traces/events/reads.py).
AGENT_WATCH_READ_THREADS = env_int("AGENT_WATCH_READ_THREADS", 4, minimum=1)
# The port of a web server that holds the portal's watch sockets, on the page's own
# host: `manage.py serve` runs one (its --watch-port), so live events are not served
# by the interpreter that takes the API's requests (README, Live events). 0: the
# page's own server (behind a proxy, route /api/traces/*/watch by path instead).
AGENT_WATCH_PORT = env_int("AGENT_WATCH_PORT", 0, minimum=0, maximum=65535)
AGENT_WATCH_READ_IDLE_SECONDS = env_float("AGENT_WATCH_READ_IDLE_SECONDS", 30.0, minimum=0.0)
# A web server process runs Django's requests on this many threads, each keeping its
# database connection until idle this long (0: close after every request;
# agentsite/web.py). More concurrent requests wait for a thread.
AGENT_WEB_THREADS = env_int("AGENT_WEB_THREADS", 8, minimum=1)
AGENT_WEB_IDLE_SECONDS = env_float("AGENT_WEB_IDLE_SECONDS", 30.0, minimum=0.0)

# A run may take long; its own lease and heartbeat (W5) guard it, so the
# broker's timeout only bounds a wedged task. timeout must stay below retry.
_task_timeout = env_int("AGENT_TASK_TIMEOUT", 3600, minimum=10)
_task_retry = env_int("AGENT_TASK_RETRY", 3700, minimum=20)
if _task_timeout >= _task_retry:
    raise ImproperlyConfigured("AGENT_TASK_TIMEOUT must be below AGENT_TASK_RETRY")
# Runs one worker process holds at once, each in its own thread (traces/runhost.py):
# a run mostly waits on the model, so a few processes hold hundreds of runs.
AGENT_RUNS_PER_WORKER = env_int("AGENT_RUNS_PER_WORKER", 32, minimum=1)
# A full process holds a run's task this long waiting for a slot, then gives it back to
# the broker, where a process with room takes it (traces/tasks.py:run_trace).
AGENT_SLOT_WAIT_SECONDS = env_float("AGENT_SLOT_WAIT_SECONDS", 1.0, minimum=0.05)
# A process's runs take turns at their CPU work, first ready first, instead of all at
# once (traces/runner/turns.py); a turn held longer than this passes on; 0 = off.
AGENT_TURN_SECONDS = env_float("AGENT_TURN_SECONDS", 0.5, minimum=0.0)
# The worker cluster runs this much nicer than the web server (Unix nice, 0-19): on a
# machine whose CPU the runs fill, requests and live events go first (traces/runhost.py).
AGENT_WORKER_NICE = env_int("AGENT_WORKER_NICE", 10, minimum=0, maximum=19)
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
