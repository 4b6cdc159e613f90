"""Loopback HTTP servers for the tests of the real network functions (links, metadata)."""

import http.server
import socket
import threading

import pytest


@pytest.fixture
def serve():
    """serve(Handler) -> base URL of a ThreadingHTTPServer on 127.0.0.1, shut down after the test."""
    servers = []

    def start(handler: type[http.server.BaseHTTPRequestHandler]) -> str:
        handler.log_message = lambda self, *args: None
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def refused_url() -> str:
    """A URL on a port nobody listens on: the connection is refused, no HTTP answer."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/"
