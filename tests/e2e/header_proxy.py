"""A forwarding HTTP proxy that adds an `Authorization` header: for a client that cannot
be given one (the MCP conformance kit's server mode), in front of a real server.

Everything else passes through as sent, the Host header included (the kit's
DNS-rebinding scenario sends its own), and the answer streams back chunk by chunk.
"""

from __future__ import annotations

import http.client
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

logger = logging.getLogger(__name__)

HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "proxy-authorization",
}
REPLACED = {"authorization", "content-length"}


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up early (the kit closes its connections) is not an error.
        logger.debug("header proxy: a request from %s ended early", client_address, exc_info=True)


def start(target_port: int, authorization: str) -> ThreadingHTTPServer:
    """Serve on a free loopback port (`server.server_address[1]`) until `server.shutdown()`."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            upstream = http.client.HTTPConnection("127.0.0.1", target_port, timeout=120)
            upstream.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in self.headers.items():
                if name.lower() not in HOP_BY_HOP | REPLACED:
                    upstream.putheader(name, value)
            upstream.putheader("Authorization", authorization)
            if body is not None:
                upstream.putheader("Content-Length", str(len(body)))
            upstream.endheaders(body)
            response = upstream.getresponse()
            self.send_response(response.status)
            for name, value in response.getheaders():
                if name.lower() not in HOP_BY_HOP | {"content-length"}:
                    self.send_header(name, value)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            while chunk := response.read1(65536):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            upstream.close()

        do_GET = do_POST = do_DELETE = forward

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = _Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True, name="header proxy").start()
    return server
