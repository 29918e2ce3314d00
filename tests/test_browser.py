"""The browser tools end to end in an installed Chromium, against pages served on 127.0.0.1."""

import json
import socket
import subprocess
import sys
from urllib.parse import quote

import psutil
import pytest
from conftest import answered, make_config, toolbox
from pages import TEXT, Pages, Sockets

from amas_code import browser
from amas_code.browser import Browser

CHROMIUM = browser.find({})
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium (sudo apt install chromium-headless-shell)"
)


@pytest.fixture(scope="module")
def pages():
    server = Pages()
    yield server
    server.close()


@pytest.fixture(scope="module")
def shared():
    """One browser for the module; it starts on first use,
    so a test may close it to start from nothing."""
    b = Browser(make_config())
    yield b
    b.close()


def processes() -> dict[int, psutil.Process]:
    return {p.pid: p for p in psutil.Process().children(recursive=True)}


def is_main_chromium(p: psutil.Process) -> bool:
    """Chromium's browser process, not a renderer or helper;
    a zombie left by an earlier test is not."""
    try:
        if p.status() == psutil.STATUS_ZOMBIE:
            return False
        line = p.cmdline()
        names = ("chrom", "headless")
        wrapper = bool(line) and line[0].endswith("/sh")  # Debian's chromium is a shell script
        return any(n in p.name() for n in names) and "--type=" not in " ".join(line) and not wrapper
    except psutil.Error:  # gone, or a zombie, between the listing and the look
        return False


def test_importing_browser_loads_no_playwright():
    code = "import sys, amas_code.browser; print('playwright' in sys.modules)"
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip()
        == "False"
    )


