"""The web for the model: search through a configurable backend, fetch a page as readable text."""

import time

MAX_BYTES = 2_000_000  # stop downloading a page past this
MAX_CHARS = 20_000  # characters of a page the model gets
TIMEOUT = 20  # seconds for a whole fetch; connecting gets at most 10
USER_AGENT = "Mozilla/5.0 (X11; Linux x86_64) amas-code"
TEXT_SUFFIXES = ("json", "xml", "javascript", "yaml")  # application/... types that are text too


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
        raise LookupError("the ddgs package is not installed: pip install 'amas-code[duckduckgo]'") from None
    return [(r.get("title", ""), r.get("href", ""), r.get("body", "")) for r in DDGS().text(query, max_results=n)]


def _searxng(query: str, n: int, config: dict) -> list[tuple[str, str, str]]:
    import httpx

    base = (config.get("searxng_url") or "http://localhost:8888").rstrip("/")
    response = httpx.get(f"{base}/search", params={"q": query, "format": "json"}, timeout=TIMEOUT)
    response.raise_for_status()
    return [(r.get("title", ""), r.get("url", ""), r.get("content", "")) for r in response.json()["results"][:n]]


BACKENDS = {"google": _google, "duckduckgo": _duckduckgo, "searxng": _searxng}


def search(query: str, num_results: int = 5, config: dict | None = None) -> str:
    """Numbered results (title, URL, snippet) from the configured backend, or an error naming another."""
    name = (config or {}).get("search_backend") or "google"
    if name not in BACKENDS:
        return f"Error: unknown search_backend {name!r}; set it to one of: {', '.join(BACKENDS)}"
    try:
        results = BACKENDS[name](query, max(1, min(int(num_results), 20)), config or {})
    except Exception as e:  # blocked, rate-limited, offline, missing package: the model may try another way
        status = getattr(getattr(e, "response", None), "status_code", None)
        why = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        why += " (blocked or rate-limited)" if status in (403, 429) else ""
        others = " or ".join(f"`search_backend: {other}`" for other in BACKENDS if other != name)
        return f"Error: {name} search failed: {why}. Try another backend in .amas/config.yaml: {others}"
    if not results:
        return f"No results for {query!r} ({name})."
    return "\n".join(f"{i}. {title}\n   {url}\n   {snippet}" for i, (title, url, snippet) in enumerate(results, 1))


def fetch(url: str) -> str:
    """A web page as markdown-ish text (HTML converted; text and JSON as they are), capped."""
    if url.partition("://")[0].lower() not in ("http", "https"):
        return f"Error: fetch_url takes http:// or https:// URLs, not {url!r}"
    got = _download(url)
    if isinstance(got, str):
        return got
    body, kind, encoding, final_url = got
    if b"\0" in body[:1024]:
        return f"Error: {final_url} looks like binary data, not a text page"
    cut = len(body) > MAX_BYTES
    text = bytes(body[:MAX_BYTES]).decode(encoding, errors="replace")
    if kind in ("text/html", "application/xhtml+xml") or (not kind and text.lstrip()[:5].lower() in ("<!doc", "<html")):
        import html2text

        converter = html2text.HTML2Text(baseurl=final_url, bodywidth=0)
        converter.ignore_images = True
        text = converter.handle(text).strip()
    size = f"{len(text):,} characters" + (f" from the first {MAX_BYTES:,} bytes" if cut else "")
    if len(text) > MAX_CHARS:
        return f"{text[:MAX_CHARS]}\n\n[page capped at {MAX_CHARS:,} of {size}]"
    return text + (f"\n\n[download stopped at {MAX_BYTES:,} bytes]" if cut else "")


def _download(url: str) -> tuple[bytearray, str, str, str] | str:
    """Body (up to just past MAX_BYTES), content type, encoding and final URL; or an error string."""
    import httpx

    deadline, body = time.monotonic() + TIMEOUT, bytearray()
    try:
        with httpx.stream("GET", url, follow_redirects=True, headers={"User-Agent": USER_AGENT},
                          timeout=httpx.Timeout(TIMEOUT, connect=min(10, TIMEOUT))) as r:
            if not r.is_success:
                return f"Error: HTTP {r.status_code} {r.reason_phrase} for {r.url}"
            kind = r.headers.get("content-type", "").split(";")[0].strip().lower()
            if kind and not (kind.startswith("text/") or kind.endswith(TEXT_SUFFIXES)):
                return f"Error: {r.url} is {kind}, not a text page; fetch_url reads HTML, text and JSON only"
            for chunk in r.iter_bytes():
                body += chunk
                if len(body) > MAX_BYTES:
                    break
                if time.monotonic() > deadline:  # a read timeout alone never stops a page that trickles
                    raise httpx.ReadTimeout("the page did not finish loading")
            return body, kind, r.encoding or "utf-8", str(r.url)
    except httpx.TimeoutException as e:
        return f"Error: timed out fetching {url} after {TIMEOUT}s ({e})"
    except Exception as e:  # refused, reset, bad URL, TLS: the model reads why
        return f"Error: cannot fetch {url}: {type(e).__name__}: {e}"
