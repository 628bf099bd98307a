"""The `web_search` tool: a web search through the backend the operator configured.

AGENT_SEARCH_BACKEND picks it: "searxng" asks a self-hosted SearXNG at
AGENT_SEARCH_URL for JSON; a dotted path names a callable
`(query, max_results) -> [{"title", "url", "snippet"}]`. The endpoint is the
operator's choice, so webfetch's private-address guard does not apply to it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx
from django.conf import settings
from django.utils.module_loading import import_string

from tools.builtin.webfetch import USER_AGENT, run_within
from tools.registry import tool
from tools.workspace import truncate_output
from traces.runner.tool_api import ToolError, ToolResult

MAX_RESULTS = 20
SNIPPET_CHARS = 500
NOT_CONFIGURED = (
    "Web search is not configured on this server, so it cannot search; use webfetch on a URL you know "
    "instead. An operator enables search with AGENT_SEARCH_BACKEND=searxng and AGENT_SEARCH_URL (a "
    "SearXNG instance with the json format enabled), or AGENT_SEARCH_BACKEND set to the dotted path "
    "of a function (query, max_results) -> list of {title, url, snippet}."
)

SearchBackend = Callable[[str, int], list[dict[str, Any]]]


def _not_configured() -> str | None:
    return None if settings.AGENT_SEARCH_BACKEND else "no search backend is configured (AGENT_SEARCH_BACKEND)"


@tool(risk="safe", read_only=True, unavailable=_not_configured)
def web_search(query: str, max_results: int = 5) -> ToolResult:
    """Search the web and return a numbered list of results: title, URL and a snippet.

    Use it to find pages, then read the ones that matter with webfetch.

    Args:
        query: What to search for, as you would type it into a search engine.
        max_results: How many results to return (1 to 20).
    """
    if not query.strip():
        raise ToolError("query is empty; say what to search for.")
    if not 1 <= max_results <= MAX_RESULTS:
        raise ToolError(f"max_results must be between 1 and {MAX_RESULTS}, got {max_results}.")
    backend = _backend()
    timeout = settings.AGENT_WEBFETCH_TIMEOUT
    try:
        results = run_within(timeout, _search, backend, query.strip(), max_results)
    except TimeoutError:
        raise ToolError(f"The search took longer than {timeout:g} s; gave up.") from None
    results = results[:max_results]
    if not results:
        return ToolResult(title=f"No results for {query!r}", metadata={"results": 0})
    return ToolResult(
        title=f"{len(results)} result{'s' if len(results) > 1 else ''} for {query!r}",
        output=truncate_output(format_results(results)),
        metadata={"results": len(results)},
    )


def format_results(results: list[dict[str, str]]) -> str:
    """The results as a numbered list: a "title — url" line, then the snippet indented."""
    lines = []
    for number, result in enumerate(results, start=1):
        lines.append(f"{number}. {result['title'] or result['url']} — {result['url']}")
        if result["snippet"]:
            lines.append(f"  {result['snippet']}")
    return "\n".join(lines)


def _backend() -> SearchBackend:
    name = settings.AGENT_SEARCH_BACKEND
    if not name:
        raise ToolError(NOT_CONFIGURED)
    if name == "searxng":
        return searxng_search
    try:
        backend = import_string(name)
    except ImportError as exc:
        raise ToolError(
            f"The search backend AGENT_SEARCH_BACKEND={name!r} cannot be loaded: {exc}."
        ) from None
    if not callable(backend):
        raise ToolError(f"The search backend AGENT_SEARCH_BACKEND={name!r} is not a function.")
    return backend


def _search(backend: SearchBackend, query: str, max_results: int) -> list[dict[str, str]]:
    try:
        found = backend(query, max_results)
    except (ToolError, TimeoutError):
        raise
    except Exception as exc:  # an operator's backend failing is reported, not raised
        raise ToolError(f"The search backend failed: {type(exc).__name__}: {exc}.") from None
    if not isinstance(found, list):
        raise ToolError(f"The search backend returned {type(found).__name__}, not a list of results.")
    return [result for item in found if (result := _clean(item))]


def _clean(item: Any) -> dict[str, str] | None:
    if not isinstance(item, dict) or not isinstance(item.get("url"), str) or not item["url"].strip():
        return None
    snippet = _one_line(item.get("snippet"))
    if len(snippet) > SNIPPET_CHARS:
        snippet = snippet[: SNIPPET_CHARS - 3] + "..."
    return {"title": _one_line(item.get("title")), "url": item["url"].strip(), "snippet": snippet}


def _one_line(value: Any) -> str:
    return re.sub(r"\s+", " ", value).strip() if isinstance(value, str) else ""


def searxng_search(query: str, max_results: int) -> list[dict[str, Any]]:
    """Results of the SearXNG instance at AGENT_SEARCH_URL (its JSON format must be enabled)."""
    base = settings.AGENT_SEARCH_URL.rstrip("/")
    if not base:
        raise ToolError("AGENT_SEARCH_BACKEND is searxng but AGENT_SEARCH_URL is not set.")
    headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
    if settings.AGENT_SEARCH_API_KEY:
        headers["Authorization"] = f"Bearer {settings.AGENT_SEARCH_API_KEY}"
    try:
        with httpx.Client(trust_env=False, timeout=settings.AGENT_WEBFETCH_TIMEOUT) as client:
            response = client.get(f"{base}/search", params={"q": query, "format": "json"}, headers=headers)
    except httpx.TimeoutException:
        raise TimeoutError from None
    except httpx.HTTPError as exc:
        raise ToolError(f"The search service could not be reached: {type(exc).__name__}: {exc}.") from None
    if response.status_code >= 400:
        hint = (
            " (is the json format enabled in its settings.yml, search.formats?)"
            if response.status_code == 403
            else ""
        )
        raise ToolError(f"The search service answered HTTP {response.status_code}{hint}.")
    try:
        results = response.json()["results"]
    except (ValueError, KeyError, TypeError):
        raise ToolError("The search service did not answer with SearXNG's JSON (no results list).") from None
    if not isinstance(results, list):
        raise ToolError("The search service did not answer with SearXNG's JSON (no results list).")
    return [
        {"title": item.get("title"), "url": item.get("url"), "snippet": item.get("content")}
        for item in results[:max_results]
        if isinstance(item, dict)
    ]
