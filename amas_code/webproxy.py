"""A forward proxy in front of Chromium, on 127.0.0.1: every connection the browser makes goes
through it (a Web Worker's WebSocket, a service worker's fetch, which Playwright's routes never
see), and reaches only a host and port the page's gated requests already reached. It never asks:
the routes ask the person; what nobody was asked about does not go out."""

import select
import socket
import socketserver
import threading
from collections.abc import Callable
from urllib.parse import urlsplit

IDLE = 300  # seconds a tunnel may stay silent (a WebSocket waiting for news) before it is closed
REFUSED = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
TUNNEL = b"HTTP/1.1 200 Connection established\r\n\r\n"
HOP_BY_HOP = (b"proxy-connection:", b"connection:", b"keep-alive:")


def place(url: str) -> str:
    """host:port of a URL (the scheme's port when none is written), the host in lower case."""
    parts = urlsplit(url)
    try:
        port = parts.port or {"http": 80, "https": 443, "ws": 80, "wss": 443}.get(parts.scheme, 0)
    except ValueError:  # a port that is not a number
        port = 0
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{port}"


class Proxy:
    """The proxy, serving in a thread of its own until close(); `known(place)` says whether a
    host:port may be reached."""

    def __init__(self, known: Callable[[str], bool]):
        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Handler)
        self.server.daemon_threads = True
        self.server.known = known
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def args(self) -> list[str]:
        """Chromium's flags: all of it through the proxy, loopback too (Chromium skips the proxy
        for 127.0.0.1 unless told), and WebRTC's UDP, which no HTTP proxy carries, off."""
        port = self.server.server_address[1]
        return [
            f"--proxy-server=http://127.0.0.1:{port}",
            "--proxy-bypass-list=<-loopback>",
            "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
        ]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Handler(socketserver.StreamRequestHandler):
    """One connection from Chromium: a CONNECT tunnel (https, wss, ws), or one http request."""

    rbufsize = 0  # unbuffered: what follows the request's head is pumped, never left in a buffer

    def handle(self) -> None:
        words = self.rfile.readline(8192).decode("latin-1").split()
        method, target, version = (words + ["", "", ""])[:3]
        head = _head(self.rfile)
        connect = method == "CONNECT"
        url = target
        if connect:  # host:port, which urlsplit reads as a host only after //
            url = f"//{target}"
        where = place(url)
        if not self.server.known(where) or where.endswith(":0"):
            self.wfile.write(REFUSED)
            return
        try:
            upstream = socket.create_connection(_address(where), timeout=30)
        except OSError as e:  # said as the browser would say it had it connected itself
            self.wfile.write(_unreachable(where, e))
            return
        with upstream:
            if connect:
                self.wfile.write(TUNNEL)
            else:
                upstream.sendall(_forwarded(method, target, version, head))
            _pump(self.connection, upstream)


def _unreachable(where: str, error: OSError) -> bytes:
    """A 502 naming why the host could not be reached, in a header the browser tool reads."""
    why = f"cannot connect to {where}: {error.strerror or error}".encode("latin-1", "replace")
    head = b"HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\nX-Amas-Unreachable: " + why
    return (
        head
        + b"\r\nContent-Type: text/plain\r\nContent-Length: "
        + str(len(why)).encode()
        + b"\r\n\r\n"
        + why
    )


def _head(stream) -> list[bytes]:
    """The request's header lines, up to the empty line (at most 100)."""
    lines = []
    while len(lines) < 100:
        line = stream.readline(8192)
        if line in (b"\r\n", b"\n", b""):
            break
        lines.append(line)
    return lines


def _address(where: str) -> tuple[str, int]:
    host, _, port = where.rpartition(":")
    return host.strip("[]"), int(port)


def _forwarded(method: str, target: str, version: str, head: list[bytes]) -> bytes:
    """A plain http request as the server takes it: its path, not the whole URL, and one request
    per connection (a next one may be for another host, which is judged again)."""
    parts = urlsplit(target)
    path = parts.path or "/"
    if parts.query:
        path += f"?{parts.query}"
    kept = [line for line in head if not line.lower().startswith(HOP_BY_HOP)]
    first = f"{method} {path} {version}\r\n".encode("latin-1")
    return first + b"".join(kept) + b"Connection: close\r\n\r\n"


def _pump(a: socket.socket, b: socket.socket) -> None:
    """Bytes both ways until either side closes or both stay silent for IDLE seconds."""
    other = {a: b, b: a}
    while True:
        ready, _, _ = select.select([a, b], [], [], IDLE)
        if not ready:
            return
        for end in ready:
            try:
                data = end.recv(65536)
                if not data:
                    return
                other[end].sendall(data)
            except OSError:  # reset by either side
                return
