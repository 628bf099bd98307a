"""The `webfetch` tool: one http(s) page, as Markdown or text, for the model.

Guarded against SSRF by default: the host is resolved once, every address it
resolves to is checked (`blocked_reason`), and the connection goes to a vetted
address itself while the Host header and TLS (SNI and certificate check) keep the
hostname, so a DNS answer that changes between check and connect (rebinding)
cannot move it. Redirects are followed by hand and every hop is checked the same
way. No credentials are sent: no API key, no cookie, no proxy or netrc from the
environment.
"""

from __future__ import annotations

import concurrent.futures
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urljoin

import httpx
from bs4 import BeautifulSoup
from django.conf import settings
from markdownify import MarkdownConverter

from tools.netguard import DEFAULT_PORTS, AddressCheck, IPAddress, blocked_reason, resolve_host
from tools.registry import tool
from tools.workspace import truncate_output
from traces.runner.tool_api import ToolError, ToolResult

MAX_REDIRECTS = 5
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
USER_AGENT = "agentsite-webfetch/0.1"
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
TEXT_APPLICATION_TYPES = frozenset(
    {
        "application/json",
        "application/xml",
        "application/javascript",
        "application/x-javascript",
        "application/ecmascript",
        "application/x-ndjson",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
    }
)
# Elements whose content is never readable text.
DROPPED_ELEMENTS = ("script", "style", "noscript", "template", "head")
_SNIFF_BYTES = 8192

T = TypeVar("T")


@tool(risk="safe", read_only=True)
def webfetch(url: str) -> ToolResult:
    """Fetch a web page or file over http(s) and return its content.

    HTML pages come back as Markdown (headings, links, lists and tables kept;
    scripts and styles dropped); plain text, JSON, XML and other text formats come
    back as they are. Images, PDFs and other binary files are refused. Redirects
    are followed (at most 5). Large pages are cut, and fetching stops after a time
    limit. Only public internet addresses can be reached: localhost, private and
    link-local networks are refused. No cookies or credentials are sent.

    Args:
        url: The full address to fetch, starting with http:// or https://, such as
            "https://docs.python.org/3/library/ipaddress.html".
    """
    page = fetch_page(
        url,
        max_bytes=settings.AGENT_WEBFETCH_MAX_BYTES,
        timeout=settings.AGENT_WEBFETCH_TIMEOUT,
        check=None if settings.AGENT_WEBFETCH_ALLOW_PRIVATE else blocked_reason,
    )
    return page.as_result()


@dataclass
class Page:
    requested_url: str
    url: str
    status: int
    media_type: str
    body: bytes
    charset: str | None = None
    cut_at: int | None = None
    redirects: list[str] = field(default_factory=list)

    def as_result(self) -> ToolResult:
        title, text = self.readable()
        if self.cut_at is not None:
            text += f"\n\n[page cut: only the first {self.cut_at} bytes were read]"
        heading = f"Fetched {self.url}"
        if self.redirects:
            heading += f" (redirected from {self.requested_url})"
        heading += f" ({self.media_type or 'no content type'}, {len(self.body)} bytes"
        heading += ", cut)" if self.cut_at is not None else ")"
        output = truncate_output((f"Title: {title}\n\n{text}" if title else text) or "(empty page)")
        # C3: a long page is read once; later requests keep only this note (fetch again to re-read)
        long = len(output) > settings.AGENT_SHOWN_ONCE_CHARS
        named = f' "{title[:80]}"' if title else ""
        memory = f"webfetch read {self.url}{named}: {len(output):,} characters, shown once; fetch it again to re-read"
        return ToolResult(
            title=heading,
            output=output,
            long_term_memory=memory if long else None,
            include_output_only_once=long,
            metadata={
                "url": self.url,
                "status": self.status,
                "content_type": self.media_type,
                "bytes": len(self.body),
                "cut": self.cut_at is not None,
                "redirects": self.redirects,
            },
        )

    def readable(self) -> tuple[str, str]:
        """(page title, text) of the body: Markdown for HTML, the decoded text otherwise."""
        kind = content_kind(self.media_type) or _sniff_kind(self.body)
        if kind == "html":
            return html_to_markdown(self.body, self.charset, self.url)
        if kind == "text":
            return "", _decode(self.body, self.charset)
        raise ToolError(_unsupported(self.url, self.media_type or "binary data without a content type"))


