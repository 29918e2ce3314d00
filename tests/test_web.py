"""fetch_url and search_google against pages served on 127.0.0.1,
and search backends at their boundary."""

import json
import socket
import subprocess
import sys

import pytest
from conftest import answered, toolbox
from pages import TEXT, Pages

from amas_code import browser, config
from amas_code import home as amas_home


def ASK_NOTHING(url: str) -> None:  # noqa: N802 - --yes: every host accepted without a question
    return None


@pytest.fixture(scope="module")
def pages():
    server = Pages()
    yield server
    server.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_importing_web_loads_no_heavy_library():
    heavy = "{'httpx', 'html2text', 'googlesearch', 'ddgs', 'playwright'}"
    code = f"import sys, amas_code.browser; print(sorted({heavy} & set(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


# fetch


def test_html_becomes_markdown_with_absolute_links(pages):
    out = answered(browser.fetch, pages.url + "/", ASK_NOTHING)
    assert out.startswith("# Sign up")
    assert f"[plain text]({pages.url}/text)" in out
    assert "Go" in out and "waiting" in out
    assert "<input" not in out and "addEventListener" not in out


def test_scripts_styles_and_images_are_left_out(pages):
    out = answered(browser.fetch, pages.url + "/scripted", ASK_NOTHING)
    assert "Visible words with **bold**" in out
    for hidden in ("SCRIPT_SECRET", "STYLE_SECRET", "WRITTEN_BY_SCRIPT", "LOGO_ALT", "logo.png"):
        assert hidden not in out


@pytest.mark.parametrize(
    "path, body", [("/text", TEXT), ("/data.json", '{"name": "amas", "tools": [1, 2]}')]
)
def test_text_and_json_pass_through_unchanged(pages, path, body):
    assert answered(browser.fetch, pages.url + path, ASK_NOTHING) == body


def test_redirect_is_followed(pages):
    pages.requests.clear()
    assert answered(browser.fetch, pages.url + "/redirect", ASK_NOTHING) == TEXT
    assert pages.requests == ["/redirect", "/text"]


@pytest.mark.parametrize(
    "path, kind", [("/logo.png", "image/png"), ("/file.bin", "application/octet-stream")]
)
def test_binary_content_types_are_refused(pages, path, kind):
    assert (
        answered(browser.fetch, pages.url + path, ASK_NOTHING)
        == f"Error: {pages.url}{path} is {kind}, not a text page; "
        "fetch_url reads HTML, text and JSON only"
    )


def test_binary_without_a_content_type_is_refused(pages):
    assert (
        answered(browser.fetch, pages.url + "/untyped", ASK_NOTHING)
        == f"Error: {pages.url}/untyped looks like binary data, not a text page"
    )


def test_http_error_status(pages):
    assert (
        answered(browser.fetch, pages.url + "/nowhere", ASK_NOTHING)
        == f"Error: HTTP 404 Not Found for {pages.url}/nowhere"
    )


def test_long_page_is_capped_with_its_size(pages):
    out = answered(browser.fetch, pages.url + "/long", ASK_NOTHING)
    assert out.startswith("0123456789" * 100)
    assert out.endswith("\n[… 80,000 characters of the page cut …]\n")
    assert len(out) < browser.MAX_CHARS + 100


def test_download_stops_at_the_size_cap(pages):
    pages.requests.clear()
    out = answered(browser.fetch, pages.url + "/huge", ASK_NOTHING)  # 3 MB
    assert out == "x" * 20_000 + (
        "\n[… 1,980,000 characters of the page cut …]\n\n[download stopped at 2,000,000 bytes]"
    )
    assert pages.requests == ["/huge"]


def test_declared_charset_is_used(pages):
    assert answered(browser.fetch, pages.url + "/latin1", ASK_NOTHING) == "Café crème, señor"


def test_slow_page_times_out(pages, monkeypatch):
    monkeypatch.setattr(browser, "TIMEOUT", 0.5)
    assert answered(browser.fetch, pages.url + "/slow", ASK_NOTHING).startswith(
        f"Error: timed out fetching {pages.url}/slow after 0.5s"
    )


def test_page_that_never_ends_hits_the_total_deadline(pages, monkeypatch):
    monkeypatch.setattr(browser, "TIMEOUT", 0.5)  # each byte comes well within the read timeout
    out = answered(browser.fetch, pages.url + "/trickle", ASK_NOTHING)
    assert out == (
        f"Error: timed out fetching {pages.url}/trickle after 0.5s "
        "(the page did not finish loading)"
    )


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.org/x", "example.org"])
def test_only_http_urls(url):
    assert (
        answered(browser.fetch, url, ASK_NOTHING)
        == f"Error: fetch_url takes http:// or https:// URLs, not {url!r}"
    )


