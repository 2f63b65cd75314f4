"""A small fault-injecting HTTP proxy placed in front of the real server.

Rules decide, per request, whether to forward it, answer with a status, drop the
connection before or after forwarding, or inject an `{"error"}` line into a /query stream.
"""

import http.server
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Optional

import requests

HOP_HEADERS = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailers",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "host",
    "content-encoding",
}


@dataclass
class Request:
    method: str
    path: str  # with query string
    body: bytes
    headers: dict[str, str]
    at: float = 0.0

    @property
    def route(self) -> str:
        return self.path.split("?", 1)[0]


@dataclass
class Rule:
    """`action`: forward | status | drop | forward_then_drop | error_line | slow
    (forward, then wait `delay` seconds before answering)."""

    match: Callable[[Request], bool]
    action: str
    status: int = 503
    body: bytes = b"injected failure"
    times: Optional[int] = None  # None = forever
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    hits: int = 0
    # forwarded instead of the request body (e.g. a script cut after some statements)
    rewrite_body: Optional[Callable[[bytes], bytes]] = None


@dataclass
class FaultProxy:
    upstream: str
    rules: list[Rule] = field(default_factory=list)
    log: list[Request] = field(default_factory=list)

    def __post_init__(self) -> None:
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # noqa: D401 - silence
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                req = Request(
                    self.command, self.path, body, dict(self.headers.items()), time.monotonic()
                )
                proxy.log.append(req)
                rule = proxy._pick(req)
                action = rule.action if rule else "forward"
                if action == "drop":
                    self.close_connection = True
                    return
                if action == "status":
                    self.send_response(rule.status)
                    self.send_header("Content-Type", "text/plain")
                    for k, v in rule.headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(rule.body)))
                    self.end_headers()
                    self.wfile.write(rule.body)
                    return
                headers = {k: v for k, v in req.headers.items() if k.lower() not in HOP_HEADERS}
                if rule is not None and rule.rewrite_body is not None:
                    body = rule.rewrite_body(body)
                resp = requests.request(
                    req.method,
                    proxy.upstream + req.path,
                    data=body,
                    headers=headers,
                    timeout=600,
                )
                if action == "forward_then_drop":
                    self.close_connection = True
                    return
                if action == "slow":
                    time.sleep(rule.delay)
                content = resp.content
                if action == "error_line" and resp.status_code == 200:
                    lines = content.split(b"\n")
                    content = lines[0] + b"\n" + b'{"error": "injected stream error"}\n'
                self.send_response(resp.status_code)
                for k, v in resp.headers.items():
                    if k.lower() not in HOP_HEADERS:
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            do_GET = _handle
            do_POST = _handle
            do_DELETE = _handle

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def _pick(self, req: Request) -> Optional[Rule]:
        for rule in self.rules:
            if rule.times is not None and rule.hits >= rule.times:
                continue
            if rule.match(req):
                rule.hits += 1
                return rule
        return None

    def count(self, route: str, contains: str = "") -> int:
        return sum(
            1
            for r in self.log
            if r.route == route and (contains in r.path or contains.encode() in r.body)
        )

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