def test_chromium_lookup_order(monkeypatch, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("chromium", "chromium-headless-shell"):
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    # no Playwright-installed browser
    monkeypatch.setenv("PLAYWRIGHT_BROWSERS_PATH", str(tmp_path / "none"))
    assert browser.find({"browser_path": "/bin/sh"}) == "/bin/sh"  # the user's choice wins
    # headless: the lighter shell
    assert browser.find({}) == str(bin_dir / "chromium-headless-shell")
    # a window needs the full one
    assert browser.find({"browser_headless": False}) == str(bin_dir / "chromium")
    (bin_dir / "chromium-headless-shell").unlink()
    assert browser.find({}) == str(bin_dir / "chromium")
    (bin_dir / "chromium").unlink()
    assert browser.find({}) is None and not browser.available({})


def test_no_browser_says_what_to_install(shared, monkeypatch, tmp_path):
    shared.close()  # one Playwright per thread at a time
    before = processes()
    b = Browser(make_config(browser_path=str(tmp_path / "no-such-chrome")))
    assert answered(b.navigate, "about:blank") == f"Error: {browser.INSTALL}"
    # the lighter package first
    assert "sudo apt install chromium-headless-shell" in browser.INSTALL
    psutil.wait_procs([p for pid, p in processes().items() if pid not in before], timeout=10)
    assert set(processes()) <= set(before)  # Playwright's driver was stopped too


@needs_chromium
def test_navigate_and_get_text(shared, pages):
    out = answered(shared.navigate, pages.url + "/")
    assert out.startswith(f"Form page\n{pages.url}/\n\nSign up\n")
    assert "waiting" in out and "addEventListener" not in out
    assert answered(shared.get_text, "#result") == "waiting"
    assert answered(
        shared.get_text,
    ).startswith("Sign up\n")


@needs_chromium
def test_type_then_click_changes_the_page(shared, pages):
    answered(shared.navigate, pages.url + "/")
    assert shared.type("#name", "Ada") == "Typed 3 characters into #name"
    assert answered(shared.get_text, "#echo") == "typed: Ada"  # the page's own input handler saw it
    assert answered(shared.click, "#go") == f"Clicked #go; page is now 'Greeted' at {pages.url}/"
    assert answered(shared.get_text, "#result") == "Hello, Ada"


@needs_chromium
def test_click_a_link_reports_where_it_went(shared, pages):
    answered(shared.navigate, pages.url + "/")
    out = answered(shared.click, "a[href='/other']")
    assert out == f"Clicked a[href='/other']; page is now 'Other page' at {pages.url}/other"
    assert (
        answered(
            shared.get_text,
        )
        == "You arrived."
    )


@needs_chromium
def test_screenshot_is_a_png(shared, pages):
    answered(shared.navigate, pages.url + "/")
    data = shared.png()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000


@needs_chromium
def test_missing_selector_fails_fast(shared, pages, monkeypatch):
    """amas's own wait (browser.WAIT, 5 s), not Playwright's 30 s default, and the reason said."""
    answered(shared.navigate, pages.url + "/")
    monkeypatch.setattr(browser, "WAIT", 200)
    for out in (
        answered(shared.click, "#nope"),
        answered(shared.type, "#nope", "x"),
        answered(shared.get_text, "#nope"),
    ):
        assert out.startswith("Error: Page.") and out.endswith(
            "Timeout 200ms exceeded. (no element matched, or the page did not load in time)"
        ), out
    assert answered(shared.get_text, "#result") == "waiting"  # the page is still usable


@needs_chromium
def test_http_error_and_failed_navigation(shared, pages, monkeypatch):
    assert answered(shared.navigate, pages.url + "/nowhere").startswith(
        f"Not found\n{pages.url}/nowhere (HTTP 404)"
    )
    assert answered(shared.navigate, "http://127.0.0.1:1/").startswith(
        "Error: Page.goto: net::ERR_"
    )
    monkeypatch.setattr(browser, "LOAD", 500)
    assert answered(shared.navigate, pages.url + "/slow").startswith(
        "Error: Page.goto: Timeout 500ms exceeded"
    )
    assert answered(shared.navigate, pages.url + "/other").startswith("Other page\n")


@needs_chromium
def test_with_the_host_gate_on_failures_are_still_one_error_line(shared, pages, monkeypatch, capfd):
    # one Playwright per thread: the module's browser makes way and starts again later
    shared.close()
    guarded, asked = Browser(make_config(), lambda url: asked.append(url)), []
    try:
        assert answered(guarded.navigate, pages.url + "/nowhere").startswith(
            f"Not found\n{pages.url}/nowhere (HTTP 404)"
        )
        with socket.socket() as s:  # a port nothing listens on (port 1 Chromium refuses as unsafe)
            s.bind(("127.0.0.1", 0))
            dead_url = f"http://127.0.0.1:{s.getsockname()[1]}/"
        # through the proxy in front of Chromium, which says why it could not connect
        assert answered(guarded.navigate, dead_url) == (
            f"Error: Page.goto: cannot connect to {dead_url[7:-1]}: "
            f"Connection refused (at {dead_url})"
        )
        monkeypatch.setattr(browser, "LOAD", 500)
        assert answered(guarded.navigate, pages.url + "/slow").startswith(
            "Error: Page.goto: Timeout 500ms exceeded"
        )
        assert answered(guarded.navigate, pages.url + "/other").startswith("Other page\n")
    finally:
        guarded.close()
    assert asked == [pages.url + "/nowhere", dead_url, pages.url + "/slow", pages.url + "/other"]
    assert "Traceback" not in "".join(capfd.readouterr())


@needs_chromium
def test_a_tab_that_closed_before_its_redirects_could_be_guarded_raises_nothing(shared, pages):
    """A popup the page opened as the run ended: its DevTools session could not be made (the page
    was gone), and Playwright's event loop printed the error and its traceback."""
    shared.close()
    guarded = Browser(make_config(), lambda url: None)
    try:
        assert answered(guarded.navigate, pages.url + "/other").startswith("Other page")
        with guarded.page.expect_popup() as opened:  # guarded, through the context's page event
            guarded.page.evaluate("window.open('about:blank')")
        tab = opened.value
        tab.close()
        guarded.popup(tab)  # as when the event comes after the tab closed
        assert tab.is_closed() and not guarded.page.is_closed()
    finally:
        guarded.close()


@needs_chromium
def test_close_leaves_no_process(shared, pages):
    shared.close()
    before = processes()
    assert answered(shared.navigate, pages.url + "/other").startswith("Other page")
    started = [p for pid, p in processes().items() if pid not in before]
    assert any("chrom" in p.name() for p in started) and any("node" in p.name() for p in started)
    shared.close()
    shared.close()  # idempotent
    _, alive = psutil.wait_procs(started, timeout=10)
    assert alive == []
    # used again: starts again, on a blank page
    assert (
        answered(
            shared.get_text,
        )
        == "(no visible text in body)"
    )


@needs_chromium
def test_a_killed_chromium_is_started_again(shared, pages):
    answered(shared.navigate, pages.url + "/")
    main = next(p for p in processes().values() if is_main_chromium(p))
    main.kill()
    psutil.wait_procs([main], timeout=10)
    out = answered(shared.navigate, pages.url + "/other")
    assert out.startswith("Error: ") and out.endswith(
        "(the browser had stopped; the next call starts a new one)"
    )
    assert answered(shared.navigate, pages.url + "/other").startswith("Other page\n")


@needs_chromium
def test_a_screenshot_over_a_file_asks_and_is_checkpointed(bare, shared, pages):
    shared.close()  # the tools open their own browser
    (bare / "logo.png").write_bytes(b"the user's logo")
    asking = toolbox(bare, checkpoint=True)  # no terminal to ask on: declined
    try:
        asking.execute("navigate", json.dumps({"url": pages.url + "/"}))
        assert (
            asking.execute("screenshot", json.dumps({"path": "logo.png"}))
            == "Screenshot declined (no terminal to ask the user on)."
        )
    finally:
        asking.close()
    assert (bare / "logo.png").read_bytes() == b"the user's logo"
    box = toolbox(bare, checkpoint=True, auto_accept=True)
    try:
        box.execute("navigate", json.dumps({"url": pages.url + "/"}))
        said = box.execute("screenshot", json.dumps({"path": "logo.png"}))
    finally:
        box.close()
    assert said.endswith("[checkpoint: 1 file; /undo takes it back]")
    assert (bare / "logo.png").read_bytes()[:4] == b"\x89PNG"
    box.checkpoint.undo(1, lambda q: True)
    assert (bare / "logo.png").read_bytes() == b"the user's logo"


@needs_chromium
def test_tools_dispatch_to_the_browser(shared, pages, tmp_path):
    shared.close()  # the tools open their own browser
    box = toolbox(tmp_path, auto_accept=True)
    try:
        assert box.execute("fetch_url", json.dumps({"url": pages.url + "/text"})) == TEXT
        assert box.execute("navigate", json.dumps({"url": pages.url + "/"})).startswith(
            "Form page\n"
        )
        assert (
            box.execute("type", json.dumps({"selector": "#name", "text": "Bo"}))
            == "Typed 2 characters into #name"
        )
        assert box.execute("click", json.dumps({"selector": "#go"})).startswith(
            "Clicked #go; page is now 'Greeted'"
        )
        assert box.execute("get_text", json.dumps({"selector": "#result"})) == "Hello, Bo"
        assert box.execute("screenshot", "{}") == str(tmp_path / "screenshot.png")
        assert (tmp_path / "screenshot.png").read_bytes()[:4] == b"\x89PNG"
    finally:
        box.close()
    assert box.tools.browser is None


@needs_chromium
def test_every_request_a_page_makes_goes_through_the_gate(shared, pages):
    """Not only navigations: an image from a host the user refused is never fetched."""
    # one Playwright per thread: the module's browser makes way and starts again later
    shared.close()
    other = pages.url.replace("127.0.0.1", "localhost") + "/logo.png"
    asked = []

    def visit(url):
        asked.append(url)
        if url.startswith("http://localhost"):
            raise PermissionError("connecting to localhost was declined by the user")
        return url

    guarded = Browser(make_config(), visit)
    try:
        said = answered(guarded.navigate, f"data:text/html,<title>Pic</title><img src='{other}'>")
    finally:
        guarded.close()
    assert other in asked
    assert (
        "(a request of the page stopped: connecting to localhost was declined by the user)" in said
    )


def test_chromium_keeps_its_own_sandbox_unless_amas_is_root(monkeypatch):
    monkeypatch.setattr(browser.os, "geteuid", lambda: 1000)
    assert "--no-sandbox" not in browser.chromium_args()
    assert "--no-zygote" not in browser.chromium_args()  # Chromium refuses it with its sandbox on
    monkeypatch.setattr(browser.os, "geteuid", lambda: 0)
    assert "--no-sandbox" in browser.chromium_args()


def only(origin: str, asked: list):
    """A host gate that lets the page's own origin through and declines the rest, as a session
    without a terminal does once the user approved one host."""

    def visit(url):
        asked.append(url)
        if not url.startswith(origin + "/") and not url.startswith(("about:", "data:")):
            raise PermissionError(f"connecting to {url.split('/')[2]} was declined by the user")
        return url

    return visit


def visited(page: Browser, url: str, service: Sockets) -> str:
    """What the page said once it opened url (its log, when done);
    the browser and service closed."""
    try:
        opened = answered(page.navigate, url)
        return opened + answered(page.get_text, "#done") + answered(page.get_text, "#log")
    finally:
        page.close()
        service.close()


@needs_chromium
def test_a_pages_websocket_to_an_unapproved_port_never_connects(shared, pages):
    """A page on an allowed origin opens a WebSocket to a local service on another port: the
    service gets no connection, and the page sees the socket close."""
    shared.close()  # one Playwright per thread
    service, asked = Sockets(), []
    guarded = Browser(make_config(), only(pages.url, asked))
    said = visited(guarded, f"{pages.url}/socket?port={service.port}", service)
    assert service.accepted == 0
    assert "hello" not in said and "closed" in said
    assert f"http://127.0.0.1:{service.port}/live" in asked
    assert f"a WebSocket of the page stopped: connecting to 127.0.0.1:{service.port}" in said


@needs_chromium
def test_an_approved_websocket_connects(shared, pages):
    shared.close()
    service = Sockets()
    allowed = Browser(make_config(), lambda url: url)
    said = visited(allowed, f"{pages.url}/socket?port={service.port}", service)
    assert service.accepted == 1
    assert "got hello" in said


@needs_chromium
@pytest.mark.parametrize("approved", [False, True])
def test_a_web_workers_websocket_reaches_only_an_approved_port(shared, pages, approved):
    """Playwright routes only the page's own WebSockets: a Web Worker's goes to the proxy in front
    of Chromium, which connects only where the page's gated requests went, or where the gate
    allows without asking (here: `known`)."""
    shared.close()
    service, asked = Sockets(), []
    known = (lambda where: where == f"127.0.0.1:{service.port}") if approved else None
    guarded = Browser(make_config(), only(pages.url, asked), known)
    said = visited(guarded, f"{pages.url}/worker?port={service.port}", service)
    assert service.accepted == (1 if approved else 0)
    assert ("got hello" in said) == approved and "closed" in said


@needs_chromium
def test_a_navigations_redirect_to_a_new_host_is_gated(shared, pages):
    """An allowed page redirects the browser to another local port: that hop is asked about like a
    navigation, and without approval the other server never sees a request."""
    shared.close()
    other, asked = Pages(), []
    guarded = Browser(make_config(), only(pages.url, asked))
    try:
        said = answered(guarded.navigate, f"{pages.url}/goto?to={other.url}/text")
    finally:
        guarded.close()
        other.close()
    assert other.requests == []
    assert f"{other.url}/text" in asked
    assert said.startswith("Error: Page.goto: net::ERR_BLOCKED_BY_CLIENT")
    assert (
        f"(a redirect of the page stopped: connecting to 127.0.0.1:{other.port} was declined"
        in said
    )


@needs_chromium
def test_an_approved_redirect_chain_ends_on_the_last_page(shared, pages):
    shared.close()
    other, asked = Pages(), []
    allowed = Browser(make_config(), asked.append)  # every host approved, each one seen
    try:
        said = answered(allowed.navigate, f"{pages.url}/goto?to={other.url}/other")
    finally:
        allowed.close()
        other.close()
    assert said.startswith(f"Other page\n{other.url}/other\n\nYou arrived.")
    assert asked[:2] == [f"{pages.url}/goto?to={other.url}/other", f"{other.url}/other"]


@needs_chromium
def test_a_resources_redirect_to_a_new_host_is_gated(shared, pages):
    """An image on an allowed host that redirects to another local port is not fetched from it."""
    shared.close()
    other, asked = Pages(), []
    hop = quote(f"{pages.url}/goto?to={other.url}/logo.png")
    guarded = Browser(make_config(), only(pages.url, asked))
    try:
        said = answered(guarded.navigate, f"{pages.url}/picture?src={hop}")
    finally:
        guarded.close()
    assert other.requests == []
    assert f"{other.url}/logo.png" in asked
    assert "(a redirect of the page stopped: connecting to" in said
