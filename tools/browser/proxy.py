"""The HTTP proxy a session's Chromium sends its traffic through (DNS rebinding guard).

The route guard (`session.py:BrowserSession._guard`) checks a request's host before
Chromium sends it, but Chromium then resolves the host again itself: a DNS answer
that changes in between (rebinding) could move the connection to a refused
address. Through this proxy Chromium never connects anywhere itself: the proxy
resolves the host, checks every address (`tools/netguard.py`) and connects to the
address it checked, for CONNECT tunnels (https, wss) and plain http requests alike.
Chromium always bypasses a proxy for literal loopback hosts (localhost, 127.0.0.1,
[::1]), which need no DNS: the route guard refuses those.
"""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import urlsplit

import httpx

from tools.netguard import AddressCheck, resolve_host
from traces.runner.tool_api import ToolError

HEAD_LIMIT = 64 * 1024
CONNECT_TIMEOUT = 10.0
HOP_HEADERS = frozenset({b"proxy-connection", b"connection", b"keep-alive", b"proxy-authorization"})


class GuardedProxy:
    def __init__(self, check: AddressCheck | None, *, refused: list[str]) -> None:
        self.check = check
        self.refused = refused  # the session's: page_state reports them
        self._server: asyncio.Server | None = None

    async def start(self) -> str:
        """Listen on a free loopback port; the proxy URL for Chromium."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=HEAD_LIMIT)
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), CONNECT_TIMEOUT)
            request_line, _, header_block = head[:-4].partition(b"\r\n")
            method, target, version = request_line.decode("latin-1").split(" ", 2)
            if method == "CONNECT":
                await self._tunnel(target, reader, writer)
            else:
                await self._forward(method, target, version, header_block, reader, writer)
        except (ValueError, OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass
        except asyncio.CancelledError:  # the session is closing; the connection just ends
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _tunnel(self, target: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host, _, port = target.rpartition(":")
        upstream = await self._connect(host.strip("[]"), int(port), writer)
        if upstream is None:
            return
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await _relay(reader, writer, *upstream)

    async def _forward(
        self,
        method: str,
        target: str,
        version: str,
        header_block: bytes,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        url = urlsplit(target)
        if url.scheme != "http" or not url.hostname:
            writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        upstream = await self._connect(url.hostname, url.port or 80, writer)
        if upstream is None:
            return
        path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        lines = [
            line
            for line in header_block.split(b"\r\n")
            if line.split(b":", 1)[0].strip().lower() not in HOP_HEADERS
        ]
        # One request per upstream connection: Chromium opens another for the next one.
        head = f"{method} {path} {version}\r\n".encode("latin-1") + b"\r\n".join(
            [*lines, b"Connection: close"]
        )
        upstream[1].write(head + b"\r\n\r\n")
        await _relay(reader, writer, *upstream)

    async def _connect(
        self, host: str, port: int, client: asyncio.StreamWriter
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """A connection to a checked address of `host`, or None after answering 403."""
        shown = f"[{host}]" if ":" in host else host
        try:
            addresses = await asyncio.to_thread(
                resolve_host, httpx.URL(f"http://{shown}:{port}/"), self.check
            )
            return await asyncio.wait_for(asyncio.open_connection(str(addresses[0]), port), CONNECT_TIMEOUT)
        except (ToolError, httpx.InvalidURL) as exc:
            self.refused.append(f"a connection to {host}:{port}: {exc}")
            client.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        except (OSError, TimeoutError):
            client.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        return None


async def _relay(
    client_reader: asyncio.StreamReader,
    client_writer: asyncio.StreamWriter,
    upstream_reader: asyncio.StreamReader,
    upstream_writer: asyncio.StreamWriter,
) -> None:
    async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while chunk := await source.read(65536):
                sink.write(chunk)
                await sink.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            with contextlib.suppress(Exception):
                sink.close()

    await asyncio.gather(pipe(client_reader, upstream_writer), pipe(upstream_reader, client_writer))
