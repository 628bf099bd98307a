"""The agent runtime's settings (AGENT_*): models, tools, sandbox, memory, guards,
browser, remote agents, projects. Part of agentsite.settings."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from agentsite.env import env_bool, env_choice, env_float, env_int, env_list, env_str
from agentsite.settings.paths import BASE_DIR

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
# true: every model call streams (`token` events); false: none; watched: only a call
# that starts while a watch socket follows the trace (traces/events/presence.py).
AGENT_STREAM: bool | str = env_choice("AGENT_STREAM", True, choices=("watched",))
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
# PostgreSQL: a run's step commit is a prepared statement (traces/runner/fenced.py).
# Off for a transaction-pooling proxy that does not keep prepared statements
# (PgBouncer before 1.21, or without max_prepared_statements).
AGENT_DB_PREPARED_COMMITS = env_bool("AGENT_DB_PREPARED_COMMITS", True)
AGENT_STOP_POLL_SECONDS = env_float("AGENT_STOP_POLL_SECONDS", 0.25, minimum=0.01)
# Memory (M4, M6): experiences retrieved per new trace, optional embeddings, skill dirs.
AGENT_EXPERIENCE_TOP_K = env_int("AGENT_EXPERIENCE_TOP_K", 5, minimum=0)
# relevance (tags + full text) an experience needs to be injected (memory/retrieval/search.py)
AGENT_EXPERIENCE_MIN_SCORE = env_float("AGENT_EXPERIENCE_MIN_SCORE", 0.75, minimum=0.0)
AGENT_EMBEDDING_MODEL = env_str("AGENT_EMBEDDING_MODEL")
AGENT_EMBEDDING_API_BASE = env_str("AGENT_EMBEDDING_API_BASE") or AGENT_API_BASE
AGENT_EMBEDDING_API_KEY = env_str("AGENT_EMBEDDING_API_KEY") or AGENT_API_KEY
# texts per embedding call; the cosine that makes an experience relevant without a shared
# tag or word (memory/retrieval/fusion.py)
AGENT_EMBEDDING_BATCH = env_int("AGENT_EMBEDDING_BATCH", 64, minimum=1)
AGENT_EMBEDDING_MIN_COSINE = env_float("AGENT_EMBEDDING_MIN_COSINE", 0.5, minimum=0.0)
# how much the embedding order counts in fusion against the lexical order's 1
AGENT_EMBEDDING_WEIGHT = env_float("AGENT_EMBEDDING_WEIGHT", 2.0, minimum=0.0)
# rank embeddings in PostgreSQL when its pgvector extension is installed (memory/retrieval/pgvector.py)
AGENT_EMBEDDING_PGVECTOR = env_bool("AGENT_EMBEDDING_PGVECTOR", True)
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