def test_unreachable_server_and_bad_urls():
    url = f"http://127.0.0.1:{free_port()}/"
    assert answered(browser.fetch, url, ASK_NOTHING).startswith(
        f"Error: cannot fetch {url}: ConnectError:"
    )
    assert answered(browser.fetch, "http://", ASK_NOTHING).startswith(
        "Error: cannot fetch http://: "
    )
    assert answered(browser.fetch, "http://bad host/", ASK_NOTHING).startswith(
        "Error: cannot fetch http://bad host/: "
    )


# search: searxng against the local server


def test_searxng_results_and_the_query_it_received(pages):
    pages.requests.clear()
    config = {"search_backend": "searxng", "searxng_url": pages.url + "/"}
    assert answered(browser.search, "pi zero", 5, config) == (
        "1. Result one\n   https://example.org/1\n   first snippet\n"
        "2. Result two\n   https://example.org/2\n   second snippet"
    )
    assert pages.queries() == [{"q": ["pi zero"], "format": ["json"]}]
    assert answered(browser.search, "pi zero", 1, config).count("\n") == 2


@pytest.mark.parametrize(
    "path, why", [("/broken", "500 Internal Server Error"), ("/limited", "429 Too Many Requests")]
)
def test_searxng_errors_suggest_another_backend(pages, path, why):
    out = answered(
        browser.search, "q", 5, {"search_backend": "searxng", "searxng_url": pages.url + path}
    )
    assert out.startswith("Error: searxng search failed: HTTPStatusError:") and why in out
    assert out.endswith(
        "Try another backend in .amas/config.yaml: "
        "`search_backend: google` or `search_backend: duckduckgo`"
    )
    assert ("(blocked or rate-limited)" in out) == (path == "/limited")


def test_searxng_unreachable():
    out = answered(
        browser.search,
        "q",
        5,
        {"search_backend": "searxng", "searxng_url": f"http://127.0.0.1:{free_port()}"},
    )
    assert (
        out.startswith("Error: searxng search failed: ConnectError")
        and "`search_backend: duckduckgo`" in out
    )


# search: google and duckduckgo at their function boundary


def test_google_results(monkeypatch):
    import googlesearch

    calls = []

    def fake(term, num_results=10, advanced=False, **kwargs):
        calls.append((term, num_results, advanced))
        yield googlesearch.SearchResult(
            "https://python.org", "Welcome to Python", "The official home"
        )

    monkeypatch.setattr(googlesearch, "search", fake)
    assert (
        answered(browser.search, "python", 3, {})
        == "1. Welcome to Python\n   https://python.org\n   The official home"
    )
    assert calls == [("python", 3, True)]


def test_google_empty_results_mean_blocked(monkeypatch):
    import googlesearch

    monkeypatch.setattr(googlesearch, "search", lambda *a, **k: iter([]))
    out = answered(browser.search, "python", 3, {"search_backend": "google"})
    assert out == (
        "Error: google search failed: LookupError: no results, "
        "which usually means Google blocked the request. "
        "Try another backend in .amas/config.yaml: `search_backend: duckduckgo` or "
        "`search_backend: searxng`"
    )


def test_google_rate_limit(monkeypatch):
    import googlesearch
    import requests

    def blocked(*args, **kwargs):
        response = requests.Response()
        response.status_code = 429
        raise requests.HTTPError(
            "429 Client Error: Too Many Requests for url: https://www.google.com/search",
            response=response,
        )

    monkeypatch.setattr(googlesearch, "search", blocked)
    out = answered(browser.search, "python", 3, {})
    assert out.startswith("Error: google search failed: HTTPError: 429 Client Error")
    assert "(blocked or rate-limited)" in out and "`search_backend: duckduckgo`" in out


def test_duckduckgo_results(monkeypatch):
    import ddgs

    class FakeDDGS:
        def text(self, query, max_results=10):
            assert (query, max_results) == ("raspberry pi", 2)
            return [
                {
                    "title": "Raspberry Pi",
                    "href": "https://raspberrypi.com",
                    "body": "Small computers",
                },
                {
                    "title": "Pi OS",
                    "href": "https://raspberrypi.com/os",
                    "body": "The operating system",
                },
            ]

    monkeypatch.setattr(ddgs, "DDGS", FakeDDGS)
    assert answered(browser.search, "raspberry pi", 2, {"search_backend": "duckduckgo"}) == (
        "1. Raspberry Pi\n   https://raspberrypi.com\n   Small computers\n"
        "2. Pi OS\n   https://raspberrypi.com/os\n   The operating system"
    )


