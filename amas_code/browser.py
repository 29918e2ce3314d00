"""The web: search through a configurable backend, a page fetched as text, and a Chromium page
driven by Playwright."""

import contextlib
import functools
import glob
import os
import re
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

from amas_code import effects, project, redact, webproxy

MAX_BYTES = 2_000_000  # stop downloading a page past this
MAX_CHARS = 20_000  # characters of a fetched page the model gets
MAX_TEXT = 4_000  # characters of browser page text in one answer
MAX_HOPS = 5  # redirects fetch_url follows, each judged by the host gate
TIMEOUT = 20  # seconds for a whole fetch; connecting gets at most 10
USER_AGENT = "Mozilla/5.0 (X11; Linux x86_64) amas-code"
TEXT_TYPES = ("text/", "json", "xml", "javascript", "yaml")  # content types read as text
# the encodings fetch_url asks for, as zlib reads them
WBITS = {"gzip": 31, "x-gzip": 31, "deflate": 15}
HEADERS = {"User-Agent": USER_AGENT, "Accept-Encoding": "gzip, deflate"}
# Spelled out so no update brings background traffic back; the rest save
# memory on a 1 GB Pi: no GPU work, one renderer however many sites a page pulls in.
ARGS = (
    "--disable-background-networking --disable-component-update --no-first-run --disable-gpu "
    "--disable-software-rasterizer --disable-dev-shm-usage --disable-extensions "
    "--renderer-process-limit=1 --mute-audio --in-process-gpu"
).split()
# Chromium's own sandbox cannot run as root; without it, no zygote
AS_ROOT = ["--no-sandbox", "--no-zygote"]
WAIT = 5_000  # ms for a selector to appear (a wrong one should fail fast)
PUMP_MS = 20  # ms a call waits after its action, for the page's own requests to reach their routes
LOAD = 30_000  # ms for a page to load
INSTALL = (
    "no Chromium found. Install the light headless one with "
    "`sudo apt install chromium-headless-shell` (Debian, Raspberry Pi OS), or `chromium`, or set "
    "`browser_path` in ~/.amas/config.yaml"
)


def _google(query: str, n: int, config: dict) -> list[tuple[str, str, str]]:
    from googlesearch import search

    results = [(r.title, r.url, r.description) for r in search(query, num_results=n, advanced=True)]
    if not results:  # Google answers a scraper it blocks with a page that has no results
        raise LookupError("no results, which usually means Google blocked the request")
    return results


def _duckduckgo(query: str, n: int, config: dict) -> list[tuple[str, str, str]]:
    try:
        from ddgs import DDGS
    except ImportError:
        raise LookupError(
            "the ddgs package is not installed: pip install 'amas-code[duckduckgo]'"
        ) from None
    return [
        (r.get("title", ""), r.get("href", ""), r.get("body", ""))
        for r in DDGS().text(query, max_results=n)
    ]


def _searxng(query: str, n: int, config: dict) -> list[tuple[str, str, str]]:
    import httpx

    base = (config.get("searxng_url") or "http://localhost:8888").rstrip("/")
    response = httpx.get(f"{base}/search", params={"q": query, "format": "json"}, timeout=TIMEOUT)
    response.raise_for_status()
    return [
        (r.get("title", ""), r.get("url", ""), r.get("content", ""))
        for r in response.json()["results"][:n]
    ]


BACKENDS = {"google": _google, "duckduckgo": _duckduckgo, "searxng": _searxng}


def search(query: str, num_results: int, config: dict) -> str:
    """Numbered results (title, URL, snippet) from the configured backend,
    or an error naming the others."""
    name = config.get("search_backend") or "google"
    try:
        results = BACKENDS[name](query, max(1, min(num_results, 20)), config)
    # blocked, rate-limited, offline, missing package: the model may try another way
    except Exception as e:
        why = _why(e)
        others = " or ".join(f"`search_backend: {other}`" for other in BACKENDS if other != name)
        said = f"{name} search failed: {why}. Try another backend in .amas/config.yaml: {others}"
        raise ValueError(said) from e
    if not results:
        return f"No results for {query!r} ({name})."
    return "\n".join(
        f"{i}. {title}\n   {url}\n   {snippet}"
        for i, (title, url, snippet) in enumerate(results, 1)
    )


