"""`capacity-launcher web`: a read-only web view of one deployment, served by the standard
library's http.server.

Three static files (`web/`: a page, its script and its style; no build step) and one JSON
endpoint, `/api/view`, which the page polls every `--interval` seconds and renders in place
(web_view.py builds it through the service's queries). Nothing here writes: any method but GET
and HEAD is refused.

Bound to 127.0.0.1 by default. On a loopback address a request must name a loopback host
(`Host: 127.0.0.1:PORT` or `localhost:PORT`), so a web page elsewhere cannot read the view by
pointing a name of its own at this port (DNS rebinding). Every answer forbids framing and any
script but the page's own (Content-Security-Policy); the page writes every value as text, so a
name a user chose never becomes markup.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any

from capacity_launcher_cli.deployment import Deployment

VIEW_PATH = "/api/view"
# name served -> (file in web/, content type)
STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/web.js": ("web.js", "text/javascript; charset=utf-8"),
    "/web.css": ("web.css", "text/css; charset=utf-8"),
}
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")

ViewReader = Callable[[], dict[str, Any]]


class ViewCache:
    """The last view read, reused for `max_age` seconds: several pages open on one view cost
    one read of the service per refresh, not one each."""

    def __init__(self, read: ViewReader, max_age: float) -> None:
        self._read = read
        self._max_age = max_age
        self._lock = threading.Lock()
        self._view: dict[str, Any] | None = None
        self._read_at = 0.0

    def __call__(self) -> dict[str, Any]:
        with self._lock:
            if self._view is None or time.monotonic() - self._read_at >= self._max_age:
                self._view = self._read()
                self._read_at = time.monotonic()
            return self._view


def allowed_hosts(host: str, port: int) -> frozenset[str] | None:
    """The Host headers a server bound to `host:port` answers; None (any) off loopback, where
    the operator chose to publish it."""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        return None
    return frozenset(name for n in LOOPBACK_NAMES for name in (n, f"{n}:{port}"))


class _Handler(BaseHTTPRequestHandler):
    server: WebServer
    server_version = "capacity-launcher-web"
    sys_version = ""

    def do_GET(self) -> None:
        self._answer(send_body=True)

    def do_HEAD(self) -> None:
        self._answer(send_body=False)

    def _answer(self, send_body: bool) -> None:
        hosts = self.server.hosts
        if hosts is not None and self.headers.get("Host", "").lower() not in hosts:
            self._send(HTTPStatus.FORBIDDEN, b"unknown host\n", "text/plain", send_body)
            return
        path = self.path.split("?", 1)[0]
        if path == VIEW_PATH:
            status, body = self.server.view_body()
            self._send(status, body, "application/json", send_body)
        elif path == "/favicon.ico":  # none: say so without an error in the browser's console
            self._send(HTTPStatus.NO_CONTENT, b"", "image/x-icon", send_body)
        elif path in STATIC:
            name, content_type = STATIC[path]
            data = resources.files("capacity_launcher_cli").joinpath("web", name).read_bytes()
            self._send(HTTPStatus.OK, data, content_type, send_body)
        else:
            self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain", send_body)

    def _send(self, status: int, body: bytes, content_type: str, send_body: bool) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in SECURITY_HEADERS.items():
            self.send_header(name, value)
        self.end_headers()
        if send_body:
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: a page polling every two seconds would fill the terminal."""


class WebServer(ThreadingHTTPServer):
    """The view's HTTP server: `read` builds the JSON `/api/view` answers."""

    daemon_threads = True

    def __init__(self, host: str, port: int, read: ViewReader) -> None:
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__((host, port), _Handler)
        self.read = read
        self.hosts = allowed_hosts(host, self.server_address[1])

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else host
        return f"http://[{name}]:{port}/" if ":" in name else f"http://{name}:{port}/"

    def view_body(self) -> tuple[int, bytes]:
        """The view as JSON, or (502) the error that kept it from being read: the page says
        so and keeps polling."""
        try:
            return HTTPStatus.OK, json.dumps(self.read()).encode()
        except Exception as error:  # any failure to read is the page's to show
            answer = {"error": f"{type(error).__name__}: {error}"}
            return HTTPStatus.BAD_GATEWAY, json.dumps(answer).encode()


def view_reader(deployment: Deployment, refresh_seconds: float) -> ViewReader:
    """The deployment's view, read through the service's queries on the service's clock (the
    running local cloud's, read again each time: `POST /moto-capacity/clock` may move it)."""
    from capacity_launcher_cli.emulator_clock import service_clock
    from capacity_launcher_cli.service import adapters
    from capacity_launcher_cli.web_view import observe, view_json

    where = deployment.stack_name or f"local cloud {deployment.endpoint_url}"

    def read() -> dict[str, Any]:
        asked = adapters(deployment, service_clock(deployment)).queries()
        return view_json(observe(asked, where), refresh_seconds)

    return ViewCache(read, max_age=refresh_seconds / 2)


def start(deployment: Deployment, host: str, port: int, refresh_seconds: float) -> WebServer:
    """The view served on a thread of its own (`shutdown()` and `server_close()` stop it)."""
    server = WebServer(host, port, view_reader(deployment, refresh_seconds))
    threading.Thread(target=server.serve_forever, name="web-view", daemon=True).start()
    return server


def web(args: argparse.Namespace, deployment: Deployment) -> int:
    """Serve until Ctrl-C or SIGTERM."""
    if args.interval <= 0:
        print("error: --interval: must be more than 0 seconds", file=sys.stderr)
        return 2
    try:
        server = WebServer(args.host, args.port, view_reader(deployment, args.interval))
    except OSError as error:
        print(f"error: cannot listen on {args.host}:{args.port}: {error}", file=sys.stderr)
        return 1
    signal.signal(signal.SIGTERM, _interrupt)
    print(f"web view at {server.url} (Ctrl-C stops it)", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def _interrupt(_signal: int, _frame: object) -> None:
    raise KeyboardInterrupt
