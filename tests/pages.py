"""A local web server for the web and browser tests: fixed pages on 127.0.0.1, never the internet."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

# a 1x1 transparent PNG
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)
FORM = """<!doctype html>
<html><head><title>Form page</title></head><body>
<h1>Sign up</h1>
<p>Read the <a href="/text">plain text</a> or the <a href="/other">other page</a>.</p>
<input id="name"> <span id="echo"></span>
<button id="go" onclick="document.querySelector('#result').textContent = 'Hello, ' +
  document.querySelector('#name').value; document.title = 'Greeted'">Go</button>
<div id="result">waiting</div>
<script>
document.querySelector('#name').addEventListener('input', e => {
  document.querySelector('#echo').textContent = 'typed: ' + e.target.value; });
</script>
</body></html>"""
SCRIPTED = """<html><head><title>Scripted</title><style>.secret { content: "STYLE_SECRET"; }</style>
<script>var token = "SCRIPT_SECRET";</script></head>
<body><p>Visible words with <b>bold</b> and an image <img src="/logo.png" alt="LOGO_ALT"></p>
<script>document.write("WRITTEN_BY_SCRIPT")</script></body></html>"""
TEXT = "Just plain text.\n  Indented   spacing stays.\n"
ROUTES = {  # path -> (status, content type, body, extra headers)
    "/": (200, "text/html; charset=utf-8", FORM.encode(), {}),
    "/other": (200, "text/html", b"<title>Other page</title><p>You arrived.</p>", {}),
    "/scripted": (200, "text/html", SCRIPTED.encode(), {}),
    "/text": (200, "text/plain; charset=utf-8", TEXT.encode(), {}),
    "/data.json": (200, "application/json", b'{"name": "amas", "tools": [1, 2]}', {}),
    "/logo.png": (200, "image/png", PNG, {}),
    "/file.bin": (200, "application/octet-stream", b"\0\1\2\3" * 100, {}),
    "/untyped": (200, "", b"\0ELF binary without a content type", {}),
    "/redirect": (302, "text/plain", b"", {"Location": "/text"}),
    "/long": (200, "text/plain", b"0123456789" * 10_000, {}),
    "/huge": (200, "text/plain", b"x" * 3_000_000, {}),
    "/latin1": (
        200,
        "text/html; charset=iso-8859-1",
        "<p>Café crème, señor</p>".encode("latin-1"),
        {},
    ),
    "/broken/search": (500, "text/plain", b"internal error", {}),
    "/limited/search": (429, "text/plain", b"too many requests", {}),
}
SEARX = {
    "results": [
        {"title": "Result one", "url": "https://example.org/1", "content": "first snippet"},
        {"title": "Result two", "url": "https://example.org/2", "content": "second snippet"},
    ]
}


class Pages:
    """Serves ROUTES plus /search (SearXNG's JSON), /slow and /trickle; records each request's path."""

    def __init__(self):
        self.requests, self.stop, pages = [], threading.Event(), self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                pages.requests.append(self.path)
                pages.serve(self)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.handle_error = lambda *args: (
            None
        )  # a client that hung up early is expected here
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    def serve(self, h: BaseHTTPRequestHandler) -> None:
        path = urlsplit(h.path).path
        if path == "/search":
            return self.send(h, 200, "application/json", json.dumps(SEARX).encode())
        if path == "/slow":  # answers only when the tests are over
            self.stop.wait(10)
            return self.send(h, 200, "text/plain", b"finally")
        if (
            path == "/trickle"
        ):  # headers at once, then a byte every 0.1 s: only a total deadline stops it
            h.send_response(200)
            h.send_header("Content-Type", "text/plain")
            h.end_headers()
            while not self.stop.wait(0.1):
                h.wfile.write(b".")
                h.wfile.flush()
            return
        status, kind, body, headers = ROUTES.get(
            path, (404, "text/html", b"<title>Not found</title>", {})
        )
        self.send(h, status, kind, body, headers)

    def send(self, h, status: int, kind: str, body: bytes, headers: dict | None = None) -> None:
        h.send_response(status)
        for key, value in {
            "Content-Type": kind,
            "Content-Length": str(len(body)),
            **(headers or {}),
        }.items():
            if value:
                h.send_header(key, value)
        h.end_headers()
        h.wfile.write(body)

    def queries(self, path: str = "/search") -> list[dict]:
        """The parsed query strings of the requests made to path."""
        return [
            parse_qs(urlsplit(p).query) for p in self.requests if urlsplit(p).path.endswith(path)
        ]

    def close(self) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)