def _why(error: Exception) -> str:
    """A search backend's failure in one line: its type, its first line, and a refusal said."""
    why = f"{type(error).__name__}: {(str(error).splitlines() or [''])[0]}"
    status = getattr(getattr(error, "response", None), "status_code", None)
    if status in (403, 429):
        why += " (blocked or rate-limited)"
    return why


def fetch(url: str, reach) -> str:
    """A web page as markdown-ish text (HTML converted; text and JSON as they are), capped; each
    host passes `reach(url)` first (PermissionError if declined); ValueError for a page it cannot
    read."""
    if url.partition("://")[0].lower() not in ("http", "https"):
        raise ValueError(f"fetch_url takes http:// or https:// URLs, not {url!r}")
    body, kind, encoding, final_url = _download(url, reach)
    if b"\0" in body[:1024]:
        raise ValueError(f"{final_url} looks like binary data, not a text page")
    text = bytes(body[:MAX_BYTES]).decode(encoding, errors="replace")
    if "html" in kind or (not kind and text.lstrip()[:5].lower() in ("<!doc", "<html")):
        import html2text

        converter = html2text.HTML2Text(baseurl=final_url, bodywidth=0)
        converter.ignore_images = True
        text = converter.handle(text).strip()
    return _page(text, MAX_CHARS, len(body) > MAX_BYTES)


def _download(url: str, reach) -> tuple[bytearray, str, str, str]:
    """Body (up to just past MAX_BYTES), content type, encoding and final URL;
    ValueError with why not."""
    import httpx

    deadline = time.monotonic() + TIMEOUT
    try:
        with httpx.Client(timeout=httpx.Timeout(TIMEOUT, connect=10)) as client:
            return _follow(client, url, reach, deadline)
    except (PermissionError, ValueError):  # declined, or said already
        raise
    except httpx.TimeoutException as e:
        raise ValueError(f"timed out fetching {url} after {TIMEOUT}s ({e})") from e
    except Exception as e:  # refused, reset, bad URL, TLS: the model reads why
        raise ValueError(f"cannot fetch {url}: {type(e).__name__}: {e}") from e


def _follow(client, url: str, reach, deadline: float) -> tuple[bytearray, str, str, str]:
    """GET url, following redirects here, one hop at a time: each hop is a request of its own that
    `reach` judges before it goes out (a new host is asked about), at most MAX_HOPS of them."""
    came_from = ""
    for _ in range(MAX_HOPS + 1):
        if urlsplit(url).scheme.lower() not in ("http", "https"):
            raise ValueError(f"{came_from} redirected to {url}, which fetch_url does not open")
        _reach(reach, url, came_from)
        with client.stream("GET", url, headers=HEADERS) as r:
            if r.is_redirect and r.headers.get("location"):
                came_from = url
                url = str(r.url.join(r.headers["location"]))
                continue
            kind = r.headers.get("content-type", "").split(";")[0].strip().lower()
            if not r.is_success or (kind and not any(t in kind for t in TEXT_TYPES)):
                raise ValueError(_refused(r, kind))
            return _body(r, deadline), kind, r.encoding or "utf-8", str(r.url)
    raise ValueError(f"stopped after {MAX_HOPS} redirects, at {url}")


def _reach(reach, url: str, came_from: str) -> None:
    """The host gate on one hop; a refusal of a redirect's hop says where it came from."""
    try:
        reach(url)
    except PermissionError as e:
        if not came_from:
            raise
        raise PermissionError(f"{e} (the page {came_from} redirected there)") from None


def _body(r, deadline: float) -> bytearray:
    """The response's body, up to just past MAX_BYTES; by the deadline (a read timeout alone never
    stops a page that trickles)."""
    import httpx

    body = bytearray()
    for chunk in _decoded(r):
        body += chunk
        if len(body) > MAX_BYTES:
            break
        if time.monotonic() > deadline:
            raise httpx.ReadTimeout("the page did not finish loading")
    return body


