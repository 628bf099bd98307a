"""webfetch and web_search against a real HTTP server of our own on 127.0.0.1.

The machine has no internet: every request goes to loopback. The private-address
guard is checked with it off (settings' default), where every target here must be
refused before a connection is made; the fetching itself runs with
AGENT_WEBFETCH_ALLOW_PRIVATE on, which is what lets it reach the local server.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import runpy
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core.exceptions import ImproperlyConfigured

from tests.tools.conftest import RunTool
from tools.builtin.webfetch import fetch_page
from tools.netguard import IPAddress, blocked_reason
from tools.registry import load_builtin_tools
from traces.runner.tool_api import ToolError

PAGE = b"""<!doctype html>
<html><head><title>Agent notes</title><style>body { color: red }</style>
<script>var hidden = "SCRIPT-CONTENT";</script></head>
<body><h1>Agent notes</h1><p>Read the <a href="/docs/guide.html">guide</a> first.</p>
<h2>Tools</h2><ul><li>webfetch</li><li>web_search</li></ul>
<script>document.write("SCRIPT-CONTENT")</script><style>p { margin: 0 }</style></body></html>
"""

SEARCH_RESULTS = [
    {"title": "First result", "url": "https://example.org/one", "content": "The first\n  snippet."},
    {"title": "Second result", "url": "https://example.org/two", "content": ""},
    {"title": "Third result", "url": "https://example.org/three", "content": "Third."},
]


@dataclass
class SeenRequest:
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]


@dataclass
class WebServer:
    """A scripted web site on 127.0.0.1; `requests` is every request it received."""

    port: int
    requests: list[SeenRequest] = field(default_factory=list)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def paths(self) -> list[str]:
        return [request.path for request in self.requests]


class Handler(BaseHTTPRequestHandler):
    site: WebServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        headers = {key.lower(): value for key, value in self.headers.items()}
        self.site.requests.append(SeenRequest(parts.path, query, headers))
        try:
            self._answer(parts.path, query, headers)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout tests)

    def _answer(self, path: str, query: dict[str, list[str]], headers: dict[str, str]) -> None:
        if path == "/page.html":
            self._send(200, "text/html; charset=utf-8", PAGE)
        elif path == "/plain.txt":
            self._send(200, "text/plain; charset=utf-8", "plain text, café\nsecond line\n".encode())
        elif path == "/data.json":
            self._send(200, "application/json", b'{"name": "agentsite", "tools": ["webfetch"]}')
        elif path == "/image.png":
            self._send(200, "image/png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
        elif path == "/untyped":
            self._send(200, None, b"text without a content type")
        elif path == "/echo":
            self._send(200, "application/json", json.dumps(headers).encode())
        elif path == "/big":
            self._send(200, "text/plain", b"x" * int(query["bytes"][0]))
        elif path == "/slow":
            time.sleep(float(query["seconds"][0]))
            self._send(200, "text/plain", b"late")
        elif path == "/drip":
            self._drip(100, every=0.1)
        elif path == "/missing":
            self._send(404, "text/html", b"<h1>Not here</h1>")
        elif path.startswith("/redirect/"):
            hops = int(path.rsplit("/", 1)[1])
            self._redirect("/plain.txt" if hops <= 1 else f"/redirect/{hops - 1}")
        elif path == "/loop":
            self._redirect("/loop")
        elif path == "/to":
            self._redirect(query["target"][0])
        elif path == "/search":
            self._search(query)
        elif path == "/nojson/search":
            self._send(403, "text/html", b"Forbidden")
        else:
            self._send(500, "text/plain", b"no route")

    def _send(self, status: int, content_type: str | None, body: bytes) -> None:
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _redirect(self, location: str) -> None:
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _drip(self, size: int, *, every: float) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(size))
        self.end_headers()
        for _ in range(size):
            self.wfile.write(b"x")
            self.wfile.flush()
            time.sleep(every)

    def _search(self, query: dict[str, list[str]]) -> None:
        if query.get("format") != ["json"]:
            self._send(403, "text/html", b"Forbidden")
            return
        body = {"query": query["q"][0], "results": SEARCH_RESULTS}
        self._send(200, "application/json", json.dumps(body).encode())


def serve(site: WebServer, server: ThreadingHTTPServer) -> Iterator[WebServer]:
    server.daemon_threads = True
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="test-web", daemon=True
    )
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def web() -> Iterator[WebServer]:
    site = WebServer(port=0)
    handler = type("SiteHandler", (Handler,), {"site": site})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    site.port = server.server_address[1]
    yield from serve(site, server)


@pytest.fixture
def allow_private(settings: Any) -> None:
    settings.AGENT_WEBFETCH_ALLOW_PRIVATE = True


def only_loopback_v4(address: IPAddress) -> str | None:
    """The guard, but letting 127.0.0.1 (the test server) through."""
    return None if address == ipaddress.ip_address("127.0.0.1") else blocked_reason(address)


# webfetch: content


@pytest.mark.usefixtures("allow_private")
def test_html_becomes_markdown_with_headings_and_absolute_links_and_no_script(
    run_tool: RunTool, web: WebServer
) -> None:
    result = run_tool("webfetch", {"url": web.url("/page.html")})

    assert not result.is_error
    assert result.title == f"Fetched {web.url('/page.html')} (text/html, {len(PAGE)} bytes)"
    assert result.output == (
        "Title: Agent notes\n\n"
        "# Agent notes\n\n"
        f"Read the [guide]({web.url('/docs/guide.html')}) first.\n\n"
        "## Tools\n\n"
        "- webfetch\n"
        "- web_search"
    )
    assert "SCRIPT-CONTENT" not in result.output and "color" not in result.output


@pytest.mark.usefixtures("allow_private")
def test_plain_text_and_json_come_back_as_they_are(run_tool: RunTool, web: WebServer) -> None:
    text = run_tool("webfetch", {"url": web.url("/plain.txt")})
    data = run_tool("webfetch", {"url": web.url("/data.json")})

    assert text.output == "plain text, café\nsecond line\n"
    assert text.metadata["content_type"] == "text/plain"
    assert data.output == '{"name": "agentsite", "tools": ["webfetch"]}'
    assert data.title.endswith("(application/json, 44 bytes)")


@pytest.mark.usefixtures("allow_private")
def test_text_without_a_content_type_is_read_as_text(run_tool: RunTool, web: WebServer) -> None:
    result = run_tool("webfetch", {"url": web.url("/untyped")})

    assert result.output == "text without a content type"
    assert "no content type" in result.title


@pytest.mark.usefixtures("allow_private")
def test_unsupported_content_type_is_refused_with_the_type(run_tool: RunTool, web: WebServer) -> None:
    result = run_tool("webfetch", {"url": web.url("/image.png")})

    assert result.is_error
    assert result.output == (
        f"webfetch failed: {web.url('/image.png')} is image/png; webfetch only reads HTML, text and JSON. "
        "Download binary files with bash (such as curl -o) if that is allowed."
    )


@pytest.mark.usefixtures("allow_private")
def test_body_past_the_size_limit_is_cut_and_says_so(
    run_tool: RunTool, web: WebServer, settings: Any
) -> None:
    settings.AGENT_WEBFETCH_MAX_BYTES = 2048

    cut = run_tool("webfetch", {"url": web.url("/big?bytes=100000")})
    whole = run_tool("webfetch", {"url": web.url("/big?bytes=2048")})

    assert cut.output == "x" * 2048 + "\n\n[page cut: only the first 2048 bytes were read]"
    assert cut.title.endswith("(text/plain, 2048 bytes, cut)")
    assert cut.metadata["cut"] is True
    assert whole.output == "x" * 2048 and whole.metadata["cut"] is False


@pytest.mark.usefixtures("allow_private")
def test_long_output_goes_through_the_tool_output_limit(
    run_tool: RunTool, web: WebServer, settings: Any
) -> None:
    settings.AGENT_TOOL_OUTPUT_LIMIT = 1000

    result = run_tool("webfetch", {"url": web.url("/big?bytes=1500")})

    assert result.output == "x" * 1000 + "\n[truncated: 500 more characters]"


@pytest.mark.usefixtures("allow_private")
def test_no_credentials_or_cookies_are_sent_and_host_names_the_host(
    run_tool: RunTool, web: WebServer, settings: Any
) -> None:
    settings.AGENT_API_KEY = "sk-model-secret"
    settings.AGENT_SEARCH_API_KEY = "search-secret"

    result = run_tool("webfetch", {"url": web.url("/echo", host="localhost")})

    headers = json.loads(result.output)
    assert headers["host"] == f"localhost:{web.port}"  # connected to the vetted 127.0.0.1
    assert headers["user-agent"] == "agentsite-webfetch/0.1"
    assert not {"authorization", "cookie", "proxy-authorization"} & set(headers)
    assert "secret" not in result.output


# webfetch: failures


@pytest.mark.usefixtures("allow_private")
def test_a_server_that_does_not_answer_in_time_is_a_timeout_error(
    run_tool: RunTool, web: WebServer, settings: Any
) -> None:
    settings.AGENT_WEBFETCH_TIMEOUT = 0.5
    started = time.monotonic()

    result = run_tool("webfetch", {"url": web.url("/slow?seconds=3")})

    assert time.monotonic() - started < 2
    assert result.is_error
    assert (
        result.output
        == f"webfetch failed: Fetching {web.url('/slow?seconds=3')} took longer than 0.5 s; gave up."
    )


@pytest.mark.usefixtures("allow_private")
def test_the_time_limit_covers_the_whole_fetch_not_each_read(
    run_tool: RunTool, web: WebServer, settings: Any
) -> None:
    settings.AGENT_WEBFETCH_TIMEOUT = 1.0
    started = time.monotonic()

    result = run_tool("webfetch", {"url": web.url("/drip")})  # a byte every 0.1 s for 10 s

    assert time.monotonic() - started < 2.5
    assert result.is_error and "took longer than 1 s" in result.output


@pytest.mark.usefixtures("allow_private")
def test_an_error_status_is_a_clear_error_with_the_code(run_tool: RunTool, web: WebServer) -> None:
    result = run_tool("webfetch", {"url": web.url("/missing")})

    assert result.is_error
    assert result.output == f"webfetch failed: {web.url('/missing')} answered HTTP 404 Not Found."


@pytest.mark.usefixtures("allow_private")
def test_nothing_listening_is_a_clear_connection_error(run_tool: RunTool) -> None:
    closed = "http://127.0.0.1:9/plain.txt"  # the discard port: nothing listens

    result = run_tool("webfetch", {"url": closed})

    assert result.is_error
    assert result.output.startswith(
        f"webfetch failed: Could not connect to 127.0.0.1 (127.0.0.1) for {closed}"
    )


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "ftp://example.com/file.txt",
        "gopher://example.com/",
        "javascript:alert(1)",
        "data:text/plain,hello",
        "example.com/page",
    ],
)
def test_only_http_and_https_are_fetched(run_tool: RunTool, url: str) -> None:
    result = run_tool("webfetch", {"url": url})

    assert result.is_error
    assert "webfetch only fetches http:// and https:// URLs" in result.output


# webfetch: redirects


@pytest.mark.usefixtures("allow_private")
def test_a_redirect_chain_of_five_is_followed(run_tool: RunTool, web: WebServer) -> None:
    result = run_tool("webfetch", {"url": web.url("/redirect/5")})

    assert not result.is_error
    assert result.output == "plain text, café\nsecond line\n"
    assert result.title.startswith(
        f"Fetched {web.url('/plain.txt')} (redirected from {web.url('/redirect/5')})"
    )
    assert web.paths() == [
        "/redirect/5",
        "/redirect/4",
        "/redirect/3",
        "/redirect/2",
        "/redirect/1",
        "/plain.txt",
    ]


@pytest.mark.usefixtures("allow_private")
def test_a_redirect_to_another_host_name_sends_that_host(run_tool: RunTool, web: WebServer) -> None:
    target = web.url("/echo", host="localhost")

    result = run_tool("webfetch", {"url": web.url(f"/to?target={target}")})

    assert json.loads(result.output)["host"] == f"localhost:{web.port}"
    assert result.metadata["redirects"] == [target]


@pytest.mark.usefixtures("allow_private")
def test_more_than_five_redirects_are_refused(run_tool: RunTool, web: WebServer) -> None:
    result = run_tool("webfetch", {"url": web.url("/redirect/6")})

    assert result.is_error
    assert result.output == (
        f"webfetch failed: Fetching {web.url('/redirect/6')} stopped after 5 redirects: "
        f"{web.url('/redirect/1')} redirects again (to /plain.txt)."
    )
    assert "/plain.txt" not in web.paths()


@pytest.mark.usefixtures("allow_private")
def test_a_redirect_loop_is_refused(run_tool: RunTool, web: WebServer) -> None:
    result = run_tool("webfetch", {"url": web.url("/loop")})

    assert result.is_error
    assert "redirects in a loop" in result.output
    assert web.paths() == ["/loop"]


@pytest.mark.parametrize(
    ("target", "refusal"),
    [
        ("http://10.0.0.1/admin", "10.0.0.1 resolves to 10.0.0.1, a private network address"),
        ("http://169.254.169.254/latest/meta-data/", "a link-local address"),
        ("http://[::1]/", "::1 resolves to ::1, a loopback address"),
        ("file:///etc/passwd", "webfetch only fetches http:// and https:// URLs"),
    ],
)
def test_every_redirect_hop_is_checked_before_it_is_followed(
    web: WebServer, target: str, refusal: str
) -> None:
    with pytest.raises(ToolError) as refused:
        fetch_page(web.url(f"/to?target={target}"), max_bytes=10_000, timeout=5, check=only_loopback_v4)

    assert refusal in str(refused.value)
    assert web.paths() == ["/to"]  # the hop's target was never contacted


# webfetch: the private-address guard (setting off, the default)


@pytest.mark.parametrize(
    ("host", "addresses", "reason"),
    [
        ("127.0.0.1", {"127.0.0.1"}, "a loopback address"),
        ("localhost", {"127.0.0.1", "::1"}, "a loopback address"),  # whichever the resolver lists first
        ("[::1]", {"::1"}, "a loopback address"),
        ("10.0.0.1", {"10.0.0.1"}, "a private network address"),
        ("169.254.169.254", {"169.254.169.254"}, "a link-local address"),
        ("0.0.0.0", {"0.0.0.0"}, "the unspecified address"),
        ("[::ffff:127.0.0.1]", {"::ffff:7f00:1"}, "an IPv6 form of 127.0.0.1, which is a loopback address"),
        ("2130706433", {"127.0.0.1"}, "a loopback address"),  # 127.0.0.1 as one number
    ],
)
def test_private_targets_are_refused_before_any_connection(
    run_tool: RunTool, web: WebServer, settings: Any, host: str, addresses: set[str], reason: str
) -> None:
    assert settings.AGENT_WEBFETCH_ALLOW_PRIVATE is False
    settings.AGENT_WEBFETCH_TIMEOUT = 2
    url = web.url("/plain.txt", host=host)

    result = run_tool("webfetch", {"url": url})

    assert result.is_error
    refusal = result.output.split(" resolves to ", 1)[1]
    assert refusal.split(", ", 1)[0] in addresses
    assert f", {reason}. webfetch only reaches public internet addresses" in refusal
    assert "AGENT_WEBFETCH_ALLOW_PRIVATE" in result.output
    assert web.requests == []


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.8.9.10", "a loopback address"),
        ("192.168.1.20", "a private network address"),
        ("172.16.0.1", "a private network address"),
        ("100.64.0.1", "not a public internet address"),
        ("fe80::1", "a link-local address"),
        ("fd00::1", "a private network address"),
        ("ff02::1", "a multicast address"),
        ("224.0.0.251", "a multicast address"),
        ("::", "the unspecified address"),
        ("::10.0.0.1", "an IPv6 form of 10.0.0.1, which is a private network address"),
        ("2002:a9fe:a9fe::", "an IPv6 form of 169.254.169.254, which is a link-local address"),
        ("64:ff9b::7f00:1", "an IPv6 form of 127.0.0.1, which is a loopback address"),
    ],
)
def test_guard_refuses_every_kind_of_non_public_address(address: str, reason: str) -> None:
    assert blocked_reason(ipaddress.ip_address(address)) == reason


@pytest.mark.parametrize(
    "address", ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c", "::ffff:8.8.8.8"]
)
def test_guard_lets_public_addresses_through(address: str) -> None:
    assert blocked_reason(ipaddress.ip_address(address)) is None


# webfetch: TLS keeps the host name while connecting to the vetted address


@pytest.fixture
def tls_web(tmp_path: Path) -> Iterator[tuple[WebServer, list[str | None]]]:
    """An HTTPS server on 127.0.0.1 with a self-signed certificate for localhost.

    Yields the site and the server names (SNI) clients asked for.
    """
    cert, key = _self_signed_certificate(tmp_path, "localhost")
    server_names: list[str | None] = []
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.sni_callback = lambda _socket, name, _context: server_names.append(name)  # type: ignore[assignment,misc,return-value]
    site = WebServer(port=0)
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("SiteHandler", (Handler,), {"site": site}))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    site.port = server.server_address[1]
    for served in serve(site, server):
        yield served, server_names


@pytest.mark.usefixtures("allow_private")
def test_tls_sends_the_host_name_and_verifies_the_certificate(
    run_tool: RunTool, tls_web: tuple[WebServer, list[str | None]]
) -> None:
    site, server_names = tls_web
    url = f"https://localhost:{site.port}/plain.txt"

    result = run_tool("webfetch", {"url": url})

    assert server_names == ["localhost"]  # SNI names the host, though 127.0.0.1 was dialled
    assert result.is_error
    assert "CERTIFICATE_VERIFY_FAILED" in result.output  # self-signed: refused, verification is on
    assert site.requests == []


def _self_signed_certificate(directory: Path, host: str) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


# web_search


def scripted_search(query: str, max_results: int) -> list[dict[str, Any]]:
    """A search backend for AGENT_SEARCH_BACKEND="tests.tools.test_web.scripted_search"."""
    return [
        {"title": f"About {query}", "url": "https://example.net/a", "snippet": f"{max_results} wanted"},
        {"title": "", "url": "https://example.net/b"},
        {"title": "no url, dropped"},
    ]


def broken_search(query: str, max_results: int) -> list[dict[str, Any]]:
    raise RuntimeError("quota exceeded")


def test_search_through_searxng_numbers_the_results(run_tool: RunTool, web: WebServer, settings: Any) -> None:
    # The operator's endpoint is on loopback and the address guard is on: it does not apply here.
    settings.AGENT_SEARCH_BACKEND = "searxng"
    settings.AGENT_SEARCH_URL = web.url("/")
    settings.AGENT_SEARCH_API_KEY = "search-key"

    result = run_tool("web_search", {"query": "django agents", "max_results": 2})

    assert not result.is_error
    assert result.title == "2 results for 'django agents'"
    assert result.output == (
        "1. First result — https://example.org/one\n  The first snippet.\n2. Second result — https://example.org/two"
    )
    [request] = web.requests
    assert request.path == "/search"
    assert request.query == {"q": ["django agents"], "format": ["json"]}
    assert request.headers["authorization"] == "Bearer search-key"


def test_searxng_without_the_json_format_says_how_to_fix_it(
    run_tool: RunTool, web: WebServer, settings: Any
) -> None:
    settings.AGENT_SEARCH_BACKEND = "searxng"
    settings.AGENT_SEARCH_URL = web.url("/nojson")

    result = run_tool("web_search", {"query": "x"})

    assert result.is_error
    assert "answered HTTP 403 (is the json format enabled in its settings.yml" in result.output
    assert "authorization" not in web.requests[0].headers  # no key configured, none sent


def test_search_through_a_dotted_path_backend(run_tool: RunTool, settings: Any) -> None:
    settings.AGENT_SEARCH_BACKEND = "tests.tools.test_web.scripted_search"

    result = run_tool("web_search", {"query": "pinning"})

    assert result.output == (
        "1. About pinning — https://example.net/a\n  5 wanted\n2. https://example.net/b — https://example.net/b"
    )


def test_a_failing_backend_is_a_clear_error(run_tool: RunTool, settings: Any) -> None:
    settings.AGENT_SEARCH_BACKEND = "tests.tools.test_web.broken_search"

    result = run_tool("web_search", {"query": "x"})

    assert result.is_error
    assert result.output == "web_search failed: The search backend failed: RuntimeError: quota exceeded."


def test_search_unconfigured_says_how_to_configure_it(run_tool: RunTool, settings: Any) -> None:
    settings.AGENT_SEARCH_BACKEND = ""

    result = run_tool("web_search", {"query": "x"})

    assert result.is_error
    assert "Web search is not configured" in result.output
    assert "AGENT_SEARCH_BACKEND=searxng and AGENT_SEARCH_URL" in result.output


def test_search_arguments_are_checked(run_tool: RunTool, settings: Any) -> None:
    settings.AGENT_SEARCH_BACKEND = "tests.tools.test_web.scripted_search"

    assert "query is empty" in run_tool("web_search", {"query": "  "}).output
    assert (
        "max_results must be between 1 and 20, got 0"
        in run_tool("web_search", {"query": "x", "max_results": 0}).output
    )


@pytest.mark.parametrize(
    ("environment", "message"),
    [
        ({"AGENT_SEARCH_BACKEND": "bing"}, "AGENT_SEARCH_BACKEND='bing': use searxng or the dotted path"),
        ({"AGENT_SEARCH_BACKEND": "searxng"}, "AGENT_SEARCH_BACKEND=searxng needs AGENT_SEARCH_URL"),
        ({"AGENT_WEBFETCH_ALLOW_PRIVATE": "maybe"}, "AGENT_WEBFETCH_ALLOW_PRIVATE='maybe' is not a boolean"),
    ],
)
def test_bad_search_settings_stop_start_up(
    monkeypatch: pytest.MonkeyPatch, environment: dict[str, str], message: str
) -> None:
    monkeypatch.delenv("AGENT_SEARCH_URL", raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)

    with pytest.raises(ImproperlyConfigured, match=message):
        runpy.run_module("agentsite.settings.runtime")


def test_a_dotted_path_backend_is_accepted_at_start_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_SEARCH_BACKEND", "mypackage.search.run")

    loaded = runpy.run_module("agentsite.settings.runtime")

    assert loaded["AGENT_SEARCH_BACKEND"] == "mypackage.search.run"


# registration


def test_web_tools_are_builtin_read_only_and_offered_to_the_analyst_preset(settings: Any) -> None:
    from memory.presets import AGENT_PRESETS

    settings.AGENT_SEARCH_BACKEND = "tests.tools.test_web.scripted_search"
    registry = load_builtin_tools()
    analyst = AGENT_PRESETS["analyst"]
    offered = {t.name for t in registry.select(allowed=analyst.allowed_tools, denied=analyst.denied_tools)}

    for name in ("webfetch", "web_search"):
        tool = registry.get(name)
        assert tool is not None and (tool.risk, tool.read_only) == ("safe", True)
        assert name in offered


def test_search_is_not_offered_without_a_backend_and_asking_for_it_says_why(settings: Any) -> None:
    settings.AGENT_SEARCH_BACKEND = ""
    registry = load_builtin_tools()

    offered = {t.name for t in registry.select()}
    assert "webfetch" in offered and "web_search" not in offered
    with pytest.raises(
        ValueError, match="tool web_search is not available on this server: no search backend"
    ):
        registry.check_requested(["read", "web_search"])
    with pytest.raises(ValueError, match="unknown tool\\(s\\): websearch; available: "):
        registry.check_requested(["websearch"])
    registry.check_requested(["read", "webfetch"])
