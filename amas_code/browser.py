"""Browser: one Chromium page the model drives through Playwright, started on first use."""

import contextlib
import functools
import shutil
from pathlib import Path

# Playwright passes the first five too; they are spelled out so no update brings background traffic
# back or the sandbox, which fails as root. The rest save memory on a 1 GB Pi: no GPU process work,
# one renderer for pages however many sites they pull in. Measured: ~490 MB PSS with Node's driver.
ARGS = ["--disable-background-networking", "--disable-component-update", "--no-first-run", "--no-sandbox",
        "--disable-gpu", "--disable-software-rasterizer", "--disable-dev-shm-usage", "--disable-extensions",
        "--renderer-process-limit=1", "--mute-audio"]
SYSTEM_CHROMIUM = ["/usr/bin/chromium", "chromium-browser", "chromium", "google-chrome"]
WAIT = 5_000  # ms for a selector to appear: a wrong one should fail fast
LOAD = 30_000  # ms for a page to load
MAX_TEXT = 4_000  # characters of page text in one answer
INSTALL = ("no Chromium found. Install one with `sudo apt install chromium` (Debian, Raspberry Pi OS) or "
           "`playwright install chromium`, or set `browser_path` in .amas/config.yaml to a Chromium binary")


def _cap(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MAX_TEXT else f"{text[:MAX_TEXT]}\n[capped at {MAX_TEXT} of {len(text)} characters]"


def _chromium(own: str, config: dict) -> str | None:
    """The configured browser_path first, then Playwright's own Chromium (None), then a system one."""
    if config.get("browser_path"):
        if shutil.which(config["browser_path"]):
            return shutil.which(config["browser_path"])
        raise RuntimeError(f"browser_path {config['browser_path']!r} is not an executable; " + INSTALL)
    if Path(own).exists():
        return None
    for name in SYSTEM_CHROMIUM:
        if shutil.which(name):
            return shutil.which(name)
    raise RuntimeError(INSTALL)


def _tool(method):
    """Run a browser action on the page; any failure comes back as an error string."""

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        try:
            return method(self, self._page(), *args, **kwargs)
        except Exception as e:  # the model reads the error and tries another selector or URL
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            hint = " (no element matched, or the page did not load in time)" if "Timeout" in first else ""
            if self.browser is not None and not self.browser.is_connected():
                self.close()  # it crashed or was killed (the OOM killer, on a Pi): start afresh next time
                hint = " (the browser had stopped; the next call starts a new one)"
            return f"Error: {first}{hint}"

    return run


class Browser:
    """A lazily started Chromium with one page kept across calls; close() leaves no process behind."""

    def __init__(self, config: dict):
        self.config, self.playwright, self.browser, self.page = config, None, None, None

    def _page(self):
        if self.page is None:
            from playwright.sync_api import sync_playwright

            try:
                self.playwright = sync_playwright().start()
                chromium = self.playwright.chromium
                self.browser = chromium.launch(executable_path=_chromium(chromium.executable_path, self.config),
                                               headless=self.config.get("browser_headless", True), args=ARGS)
                self.page = self.browser.new_page()
            except Exception:
                self.close()
                raise
        return self.page

    @_tool
    def navigate(self, page, url: str) -> str:
        url = url if "://" in url or url.startswith(("about:", "data:")) else f"https://{url}"  # "example.com"
        response = page.goto(url, timeout=LOAD)
        status = f" (HTTP {response.status})" if response and not response.ok else ""
        return f"{page.title()}\n{page.url}{status}\n\n{_cap(page.inner_text('body', timeout=WAIT))}"

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
    def screenshot(self, page, path: str) -> str:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=path, timeout=LOAD)
        return path

    @_tool
    def get_text(self, page, selector: str = "body") -> str:
        return _cap(page.inner_text(selector, timeout=WAIT)) or f"(no visible text in {selector})"

    def close(self) -> None:
        """Stop Chromium, then Playwright's driver; safe to call twice."""
        browser, playwright, self.browser, self.playwright, self.page = self.browser, self.playwright, None, None, None
        with contextlib.suppress(Exception):  # already gone: nothing left to free
            if browser:
                browser.close()
        with contextlib.suppress(Exception):
            if playwright:
                playwright.stop()