def fetch_page(url: str, *, max_bytes: int, timeout: float, check: AddressCheck | None) -> Page:
    """GET `url` within `timeout` seconds in all, reading at most `max_bytes` of its body.

    `check` vets every address a hop's host resolves to (None: no check). Every
    failure is a ToolError saying why.
    """
    cancelled = threading.Event()
    deadline = time.monotonic() + timeout
    try:
        return run_within(timeout, _fetch, url, max_bytes, deadline, check, cancelled)
    except TimeoutError:
        cancelled.set()
        raise ToolError(f"Fetching {url} took longer than {timeout:g} s; gave up.") from None


def run_within(seconds: float, func: Callable[..., T], *args: Any) -> T:
    """`func(*args)`, or TimeoutError once `seconds` have passed.

    Covers what a socket timeout does not: DNS resolution, and servers that answer
    slowly but steadily. On a timeout the helper thread is left to end by itself.
    """
    future: concurrent.futures.Future[T] = concurrent.futures.Future()

    def target() -> None:
        try:
            future.set_result(func(*args))
        except BaseException as exc:
            future.set_exception(exc)

    threading.Thread(target=target, name="web", daemon=True).start()
    return future.result(timeout=seconds)


def _fetch(
    url: str, max_bytes: int, deadline: float, check: AddressCheck | None, cancelled: threading.Event
) -> Page:
    current = parse_web_url(url)
    seen = [str(current)]
    while True:
        addresses = resolve_host(current, check)
        # A client per hop: no connection (or its TLS session) is reused for another host.
        with httpx.Client(trust_env=False, follow_redirects=False) as client:
            response = _send(client, current, addresses, deadline)
            try:
                location = response.headers.get("location")
                if response.status_code not in REDIRECT_STATUSES or not location:
                    return _page(url, current, response, seen[1:], max_bytes, deadline, cancelled)
                if len(seen) > MAX_REDIRECTS:
                    raise ToolError(
                        f"Fetching {url} stopped after {MAX_REDIRECTS} redirects: {current} redirects "
                        f"again (to {location})."
                    )
                current = _redirect_target(current, location, seen)
            finally:
                response.close()


def parse_web_url(url: str) -> httpx.URL:
    """`url` parsed, or a ToolError unless it is an absolute http(s) URL with a host."""
    if not isinstance(url, str) or not url.strip():
        raise ToolError("url is empty; give a full address such as https://example.com/page.")
    try:
        parsed = httpx.URL(url.strip())
    except (httpx.InvalidURL, ValueError) as exc:
        raise ToolError(f"{url!r} is not a valid URL: {exc}.") from None
    if parsed.scheme not in DEFAULT_PORTS:
        shown = f"{parsed.scheme}:" if parsed.scheme else "no scheme"
        raise ToolError(f"{url!r} uses {shown}; webfetch only fetches http:// and https:// URLs.")
    if not parsed.host:
        raise ToolError(f"{url!r} has no host name.")
    return parsed


def _send(
    client: httpx.Client, url: httpx.URL, addresses: list[IPAddress], deadline: float
) -> httpx.Response:
    """GET `url` from the first of its vetted `addresses` that accepts a connection.

    The request goes to the address itself; Host and TLS SNI name the host, so the
    certificate is still checked against the host name.
    """
    host = url.raw_host.decode("ascii")
    headers = {
        "Host": url.netloc.decode("ascii"),
        "User-Agent": USER_AGENT,
        "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.9,*/*;q=0.5",
    }
    for number, address in enumerate(addresses, start=1):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        request = client.build_request(
            "GET",
            url.copy_with(host=str(address)),
            headers=headers,
            timeout=remaining,
            extensions={"sni_hostname": host},
        )
        try:
            return client.send(request, stream=True)
        except httpx.ConnectError as exc:
            if number < len(addresses):
                continue
            raise ToolError(f"Could not connect to {host} ({address}) for {url}: {exc}.") from None
        except httpx.TimeoutException:
            raise TimeoutError from None
        except httpx.HTTPError as exc:
            raise ToolError(f"Fetching {url} failed: {type(exc).__name__}: {exc}.") from None
    raise AssertionError("resolve_host returns at least one address")


