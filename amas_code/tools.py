"""The model's tools, bound to one project: each handler's signature and docstring are its schema."""

import contextlib
import difflib
import fnmatch
import inspect
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

from amas_code import browser, providers, safety, ui
from amas_code.checkpoint import GIT, git_env

MAX_READ = 50_000  # bytes of a file shown at once
MAX_RESULT = 60_000  # characters of any tool result the model gets (head and tail kept)
MAX_LINES = 300  # lines of search and list output
PARAMS = dict(  # what a parameter means, where its name is not enough
    path="File path, relative to the project root",
    offset="First line to show, 0-based",
    pattern="Python regex",
    old_str="Exact text to replace, with enough context to be unique",
    timeout="Seconds before it is killed",
)
CONCEALED = (  # why a write is refused whose diff would hide more than a secret
    "would show as [REDACTED] in the diff the user approves, and the hidden part holds spaces or shell characters, "
    "which no secret needs; write it so that only the secret itself is hidden"
)
KEEP = (  # how to edit around a hidden value (the model cannot copy what it never saw)
    "[REDACTED] stands for a hidden value: write [REDACTED] where the file shows it, in old_str to match it and in "
    "new_str to keep the value there (or leave it out of new_str to delete it); the other characters must match"
)
JSON_TYPES = {str: "string", int: "integer"}
BROWSER = ("navigate", "click", "type", "screenshot", "get_text")
NAMES = (
    "read_file",
    "write_file",
    "create_file",
    "edit_file",
    "shell_command",
    "search_files",
    "list_files",
)
NAMES += ("search_google", "fetch_url", *BROWSER)


def looks_binary(data: bytes) -> bool:
    return b"\0" in data[:8192]


def regular(p: Path, name: str) -> Path:
    """The path, if it is a file to read: a FIFO or a device is never opened (it blocks, or never ends)."""
    if p.is_dir():
        raise ValueError(f"{name} is a folder; list_files shows what it holds")
    if p.exists() and not p.is_file():
        raise ValueError(f"{name} is not a regular file")
    return p


def cap(text: str, limit: int) -> str:
    """Text cut to limit characters, keeping its head and its tail (where errors and exit codes are)."""
    if len(text) <= limit:
        return text
    cut = len(text) - limit
    return f"{text[: limit // 2]}\n[… {cut} characters cut; ask for less, e.g. a line range …]\n{text[-limit // 2 :]}"


def project_files(base: Path, ignore: list[str], grep: str | None = None) -> list[Path]:
    """Files under base, honouring `ignore` and .gitignore (git in a repository, with none of its hooks); with grep,
    only those git grep finds the pattern in (a pattern git's PCRE cannot take, or `$`, means every file; so does a
    lookaround or an anchor such as `\\A`: git grep may match them across lines, where each line decides here)."""
    ask = ["ls-files", "-z", "-co", "--exclude-standard"]
    if grep and not re.search(r"\$|\(\?|\\[AZzG]", grep):
        ask = [
            "grep",
            "-lzIP",
            "--untracked",
            "-e",
            f"(*UTF)(*UCP){grep}",
            "--",
            ".",
        ]  # \w, \d: Unicode, as in re
    git = subprocess.run(
        [*GIT, *ask],
        cwd=base,
        env=git_env(),
        capture_output=True,
        text=True,
        errors="surrogateescape",
    )
    if git.returncode not in (0, 1) or (git.returncode == 1 and ask[0] == "ls-files"):
        return project_files(base, ignore) if grep and ask[0] == "grep" else _walk(base, ignore)
    skip = _globs(ignore)
    return [
        base / r
        for r in git.stdout.split("\0")
        if r and not any(skip.match(p) for p in r.split("/"))
    ]


def _globs(patterns: list[str]) -> re.Pattern:
    return re.compile(
        "|".join(fnmatch.translate(p.strip("/")) for p in patterns if p.strip("/")[:1] not in "#")
        or "(?!)"
    )