def test_duckduckgo_failure_and_no_results(monkeypatch):
    import ddgs
    from ddgs.exceptions import RatelimitException

    class Limited:
        def text(self, query, max_results=10):
            raise RatelimitException("https://duckduckgo.com 202 Ratelimit")

    monkeypatch.setattr(ddgs, "DDGS", Limited)
    out = answered(browser.search, "q", 5, {"search_backend": "duckduckgo"})
    assert out.startswith(
        "Error: duckduckgo search failed: RatelimitException: https://duckduckgo.com 202 Ratelimit"
    )
    assert out.endswith("`search_backend: google` or `search_backend: searxng`")
    monkeypatch.setattr(ddgs, "DDGS", type("Empty", (), {"text": lambda self, q, max_results: []}))
    assert (
        answered(browser.search, "q", 5, {"search_backend": "duckduckgo"})
        == "No results for 'q' (duckduckgo)."
    )


def test_duckduckgo_not_installed(monkeypatch):
    # what `import ddgs` meets when it is not installed
    monkeypatch.setitem(sys.modules, "ddgs", None)
    out = answered(browser.search, "q", 5, {"search_backend": "duckduckgo"})
    assert "pip install 'amas-code[duckduckgo]'" in out and out.startswith(
        "Error: duckduckgo search failed"
    )


def test_unknown_backend_is_refused_when_the_config_is_read(bare):
    (bare / ".amas").mkdir()
    (bare / ".amas/config.yaml").write_text("search_backend: bing\n")
    with pytest.raises(
        amas_home.ConfigError,
        match="search_backend should be google, duckduckgo or searxng, not 'bing'",
    ):
        config.load(bare)


# through the tool dispatcher


def test_tools_dispatch_to_web(pages, tmp_path):
    box = toolbox(tmp_path, search_backend="searxng", searxng_url=pages.url, auto_accept=True)
    assert box.execute("fetch_url", json.dumps({"url": pages.url + "/text"})) == TEXT
    assert box.execute("search_google", json.dumps({"query": "pi", "num_results": 1})).startswith(
        "1. Result one"
    )
    assert box.execute("fetch_url", "{}") == "Error: fetch_url is missing required argument(s): url"


# every hop is a request (issue 41, item 5)


def test_a_redirect_to_a_new_host_is_asked_about_and_refused_without_a_terminal(tmp_path):
    first, second = Pages(), Pages()
    try:
        box = toolbox(tmp_path)  # no --yes, no terminal: a question is answered no
        box.gate.hosts.add(f"{first.url}")  # the user approved the first host
        hop = f"{first.url}/goto?to={second.url}/text"
        said = box.execute("fetch_url", json.dumps({"url": hop}))
    finally:
        first.close()
        second.close()
    assert first.requests == [f"/goto?to={second.url}/text"]
    assert second.requests == []  # the local service never saw the request
    assert said.startswith(f"Error: connecting to {second.url} was declined")
    assert "redirected" in said


def test_redirects_are_bounded_and_each_hop_is_judged():
    server, asked = Pages(), []
    try:
        said = answered(browser.fetch, server.url + "/loop", asked.append)
    finally:
        server.close()
    assert said == f"Error: stopped after {browser.MAX_HOPS} redirects, at {server.url}/loop"
    assert asked == [f"{server.url}/loop"] * (browser.MAX_HOPS + 1)
    assert len(server.requests) == browser.MAX_HOPS + 1


def test_the_browsers_proxy_reaches_only_the_places_it_knows(pages):
    """What Chromium connects to goes through amas's proxy (webproxy): a plain request and a CONNECT
    tunnel (https, wss) reach a host and port only once the gate's requests reached it."""
    import http.client

    from amas_code import webproxy

    known = set()
    proxy = webproxy.Proxy(known.__contains__)
    port = int(proxy.args()[0].rsplit(":", 1)[1])
    place = pages.url.split("//", 1)[1]

    def status(tunnel: bool) -> int:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            if tunnel:
                conn.set_tunnel(place.split(":")[0], int(place.split(":")[1]))
            conn.request("GET", "/text" if tunnel else f"{pages.url}/text")
            return conn.getresponse().status
        except OSError as e:  # a tunnel refused: "Tunnel connection failed: 403 Forbidden"
            return int(str(e).split(": ", 1)[1][:3])
        finally:
            conn.close()

    try:
        assert [status(False), status(True)] == [403, 403]
        known.add(place)
        assert [status(False), status(True)] == [200, 200]
    finally:
        proxy.close()