def _redirect_target(current: httpx.URL, location: str, seen: list[str]) -> httpx.URL:
    try:
        target = current.join(location)
    except (httpx.InvalidURL, ValueError) as exc:
        raise ToolError(f"{current} redirects to an invalid URL {location!r}: {exc}.") from None
    target = parse_web_url(str(target))
    if str(target) in seen:
        raise ToolError(f"{seen[0]} redirects in a loop ({' -> '.join([*seen, str(target)])}); refused.")
    seen.append(str(target))
    return target


def _page(
    requested: str,
    url: httpx.URL,
    response: httpx.Response,
    redirects: list[str],
    max_bytes: int,
    deadline: float,
    cancelled: threading.Event,
) -> Page:
    if response.status_code >= 400:
        reason = f" {response.reason_phrase}" if response.reason_phrase else ""
        raise ToolError(f"{url} answered HTTP {response.status_code}{reason}.")
    media_type = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type and content_kind(media_type) is None:
        raise ToolError(_unsupported(str(url), media_type))
    body, cut_at = _read_body(response, max_bytes, deadline, cancelled)
    return Page(
        requested_url=requested,
        url=str(url),
        status=response.status_code,
        media_type=media_type,
        body=body,
        charset=response.charset_encoding,
        cut_at=cut_at,
        redirects=redirects,
    )


def _read_body(
    response: httpx.Response, max_bytes: int, deadline: float, cancelled: threading.Event
) -> tuple[bytes, int | None]:
    """The (decompressed) body up to `max_bytes`, and `max_bytes` if there was more."""
    body = bytearray()
    try:
        for chunk in response.iter_bytes():
            if cancelled.is_set() or time.monotonic() > deadline:
                raise TimeoutError
            body += chunk
            if len(body) > max_bytes:
                return bytes(body[:max_bytes]), max_bytes
    except httpx.TimeoutException:
        raise TimeoutError from None
    except httpx.HTTPError as exc:
        raise ToolError(f"Reading {response.request.url} failed: {type(exc).__name__}: {exc}.") from None
    return bytes(body), None


def content_kind(media_type: str) -> str | None:
    """ "html", "text", or None for a media type webfetch does not read."""
    if media_type in HTML_TYPES:
        return "html"
    if media_type.startswith("text/") or media_type in TEXT_APPLICATION_TYPES:
        return "text"
    if media_type.endswith(("+json", "+xml")):
        return "text"
    return None


def _sniff_kind(body: bytes) -> str | None:
    head = body[:_SNIFF_BYTES]
    if b"\x00" in head:
        return None
    if re.match(rb"\s*(<!doctype html|<html)", head, re.I):
        return "html"
    return "text"


def _unsupported(url: str, media_type: str) -> str:
    return (
        f"{url} is {media_type}; webfetch only reads HTML, text and JSON. "
        "Download binary files with bash (such as curl -o) if that is allowed."
    )


def _decode(body: bytes, charset: str | None) -> str:
    try:
        return body.decode(charset or "utf-8", errors="replace")
    except LookupError:  # an unknown charset name
        return body.decode("utf-8", errors="replace")


def html_to_markdown(body: bytes, charset: str | None, base_url: str) -> tuple[str, str]:
    """(title, Markdown) of an HTML document, without scripts, styles and the head.

    Links and image sources are made absolute against `base_url`, so they can be
    fetched as they are; inline (data:) images are dropped.
    """
    soup = BeautifulSoup(body, "html.parser", from_encoding=charset)
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for element in soup.find_all(DROPPED_ELEMENTS):
        element.decompose()
    for image in soup.find_all("img", src=re.compile(r"^\s*data:", re.I)):
        image.decompose()
    for name, attribute in (("a", "href"), ("img", "src")):
        for element in soup.find_all(name, attrs={attribute: True}):
            element[attribute] = urljoin(base_url, str(element[attribute]))
    markdown = MarkdownConverter(
        heading_style="ATX", bullets="-", escape_underscores=False, escape_asterisks=False
    ).convert_soup(soup)
    return title, re.sub(r"\n{3,}", "\n\n", markdown).strip()