def _decoded(r) -> Iterator[bytes]:
    """The body decoded a bounded step at a time: one content encoding at most (stacking them is how
    a 2 KB response becomes gigabytes), so the caller's byte cap holds on what is decoded."""
    coding = r.headers.get("content-encoding", "identity").strip().lower()
    if "," in coding:
        raise ValueError(f"stacked content encodings ({coding}) are refused")
    if coding in ("", "identity"):
        yield from r.iter_raw()
        return
    if coding not in WBITS:
        raise ValueError(f"content encoding {coding!r} is not supported")
    unzip = zlib.decompressobj(WBITS[coding])
    for chunk in r.iter_raw():
        data = chunk
        while data and not unzip.eof:
            yield unzip.decompress(data, 1 << 16)
            data = unzip.unconsumed_tail


def _refused(r, kind: str) -> str:
    if not r.is_success:
        return f"HTTP {r.status_code} {r.reason_phrase} for {r.url}"
    return f"{r.url} is {kind}, not a text page; fetch_url reads HTML, text and JSON only"


def find(config: dict) -> str | None:
    """The Chromium to launch: browser_path; when headless a headless shell (~175 MB lighter), then
    Playwright's own Chromium, then the system's. It runs outside the box, so only from outside the
    project: an absolute path, or a name looked up in PATH's absolute folders outside it
    (project.program)."""
    if config.get("browser_path"):
        return _configured(os.path.expanduser(config["browser_path"]))
    shells = [
        "chromium-headless-shell",
        *_installed("chromium_headless_shell-*/chrome-linux/headless_shell"),
    ]
    full = [
        *_installed("chromium-*/chrome-linux/chrome"),
        "chromium",
        "chromium-browser",
        "google-chrome",
    ]
    names = full
    if config.get("browser_headless", True):
        names = shells + full
    for name in names:
        if found := _configured(name):
            return found
    return None


def _installed(pattern: str) -> list[str]:
    """Playwright's own browsers matching pattern,
    where its folder is absolute and outside the project."""
    cache = os.environ.get("PLAYWRIGHT_BROWSERS_PATH") or str(Path.home() / ".cache/ms-playwright")
    if not os.path.isabs(cache) or project.in_project(cache):
        return []
    return glob.glob(f"{cache}/{pattern}")


def _configured(path: str) -> str | None:
    """A program by name (from PATH's folders outside the project)
    or by absolute path outside it."""
    if os.sep not in path:
        return project.program(path)
    if not os.path.isabs(path) or project.in_project(path):
        return None
    if os.path.isfile(path) and os.access(path, os.X_OK):
        return path
    return None


def available(config: dict) -> bool:
    """A browser can be driven: Playwright is installed
    (the `browser` extra) and a Chromium found."""
    import importlib.util

    return importlib.util.find_spec("playwright") is not None and find(config) is not None


def _quiet_driver(start):
    """Playwright's Node driver with a small young generation and no JIT:
    ~16 MB less, and it only relays."""
    old = os.environ.get("NODE_OPTIONS")
    os.environ["NODE_OPTIONS"] = f"{old or ''} --max-semi-space-size=1 --jitless".strip()
    try:
        return start().start()
    finally:
        if old is None:
            os.environ.pop("NODE_OPTIONS")
        else:
            os.environ["NODE_OPTIONS"] = old


def _tool(method):
    """Run a browser action on the page; any failure is a ValueError saying it, and a navigation the
    page tried by itself and was refused is noted under what comes back."""

    @functools.wraps(method)
    def guarded(self, *args):
        try:
            result = method(self, self.open(), *args)
        except Exception as e:  # the model reads the error and tries another selector or URL
            raise ValueError(self.noted(self.failed(e))) from e
        if isinstance(result, bytes):  # a picture: the notes wait for the next text
            return result
        return self.noted(result)

    return guarded