def _walk(base: Path, ignore: list[str]) -> list[Path]:
    """Files under a folder that is not in git: `ignore` and its .gitignore's names honoured."""
    gitignore = base / ".gitignore"
    skip, found = (
        _globs(
            ignore + (gitignore.read_text(errors="replace").split() if gitignore.is_file() else [])
        ),
        [],
    )
    for folder, dirs, names in os.walk(base):
        dirs[:] = sorted(d for d in dirs if not skip.match(d))
        found += [Path(folder, n) for n in sorted(names) if not skip.match(n)]
    return found


def run_command(command: str, timeout: float, cwd: Path, env: dict) -> str:
    """Run a shell line; stdout, stderr and exit code. Whatever it started is gone when it returns."""
    import psutil

    _harden()
    before = {p.pid for p in psutil.Process().children()}
    # in its own session: a timeout or Ctrl+C kills the whole group it started
    pipes = dict(
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    proc = subprocess.Popen(
        command, shell=True, cwd=cwd, env=env, text=True, errors="replace", **pipes
    )
    try:
        out, err, note = _collect(proc, timeout, before)
    finally:  # also on Ctrl+C
        _kill(proc.pid, before)
    parts = [f"$ {command}", out.rstrip(), f"[stderr]\n{err.rstrip()}" if err.strip() else ""]
    return "\n".join(p for p in [*parts, f"[exit code {proc.returncode}]{note}"] if p)


def _harden() -> None:
    """Orphans of a command come back to us, to be killed; and amas's /proc files (its first environment, which
    holds the keys kept from commands) are closed to them (Linux; elsewhere nothing happens)."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        libc = ctypes.CDLL(None)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: /proc/<amas>/environ is root's


def _collect(proc: subprocess.Popen, timeout: float, before: set[int]) -> tuple[str, str, str]:
    """The command's output, and a note if it ran past its timeout and was killed with its children."""
    deadline, note = time.monotonic() + timeout, ""
    while True:
        try:
            out, err = proc.communicate(timeout=0.1)  # retrying loses no output
            return out, err, note
        except (
            subprocess.TimeoutExpired
        ) as e:  # still running, or what it left behind holds its output open
            if proc.poll() is None and time.monotonic() < deadline:
                continue
            if proc.poll() is None and not note:
                note = f"\n[timed out after {timeout}s; the command and its children were killed]"
            elif (
                time.monotonic() > deadline + 1
            ):  # out of reach: it left its session, and no subreaper took it
                proc.stdout.close(), proc.stderr.close()
                held = f"{note}\n[still held open after {timeout}s by a process it started that amas cannot stop]"
                return *[
                    (part or b"").decode(errors="replace") for part in (e.output, e.stderr)
                ], held
            _kill(proc.pid, before)


def _kill(pid: int, keep: set[int]) -> None:
    """The command's process group, and every process it left behind (re-parented to us), killed."""
    import psutil

    strays = [p for p in psutil.Process().children() if p.pid not in keep and p.pid != pid]
    with contextlib.suppress(
        psutil.Error
    ):  # its own tree too, waited for: a kill signal is only sent, not done
        strays += psutil.Process(pid).children(recursive=True)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    for stray in list(strays):
        with contextlib.suppress(psutil.Error):
            strays += stray.children(recursive=True)
    for stray in strays:
        with contextlib.suppress(psutil.Error):
            stray.kill()
    psutil.wait_procs(strays, timeout=2)


class Tools:
    """The tools of one project: paths go through the gate, changes through the checkpoint."""

    def __init__(self, root: Path, config: dict, gate: safety.Gate, checkpoint=None):
        self.root, self.config, self.gate, self.checkpoint = (
            Path(root).resolve(),
            config,
            gate,
            checkpoint,
        )
        self.browser, self.browser_used, self.touched = None, False, set()
        self.names = NAMES if browser.available(config) else NAMES[: -len(BROWSER)]

    # -- the registry -----------------------------------------------------------------------------
    def schemas(self) -> list[dict]:
        """OpenAI tool schemas, made from each handler's signature and docstring."""
        return [self.schema(name) for name in self.names]

    def schema(self, name: str) -> dict:
        params = inspect.signature(getattr(self, name)).parameters.values()
        props = {
            p.name: {"type": JSON_TYPES[p.annotation], "description": PARAMS.get(p.name, p.name)}
            for p in params
        }
        required = [p.name for p in params if p.default is p.empty]
        parameters = {"type": "object", "properties": props, "required": required}
        return {
            "type": "function",
            "function": {
                "name": name,
                "description": getattr(self, name).__doc__,
                "parameters": parameters,
            },
        }

    def check(self, name: str, raw) -> dict:
        """The call's arguments, bound to the handler's signature; ValueError with what to fix otherwise."""
        if not name:  # a call written as text that could not be read
            raise ValueError(
                f"could not read this tool call: {str(raw)[:300]}; write it as {providers.EXAMPLE}"
            )
        if name not in self.names:
            raise ValueError(f"unknown tool {name!r}; available tools: {', '.join(self.names)}")
        try:
            args = json.loads(raw or "{}") if isinstance(raw, str) else raw
        except ValueError as e:
            raise ValueError(
                f"arguments for {name} are not valid JSON ({e}); send one JSON object"
            ) from None
        if not isinstance(args, dict):
            raise ValueError(
                f"arguments for {name} must be a JSON object, got {type(args).__name__}"
            )
        sig = inspect.signature(getattr(self, name))
        if missing := [
            p.name for p in sig.parameters.values() if p.default is p.empty and p.name not in args
        ]:
            raise ValueError(f"{name} is missing required argument(s): {', '.join(missing)}")
        if unknown := [k for k in args if k not in sig.parameters]:
            raise ValueError(
                f"{name} has no argument(s) {', '.join(unknown)}; it takes {', '.join(sig.parameters)}"
            )
        if args.get("path") == "":
            raise ValueError(
                f"the path for {name} is empty; name a file or folder, e.g. README.md or ."
            )
        _typed(name, sig, args)
        return args

    def execute(self, name: str, raw) -> str:
        """One call from the model: its result or error as text, secrets redacted before it is capped."""
        try:
            args = self.check(name, raw)
            result = getattr(self, name)(**args) or "Tool executed successfully (no output)"
        except (ValueError, PermissionError) as e:
            result = f"Error: {e}"
        except Exception as e:  # the model reads this and tries again
            result = f"Error: {type(e).__name__}: {e}"
        return cap(self.gate.secrets.redact(cap(str(result), 20 * MAX_RESULT)), MAX_RESULT)

    def show(self, path: Path) -> str:
        """A path as the user thinks of it: relative inside the project."""
        return os.path.relpath(path, self.root) if path.is_relative_to(self.root) else str(path)

    # -- files --------------------------------------------------------------------------------------
    def read_file(self, path: str, offset: int = 0, limit: int = 2000) -> str:
        """Read a file with line numbers. Read a file before editing it."""
        p = self.gate.path(path)
        data = regular(p, path).read_bytes()
        if looks_binary(data):
            return "Binary file, cannot display"
        self.touched.add(self.show(p))
        # redacted whole, then cut: a part of a secret (a key without its BEGIN line) is hidden too
        lines, offset = (
            self.gate.secrets.redact(data.decode("utf-8", errors="replace")).splitlines(),
            max(0, offset),
        )
        out, size, end = [], 0, min(len(lines), offset + max(1, limit))
        for i in range(offset, end):
            size += len(lines[i]) + 8
            if (
                size > MAX_READ
            ):  # a single line longer than that is shown cut, so the model is never stuck
                end = i + (not out)
                out += (
                    [f"{i + 1:6}\t{lines[i][:MAX_READ]} [line cut at {MAX_READ:,} characters]"]
                    if not out
                    else []
                )
                break
            out.append(f"{i + 1:6}\t{lines[i]}")
        if end < len(lines):
            why = "truncated at 50 KB" if size > MAX_READ else "more lines follow"
            out.append(
                f"[{why}: lines {offset + 1}-{end} of {len(lines)} shown; read_file offset={end} reads on]"
            )
        if lines and not out:
            return f"Error: {path} has {len(lines)} lines; offset {offset} is past its end"
        return "\n".join(out) if out else f"(empty file: {self.show(p)})"

    def write_file(self, path: str, content: str) -> str:
        """Replace a file's whole content (give the FULL content)."""
        p = regular(self.gate.path(path, write=True), path)
        old = p.read_bytes() if p.is_file() else b""
        return self.change(p, old, _like(old, content), "write")

    def create_file(self, path: str, content: str) -> str:
        """Create a new file; fails if it exists."""
        p = self.gate.path(path, write=True)
        if os.path.lexists(p):
            return f"Error: {path} already exists; use edit_file to change it or write_file to replace it"
        return self.change(p, b"", content.encode(), "create")

    def edit_file(self, path: str, old_str: str, new_str: str) -> str:
        """Replace one exact, unique occurrence of old_str with new_str."""
        p = self.gate.path(path, write=True)
        data = regular(p, path).read_bytes()
        try:
            text = (
                data.decode("utf-8").replace("\r\n", "\n") if _crlf(data) else data.decode("utf-8")
            )
        except UnicodeDecodeError:
            return f"Error: {path} is not UTF-8 text; edit_file would corrupt it. Use shell_command (e.g. sed) instead"
        if _crlf(data):
            old_str, new_str = old_str.replace("\r\n", "\n"), new_str.replace("\r\n", "\n")
        # the file as the model sees it, where [REDACTED] stands for the value at its place
        view = safety.Masked(self.gate.secrets, text)
        found = view.find(old_str)
        if len(found) > 1:
            return _ambiguous(view.shown, found, path)
        if not found:
            return f"Error: old_str not found in {path}. " + _closest(view.shown, old_str)
        new = view.replace(found[0], old_str, new_str)
        if new is None:
            return f"Error: this edit would leave a hidden secret without the name that hides it, or change it. {KEEP}"
        return self.change(p, data, _like(data, new), "edit")

    def change(self, p: Path, old: bytes, new: bytes, verb: str) -> str:
        """Show the diff, ask, then write through a temporary file with the change checkpointed."""
        name = self.show(p)
        if new.count(b"[REDACTED]") > old.count(
            b"[REDACTED]"
        ):  # copied from a redacted read: the secret is lost
            return (
                f"Error: the new content of {name} holds [REDACTED], which amas shows in place of a secret; writing it "
                "would destroy the real value. Change only the other lines, with edit_file"
            )
        if hidden := self.gate.secrets.concealed(
            old.decode(errors="replace"), new.decode(errors="replace")
        ):
            return f"Error: {ui.plural(len(hidden), 'line')} of {name} ({', '.join(map(str, hidden[:9]))}) {CONCEALED}"
        detail = ui.diff(
            old.decode(errors="replace"),
            new.decode(errors="replace"),
            name,
            self.gate.secrets.redact,
        )
        if self.gate.ask("edit", f"Apply {verb} to {name}?", detail) == "n":
            return "Edit declined by user."
        with self.recording(p, f"[amas] {verb} {name}") as rec:
            _write(p, new)
        self.touched.add(name)
        lines = ui.plural(new.count(b"\n") + (not new.endswith(b"\n") and bool(new)), "line")
        return f"{verb.capitalize()} {name}: {lines}" + (f" {rec.note}" if rec and rec.note else "")

    def recording(self, p: Path, label: str):
        """A change to one file, as one checkpoint when the file is in the project."""
        inside = p.is_relative_to(self.root) and self.checkpoint is not None
        return self.checkpoint.recording(label, [p]) if inside else contextlib.nullcontext()

    # -- commands and search ------------------------------------------------------------------------
    def shell_command(self, command: str, timeout: int = 0) -> str:
        """Run a shell command in the project root; returns stdout, stderr and exit code."""
        refused = self.gate.shell(command)
        if refused:
            return refused
        timeout = timeout if timeout > 0 else self.config["shell_timeout"]
        env = safety.child_env(self.config)
        if self.checkpoint is None:
            return run_command(command, timeout, self.root, env)
        with self.checkpoint.recording(f"[amas] shell: {command[:200]}") as rec:
            result = run_command(command, timeout, self.root, env)
        return result + (f"\n{rec.note}" if rec.note else "")

    def search_files(self, pattern: str, path: str = ".") -> str:
        """Regex search in project files (ignored files left out); returns path:line: text."""
        regex, base, hits = re.compile(pattern), self.gate.path(path), []
        if not base.exists():
            return f"Error: {path} does not exist"
        for f in (
            project_files(base, self.config["ignore"], pattern)
            if base.is_dir()
            else [regular(base, path)]
        ):
            try:  # a link out of the project is never followed, on the way either: a clone can ship lnk -> ~/.ssh
                inside = any(
                    map(Path(os.path.realpath(f)).is_relative_to, (self.root, base))
                )  # base: as asked
                text = (
                    f.read_text(encoding="utf-8")
                    if inside and f.is_file() and f.stat().st_size < 2e6
                    else ""
                )
            except (OSError, UnicodeDecodeError):
                continue
            if not any(
                map(regex.search, raw := text.splitlines())
            ):  # line by line, as git grep decides
                continue
            pairs = list(
                zip(raw, self.gate.secrets.redact(text).splitlines(), strict=False)
            )  # it keeps lines
            if not any(
                a == b and regex.search(b) for a, b in pairs
            ):  # matching only where a secret is, a file would
                continue  # tell the model whether its guess was right: a line a secret touches shows only beside others
            hits += [
                f"{self.show(f)}:{n}: {b.strip()[:200]}"
                for n, (_, b) in enumerate(pairs, 1)
                if regex.search(b)
            ]
            if len(hits) > MAX_LINES:
                return (
                    "\n".join(hits[:MAX_LINES])
                    + f"\n[capped at {MAX_LINES} matches; narrow the pattern or path]"
                )
        return "\n".join(hits) or f"No matches for {pattern!r}"

    def list_files(self, path: str = ".") -> str:
        """List project files as a tree (ignored files left out)."""
        base = self.gate.path(path)
        if not base.is_dir():
            return (
                f"Error: {path} is not a folder"
                if base.exists()
                else f"Error: {path} does not exist"
            )
        rels = sorted(
            str(f)[len(str(base)) + 1 :] for f in project_files(base, self.config["ignore"])
        )
        lines, shown = [], set()
        for rel in rels[:MAX_LINES]:
            parts = rel.split("/")
            for depth in range(len(parts) - 1):
                if (folder := "/".join(parts[: depth + 1])) not in shown:
                    shown.add(folder)
                    lines.append("  " * depth + parts[depth] + "/")
            lines.append("  " * (len(parts) - 1) + parts[-1])
        more = (
            f"\n[{len(rels) - MAX_LINES} more files not shown; list a subfolder]"
            if len(rels) > MAX_LINES
            else ""
        )
        return "\n".join(lines) + more if lines else f"No files under {path}"

    # -- the web ------------------------------------------------------------------------------------
    def search_google(self, query: str, num_results: int = 5) -> str:
        """Search the web; returns title, url and snippet per result."""
        return browser.search(query, num_results, self.config)

    def fetch_url(self, url: str) -> str:
        """Fetch a web page as readable text."""
        return browser.fetch(url, self.gate)

    def page(self) -> browser.Browser:
        """The browser, started on first use; every navigation, the page's own too, goes through visit."""
        self.browser, self.browser_used = (
            self.browser or browser.Browser(self.config, self.visit),
            True,
        )
        return self.browser

    def visit(self, url: str) -> str:
        """The URL, if the browser may open it: a file through the path gate, a new host asked about."""
        scheme = urlsplit(url).scheme.lower()
        if scheme == "file":
            return self.gate.path(unquote(urlsplit(url).path)).as_uri()
        if scheme in ("http", "https"):
            self.gate.host(url)
        elif scheme not in (
            "about",
            "data",
            "blob",
        ):  # view-source:file://… would skip the path gate
            raise PermissionError(
                f"the browser opens http, https, file, about, data and blob URLs, not {scheme}:"
            )
        return url

    def close(self, idle_only: bool = False) -> None:
        """Free the browser (hundreds of MB); with idle_only, only if no tool used it since the last call."""
        if self.browser is not None and not (idle_only and self.browser_used):
            self.browser.close()
            self.browser = None
        self.browser_used = False

    def navigate(self, url: str) -> str:
        """Browser: open a URL; returns the title and visible text."""
        known = "://" in url or url.lower().startswith(("about:", "data:", "view-source:"))
        return self.page().navigate(self.visit(url if known else f"https://{url}"))

    def click(self, selector: str) -> str:
        """Browser: click the element matching a CSS selector."""
        return self.page().click(selector)

    def type(self, selector: str, text: str) -> str:
        """Browser: type text into the element matching a CSS selector."""
        return self.page().type(selector, text)

    def screenshot(self, path: str = "screenshot.png") -> str:
        """Browser: save a PNG of the page; returns its path."""
        p = self.gate.path(path, write=True)
        if (
            os.path.lexists(p)
            and self.gate.ask("edit", f"Replace {self.show(p)} with a screenshot?") == "n"
        ):
            return "Screenshot declined by user."
        with self.recording(p, f"[amas] screenshot {self.show(p)}") as rec:
            shot = self.page().screenshot(str(p))
        return shot + (f" {rec.note}" if rec and rec.note else "")

    def get_text(self, selector: str = "body") -> str:
        """Browser: visible text of the page or of one element."""
        return self.page().get_text(selector)


def _typed(name: str, sig: inspect.Signature, args: dict) -> None:
    """Each argument of its parameter's type: a string `timeout` is refused before the command starts."""
    for key, value in sig.bind(**args).arguments.items():
        want = sig.parameters[key].annotation
        if not isinstance(value, want) or isinstance(value, bool):
            kind = JSON_TYPES[want]
            raise ValueError(
                f"argument {key!r} of {name} must be a{'n' * (kind[0] == 'i')} {kind}, got {type(value).__name__}"
            )


def _crlf(data: bytes) -> bool:
    """Every line ends in CRLF: edits keep it that way."""
    return b"\r\n" in data and data.count(b"\n") == data.count(b"\r\n")


def _like(old: bytes, text: str) -> bytes:
    """New text in the line endings of the file it replaces."""
    text = text.replace("\r\n", "\n")
    return (text.replace("\n", "\r\n") if _crlf(old) else text).encode()


def _write(path: Path, data: bytes) -> None:
    """Write whole, through a temporary file and a rename, keeping the file's mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(
        f".amas-write-{os.urandom(4).hex()}.tmp"
    )  # short, whatever the name's length
    try:
        with os.fdopen(
            os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666), "wb"
        ) as f:
            f.write(data)
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # only if the rename did not happen


def _ambiguous(shown: str, found: list[int], path: str) -> str:
    """old_str occurs more than once: where, so the model can add context."""
    lines = ", ".join(str(shown.count("\n", 0, at) + 1) for at in found)
    return (
        f"Error: old_str occurs {len(found)} times in {path} (lines {lines}); include more context to make it "
        "unique"
    )


def _closest(content: str, old: str) -> str:
    """The file region most like old as the model sees it, with line numbers and a hint that works."""
    lines, k = content.splitlines(), max(1, len(old.splitlines()))
    if not lines:
        return "The file is empty."
    like = lambda i: difflib.SequenceMatcher(None, "\n".join(lines[i : i + k]), old).quick_ratio()  # noqa: E731
    best = max(range(max(1, len(lines) - k + 1)), key=like)
    region = "\n".join(f"{n + 1:6}\t{lines[n]}" for n in range(best, min(len(lines), best + k)))
    hint = KEEP if "[REDACTED]" in region else "Copy old_str exactly from the file."
    return f"The closest region (lines {best + 1}-{best + k}) is:\n{region}\n{hint}"
