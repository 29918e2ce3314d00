"""A local web server for the web and browser tests:
fixed pages on 127.0.0.1, never the internet."""

import contextlib
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
SOCKET = """<title>Socket</title><p id="log">opening</p><script>
const log = document.querySelector('#log'), ws = new WebSocket('ws://127.0.0.1:PORT/live');
const done = (what) => {
  log.textContent += ' ' + what; log.insertAdjacentHTML('afterend', '<p id=done>done</p>');
};
ws.onmessage = (e) => { log.textContent += ' got ' + e.data; ws.close(); };
ws.onerror = () => { log.textContent += ' error'; };
ws.onclose = (e) => done('closed ' + e.code);
</script>"""
# a page whose Web Worker opens the WebSocket (Playwright routes only the page's own)
WORKER = """<title>Worker</title><p id="log">opening</p><script>
const log = document.querySelector('#log');
const code = "const ws = new WebSocket('ws://127.0.0.1:PORT/live');"
  + "ws.onmessage = (e) => { postMessage('got ' + e.data); ws.close(); };"
  + "ws.onclose = (e) => postMessage('closed ' + e.code);";
const worker = new Worker(URL.createObjectURL(new Blob([code])));
worker.onmessage = (e) => {
  log.textContent += ' ' + e.data;
  if (e.data.startsWith('closed')) log.insertAdjacentHTML('afterend', '<p id=done>done</p>');
};
</script>"""
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
    """Serves ROUTES plus /search (SearXNG's JSON), /slow and /trickle;
    records each request's path."""

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
        # a client that hung up early is expected here
        self.server.handle_error = lambda *args: None
        self.port = self.server.server_port
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    def serve(self, h: BaseHTTPRequestHandler) -> None:
        path, query = urlsplit(h.path).path, urlsplit(h.path).query
        if path == "/goto":  # a redirect to the URL in ?to=, another origin for the gate's tests
            return self.send(h, 302, "text/plain", b"", {"Location": parse_qs(query)["to"][0]})
        if path == "/loop":  # a redirect to itself, for ever
            return self.send(h, 307, "text/plain", b"", {"Location": "/loop"})
        # a page that opens a WebSocket to the port in ?port= and says how it went
        if path == "/socket":
            return self.send(
                h, 200, "text/html", SOCKET.replace("PORT", parse_qs(query)["port"][0]).encode()
            )
        if path == "/worker":  # the same, from a Web Worker
            page = WORKER.replace("PORT", parse_qs(query)["port"][0])
            return self.send(h, 200, "text/html", page.encode())
        if path == "/picture":  # a page showing the image at ?src=
            html = f"<title>Pic</title><img src='{parse_qs(query)['src'][0]}'>"
            return self.send(h, 200, "text/html", html.encode())
        if path == "/search":
            return self.send(h, 200, "application/json", json.dumps(SEARX).encode())
        if path == "/slow":  # answers only when the tests are over
            self.stop.wait(10)
            return self.send(h, 200, "text/plain", b"finally")
        # headers at once, then a byte every 0.1 s: only a total deadline stops it
        if path == "/trickle":
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


class Sockets:
    """A WebSocket service on 127.0.0.1 (Home Assistant, Jupyter, a dev server): it counts the
    connections it accepts and greets each with one text message, "hello"."""

    def __init__(self):
        import socket

        self.accepted, self.stop = 0, threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.05)
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            with conn:
                self.greet(conn)

    def greet(self, conn) -> None:
        """The upgrade handshake (RFC 6455, section 4.2.2), then one unmasked text frame."""
        import base64
        import hashlib

        conn.settimeout(5)
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 8192:
            head += conn.recv(1024) or b"\r\n\r\n"
        key = next(
            (
                line.split(b":", 1)[1].strip()
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"sec-websocket-key:")
            ),
            b"",
        )
        accept = base64.b64encode(
            hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest()
        )
        conn.sendall(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n" + b"\x81\x05hello"
        )
        with contextlib.suppress(OSError):
            conn.recv(1024)  # the page's close frame

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.listener.close()