def _page(text: str, limit: int, stopped: bool = False) -> str:
    """A page's text up to limit characters (its head: what a page says first), the cut said, and
    whether its download stopped before its end."""
    said = effects.Capped(limit, 0, "characters of the page").add(text).text()
    if stopped:
        said += f"\n[download stopped at {MAX_BYTES:,} bytes]"
    return said


def chromium_args() -> list[str]:
    """Chromium's flags: its own sandbox stays on unless amas runs as root,
    where it cannot start."""
    if os.geteuid() == 0:
        return ARGS + AS_ROOT
    return list(ARGS)


class Browser:
    """A lazily started Chromium with one page kept across calls; close() leaves no process behind.
    `visit(url)` is asked before every request the page makes itself (a link, a form, a script, an
    image, a fetch) and refuses with PermissionError; with it, Chromium connects only through a
    proxy (webproxy) that reaches only the hosts and ports those requests reached, or that
    `known(host_port)` allows unasked (connections no route sees: a Web Worker's WebSocket, a
    service worker's fetch)."""

    def __init__(self, config: dict, visit=None, known=None):
        self.config = config
        self.visit = visit
        self.known = known
        self.reached = set()  # host:port of each request visit let through: all the proxy lets out
        self.proxy = None
        self.notes = []
        self.playwright = None
        self.browser = None
        self.page = None

    def open(self):
        if self.page is None:
            from playwright.sync_api import sync_playwright

            try:
                path = find(self.config)
                if path is None:
                    raise RuntimeError(INSTALL)
                self.playwright = _quiet_driver(sync_playwright)
                self.browser = self.playwright.chromium.launch(
                    executable_path=path,
                    headless=self.config.get("browser_headless", True),
                    args=chromium_args() + self.proxied(),
                    env=redact.without_secrets(self.config),
                )
                self.page = self.browser.new_page()
                if self.visit:  # popups open in the same context, so they are asked about too
                    self.page.context.route("**/*", self.guard)
                    self.page.context.route_web_socket(re.compile(""), self.socket)
                    self.hops(self.page)
                    self.page.context.on("page", self.popup)
            except Exception:
                self.close()
                raise
        return self.page

    def failed(self, e: Exception) -> str:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        hint = ""
        if "Timeout" in first:
            hint = " (no element matched, or the page did not load in time)"
        if self.browser is not None and not self.browser.is_connected():
            # it crashed or was killed (the OOM killer, on a Pi): start afresh next time
            self.close()
            hint = " (the browser had stopped; the next call starts a new one)"
        return f"{first}{hint}"

    def noted(self, said: str) -> str:
        """What an action says, with the navigations refused meanwhile under it (said once)."""
        if self.page is not None and not self.page.is_closed():
            # Playwright runs a route's handler only while a call waits: let one wait
            self.page.wait_for_timeout(PUMP_MS)
        notes = self.notes
        self.notes = []
        return "\n".join([said, *(f"({note})" for note in notes)])

    def proxied(self) -> list[str]:
        """Chromium's flags for the proxy, started here when requests are gated."""
        if self.visit is None:
            return []
        self.proxy = webproxy.Proxy(self.reachable)
        return self.proxy.args()

    def reachable(self, where: str) -> bool:
        """Whether the proxy may connect to host:port (asked from its threads: never a question)."""
        return where in self.reached or bool(self.known and self.known(where))

    def let(self, url: str) -> None:
        """A request the page makes, past visit (PermissionError if refused); the proxy then lets
        its host and port out."""
        self.visit(url)
        self.reached.add(webproxy.place(url))

    def guard(self, route) -> None:
        """Let a request through unless `visit` refuses it: a navigation, or anything a page loads
        or sends (an image, a script, a fetch can carry data out as well). Redirect hops, which
        Playwright does not route, are judged in `hop`."""
        url = route.request.url
        navigation = route.request.is_navigation_request()
        try:
            self.let(url)
        except PermissionError as e:
            if not navigation:
                self.notes.append(f"a request of the page stopped: {e}")
                return route.abort("blockedbyclient")
            self.notes.append(f"the page's own navigation stopped: {e}")
            # a page that says so: aborting would leave a page that navigated by script never loaded
            return route.fulfill(status=403, content_type="text/plain", body=f"amas: {e}")
        return route.continue_()

    def hops(self, page) -> None:
        """Pause the page's requests in its DevTools session (the Fetch domain), where a redirect
        hop shows as a request of its own: `hop` judges it before it goes out."""
        cdp = page.context.new_cdp_session(page)
        cdp.on("Fetch.requestPaused", functools.partial(self.hop, cdp))
        cdp.send("Fetch.enable", {"patterns": [{"urlPattern": "*", "requestStage": "Request"}]})

    def popup(self, page) -> None:
        """A new tab's redirects judged as the first page's are; a tab whose redirects cannot be (it
        closed meanwhile, or the browser is closing) is closed, never left unguarded, and no error
        of Playwright's event loop reaches the screen."""
        try:
            self.hops(page)
        except Exception:
            with contextlib.suppress(Exception):
                page.close()

    def hop(self, cdp, event: dict) -> None:
        """A paused request: a redirect's next hop (a navigation's or a resource's) passes visit
        first, as any request to a new host does; the rest go on to the routes."""
        answer = {"requestId": event["requestId"]}
        method = "Fetch.continueRequest"
        try:
            if event.get("redirectedRequestId"):
                self.let(event["request"]["url"])
        except Exception as e:  # refused, or the question failed: the hop does not go out
            self.notes.append(f"a redirect of the page stopped: {e}")
            answer["errorReason"] = "BlockedByClient"
            method = "Fetch.failRequest"
        with contextlib.suppress(Exception):  # the page closed meanwhile: nothing left to answer
            cdp.send(method, answer)

    def socket(self, ws) -> None:
        """A WebSocket the page opens: its host judged as an http(s) request to it would be, before
        any connection is made; refused, the page sees the socket close."""
        url = ws.url
        if url.startswith(("ws:", "wss:")):
            url = "http" + url[2:]
        try:
            self.let(url)
        except PermissionError as e:
            self.notes.append(f"a WebSocket of the page stopped: {e}")
            return ws.close(code=4003, reason="refused by amas")
        ws.connect_to_server()  # messages flow both ways unchanged

    @_tool
    def navigate(self, page, url: str) -> str:
        response = page.goto(url, timeout=LOAD)
        unreachable = response and response.headers.get("x-amas-unreachable")
        if unreachable:  # the proxy could not connect: as an error, as without it
            raise ValueError(f"Page.goto: {unreachable} (at {url})")
        status = ""
        if response and not response.ok:
            status = f" (HTTP {response.status})"
        text = _page(page.inner_text("body", timeout=WAIT).strip(), MAX_TEXT)
        return f"{page.title()}\n{page.url}{status}\n\n{text}"

    @_tool
    def click(self, page, selector: str) -> str:
        page.click(selector, timeout=WAIT)
        page.wait_for_load_state(timeout=LOAD)  # a click that navigates: report where it went
        return f"Clicked {selector}; page is now {page.title()!r} at {page.url}"

    @_tool
    def type(self, page, selector: str, text: str) -> str:
        page.fill(selector, text, timeout=WAIT)
        return f"Typed {len(text)} characters into {selector}"

    @_tool
    def png(self, page) -> bytes:
        """The page as PNG bytes (an error string if it fails): the agent writes it as a change."""
        return page.screenshot(timeout=LOAD)

    @_tool
    def get_text(self, page, selector: str = "body") -> str:
        text = page.inner_text(selector, timeout=WAIT).strip()
        if not text:
            return f"(no visible text in {selector})"
        return _page(text, MAX_TEXT)

    def close(self) -> None:
        """Stop Chromium, then Playwright's driver, then the proxy; safe to call twice."""
        browser = self.browser
        playwright = self.playwright
        proxy = self.proxy
        self.browser = None
        self.playwright = None
        self.page = None
        self.proxy = None
        if proxy:
            proxy.close()
        with contextlib.suppress(Exception):  # already gone: nothing left to free
            if browser:
                browser.close()
        with contextlib.suppress(Exception):
            if playwright:
                playwright.stop()
