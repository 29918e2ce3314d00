"""The model's tools, bound to one project:
each handler's signature and docstring are its schema."""

import contextlib
import difflib
import inspect
import json
import os
import re
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

from amas_code import browser, effects, memory, policy, redact, repomap, sandbox, toolcalls, ui
from amas_code.effects import Change, Command, Verdict
from amas_code.project import looks_binary, project_files, regular, resolved, shown

MAX_READ = 50_000  # bytes of a file shown at once
LINE_CAP = 4 * MAX_READ + 4  # bytes of one line kept: more than MAX_READ characters, however wide
CONTEXT = 100  # lines either side of those shown, redacted with them (a key spans lines)
MAX_RESULT = 60_000  # characters of any tool result the model gets (head and tail kept)
MAX_LINES = 300  # lines of search and list output
# bytes of a file searched at once: its text, decoded (up to 4 bytes a character) and redacted, is
# held twice more; 1 MiB blocks cost a one-shot's search 8.6 MB of RSS in git/git, 64 KiB 3.2 MB
# (and no time: 3.9 s for its 4,847 files either way, most of it redaction)
BLOCK = 1 << 16
SEARCH_SECONDS = 10  # CPU seconds search_files may spend, every regex (and redaction) together
# and its limit in wall time, however busy the machine: stopped there, the machine is said, not
# the pattern
SEARCH_WALL = 60
SMALL_FILE = 3000  # characters of a file the model has not read that a failed edit shows whole
CLOSEST_BUDGET = 500_000  # characters edit_file's closest-region search compares (~0.2 s)
PARAMS = dict(  # what a parameter means, where its name is not enough
    path="File path, relative to the project root",
    offset="First line to show, 0-based",
    pattern="Python regex",
    old_str="Exact text to replace, with enough context to be unique",
    timeout="Seconds before it is killed",
    action="store, search or forget",
    days="Days until the note expires (0: kept)",
)
CONCEALED = (  # why a write is refused whose diff would hide more than a secret
    "would show as [REDACTED] in the diff the user approves, and the hidden part holds spaces or "
    "shell characters, which no secret needs; write it so that only the secret itself is hidden"
)
NOT_UTF8 = "Use shell_command (e.g. sed or iconv) instead"
NOT_UTF8_NOTE = (
    "[the file is not UTF-8: bytes that are not are shown as �; edit_file refuses it, "
    "shell_command can convert it, e.g. iconv -f latin1 -t utf-8]"
)
KEEP = (  # how to edit around a hidden value (the model cannot copy what it never saw)
    "[REDACTED] stands for a hidden value: write [REDACTED] where the file shows it, in old_str "
    "to match it and in new_str to keep the value there (or leave it out of new_str to delete "
    "it); the other characters must match"
)
JSON_TYPES = {str: "string", int: "integer"}
TYPE_NAMES = {str: "a string", int: "an integer"}  # for the model, when a value cannot be one
BROWSER = ("navigate", "click", "type", "screenshot", "get_text")
NAMES = (
    "read_file",
    "write_file",
    "create_file",
    "edit_file",
    "shell_command",
    "search_files",
    "list_files",
    "memory",
)
NAMES += ("search_google", "fetch_url", *BROWSER)
WEB = ("search_google", "fetch_url", *BROWSER)  # offered where the context has room for them
# plan mode's tools: those that read, and commands in the box with the project read-only
PLAN = ("read_file", "search_files", "list_files", "shell_command", "search_google", "fetch_url")


class Tools:
    """The tools of one project. A tool that changes something returns what it wants done (a Change
    or a Command) for the agent to ask about, checkpoint and perform; reads outside the project and
    new hosts are judged by the gate and asked through `permit`, the agent's one question."""

    def __init__(self, config: dict, gate: policy.Gate, permit, box: sandbox.Box | None):
        self.root = gate.root
        self.config = config
        self.gate = gate
        self.permit = permit  # the one question to the person: (yes, what they said instead)
        self.secrets = redact.Secrets(config)  # hidden from whatever a tool shows
        self.box = box  # the box commands run in, with the session's /tmp (None: unboxed)
        self.browser = None
        self.browser_used = False  # in this turn: a browser unused for a whole turn is closed
        self.touched = set()  # files read or changed in this conversation, for the map's ranking
        # what the model has seen of each file: the file as it was when it last read or wrote it
        self.seen: dict[Path, tuple[int, int]] = {}
        self.names = NAMES
        if not browser.available(config):
            self.names = NAMES[: -len(BROWSER)]
        self.planning = False  # plan mode: reading tools only, commands with the project read-only

    # -- the registry -----------------------------------------------------------------------------
    def schemas(self, web: bool = True) -> list[dict]:
        """OpenAI tool schemas, made from each handler's signature and docstring; without the
        web's and the browser's when a small context has no room for them (~500 tokens)."""
        names = self.names
        if not web:
            names = [name for name in names if name not in WEB]
        if self.planning:
            names = [name for name in names if name in PLAN]
        return [self.schema(name) for name in names]

    def schema(self, name: str) -> dict:
        params = inspect.signature(getattr(self, name)).parameters.values()
        props = {p.name: {"type": JSON_TYPES[p.annotation]} for p in params}
        # a name that says it all needs no description (tokens a small model reads)
        for p in params:
            if p.name in PARAMS:
                props[p.name]["description"] = PARAMS[p.name]
        required = [p.name for p in params if p.default is p.empty]
        parameters = {"type": "object", "properties": props, "required": required}
        return {
            "type": "function",
            "function": {
                "name": name,
                "description": " ".join(getattr(self, name).__doc__.split()),  # one line
                "parameters": parameters,
            },
        }

    def bind(self, call: toolcalls.Call) -> dict:
        """The call's arguments, bound to the handler's signature;
        ValueError with what to fix otherwise."""
        name = call.name
        if name not in self.names:
            raise ValueError(f"unknown tool {name!r}; available tools: {', '.join(self.names)}")
        self.check_plan(name)
        if call.args is None:
            written = str(call.raw)[:200]
            raise ValueError(
                f"arguments for {name} are not a JSON object ({written!r}); send one JSON object"
            )
        sig = inspect.signature(getattr(self, name))
        args = _tolerant(name, sig, call.args)
        _bound(name, sig, args)
        return args

    def check_plan(self, name: str) -> None:
        """In plan mode, PermissionError for a tool that changes something, and for a command
        where no sandbox can keep the project read-only."""
        if self.planning and name not in PLAN:
            raise PermissionError(
                f"plan mode: {name} changes something, and nothing changes until the user leaves "
                "plan mode; write the plan instead"
            )
        if self.planning and name == "shell_command" and not self.box:
            raise PermissionError(
                "plan mode runs commands only in the sandbox, where the project is read-only, "
                "and it cannot run here; read the files instead"
            )

    def saw(self, path: Path) -> None:
        """The model has the file's content now: it read it, it was attached, or its change was
        written."""
        self.touched.add(shown(self.root, path))
        with contextlib.suppress(OSError):
            self.seen[path] = _version(path)

    def wrote(self, change: Change) -> None:
        """A change written: the model knows the whole file it wrote or created, and a file it had
        seen and then edited; one it only edited it has still not seen."""
        self.touched.add(shown(self.root, change.path))
        if change.verb != "edit" or change.path in self.seen:
            self.saw(change.path)

    def seen_as(self, path: Path) -> str:
        """How much of a file the model has seen: "read" (as it is now), "unread" (never),
        "changed" (not since it changed), or "outside" (a place outside the project)."""
        if self.gate.where(path):
            return "outside"
        if path not in self.seen:
            return "unread"
        if self.seen[path] != _version(path):
            return "changed"
        return "read"

    def unseen(self, path: Path, old: bytes) -> None:
        """ValueError when replacing a file whose content the model has not seen (never read in
        this session, or changed since): a small model once wrote `obj['calc.py']` over a file it
        had only edited."""
        name = shown(self.root, path)
        was = self.seen.get(path)
        if was is None:
            lines = ui.plural(old.count(b"\n") + (not old.endswith(b"\n")), "line")
            raise ValueError(
                f"{name} exists and you have not read it in this session: write_file would replace "
                f"all {lines} of it. Read it first (read_file), or change a part with edit_file"
            )
        if was != _version(path):
            raise ValueError(
                f"{name} changed since you last read it (the user, a command or /undo changed it): "
                "read it again before you replace it"
            )

    def present(self, p: Path, path: str) -> Path:
        """p, if something is there; else ValueError naming the nearest real paths (a small model
        guesses `src/main.py` where `main.py` is)."""
        if os.path.lexists(p):
            return p
        said = [f"{path} does not exist."]
        if p.is_relative_to(self.root):
            said += _nearest(self.root, p, self.config["ignore"])
        raise ValueError(" ".join(said))

    def path(self, raw: str) -> Path:
        """A path to read: outside the project
        (or in a place holding credentials) it is asked about."""
        path = resolved(self.root, raw)
        self.allow(self.gate.judge_path(path))
        return path

    def allow(self, verdict: Verdict) -> None:
        """Go on if the gate allows it or the person says yes;
        else PermissionError for the model."""
        if verdict.decision == "allow":
            return
        said = ""
        if verdict.decision == "ask":
            yes, feedback = self.permit(verdict)
            if yes:
                return
            if feedback:
                said = f"; they said: {feedback}"
        if not ui.can_ask():  # no one was asked
            raise effects.Declined(f"{verdict.reason} was declined: no terminal to ask the user on")
        raise effects.Declined(f"{verdict.reason} was declined by the user{said}")

    # -- files -------------------------------------------------------------------------------------
    def read_file(self, path: str, offset: int = 0, limit: int = 2000) -> str:
        """Read a file with line numbers. Read a file before editing it."""
        p = self.present(self.path(path), path)
        with regular(p, path).open("rb") as f:
            if looks_binary(f.read(8192)):
                self.saw(p)  # all there is to see of it
                return "Binary file, cannot display"
            f.seek(0)
            window = _Window(max(0, offset), max(1, limit))
            total = window.read(f)
        self.saw(p)
        if not total:
            return f"(empty file: {shown(self.root, p)})"
        if window.offset >= total:
            raise ValueError(f"{path} has {total} lines; offset {offset} is past its end")
        # redacted with the lines around it, then cut: a part of a secret (a key without its BEGIN
        # line) is hidden too
        numbered = _numbered(window.shown(self.secrets.redact), window.offset, total)
        if not window.utf8():
            return f"{numbered}\n{NOT_UTF8_NOTE}"
        return numbered

    def write_file(self, path: str, content: str) -> str:
        """Replace a file's whole content (give the FULL content)."""
        p = regular(resolved(self.root, path, write=True), path)
        old = None
        if p.is_file():
            old = p.read_bytes()
        try:  # the model saw it with U+FFFD in place of each byte it could not read
            (old or b"").decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(
                f"{path} is not UTF-8 text; write_file would re-encode it. {NOT_UTF8}"
            ) from None
        if old is not None and not self.gate.where(p, write=True):  # else asked in every case
            self.unseen(p, old)
        new = _like(old or b"", content)
        line = parse_error(self.config, p, old, new)
        if old is not None and line is not None:
            raise ValueError(
                f"write_file would leave {path} unparsable: a syntax error at line {line} of what "
                "you wrote (the file parses now, and is unchanged). Write the whole file as valid "
                "code, or change a part with edit_file"
            )
        return self.propose(p, old, new, "write")

    def create_file(self, path: str, content: str) -> str:
        """Create a new file; fails if it exists."""
        p = resolved(self.root, path, write=True)
        if os.path.lexists(p):
            raise ValueError(self.exists(p, path))
        return self.propose(p, None, content.encode(), "create")

    def exists(self, p: Path, path: str) -> str:
        """create_file over a file there is: what to use instead, and a small text file the model
        has not read shown whole (it is then read: a small model wrote a new file over the one a
        README convention had it extend)."""
        said = f"{path} already exists; use edit_file to change it or write_file to replace it"
        if self.seen_as(p) not in ("unread", "changed") or not os.path.isfile(p):
            return said
        text = _text(regular(p, path).read_bytes())
        if text is None or len(text) > SMALL_FILE:
            return f"{said} (read_file it first)"
        self.saw(p)
        return f"{said}. It holds:\n{_whole(redact.Masked(self.secrets, text).shown)}"

    def edit_file(self, path: str, old_str: str, new_str: str) -> str:
        """Replace one exact, unique occurrence of old_str with new_str."""
        p = self.present(resolved(self.root, path, write=True), path)
        data = regular(p, path).read_bytes()
        text = _text(data)
        if text is None:
            raise ValueError(
                f"{path} is not UTF-8 text; edit_file would corrupt it. "
                "Use shell_command (e.g. sed) instead"
            )
        if _crlf(data):  # the model's lines end as the file's are shown: \n
            old_str = old_str.replace("\r\n", "\n")
            new_str = new_str.replace("\r\n", "\n")
        # the file as the model sees it, where [REDACTED] stands for the value at its place
        view = redact.Masked(self.secrets, text)
        at = _found_once(view, old_str, path, self.seen_as(p))
        new = view.replace(at, old_str, new_str)
        if new is None:
            raise ValueError(
                "this edit would leave a hidden secret without the name that hides it, "
                f"or change it. {KEEP}"
            )
        return self.propose(p, data, _like(data, new), "edit")

    def propose(self, p: Path, old: bytes | None, new: bytes, verb: str) -> Change:
        """The change a file tool wants; ValueError when writing it would lose or hide a secret."""
        name = shown(self.root, p)
        before = old or b""
        if new.count(b"[REDACTED]") > before.count(b"[REDACTED]"):
            # copied from a redacted read: the secret is lost
            raise ValueError(
                f"the new content of {name} holds [REDACTED], which amas shows in place of a "
                "secret; writing it would destroy the real value. "
                "Change only the other lines, with edit_file"
            )
        hidden = self.secrets.concealed(
            before.decode(errors="replace"), new.decode(errors="replace")
        )
        if hidden:
            lines = ", ".join(map(str, hidden[:9]))
            raise ValueError(f"{ui.plural(len(hidden), 'line')} of {name} ({lines}) {CONCEALED}")
        return Change(p, old, new, verb)

    # -- commands and search -----------------------------------------------------------------------
    def shell_command(self, command: str, timeout: int = 0) -> Command:
        """Run a shell command in the project root; returns stdout, stderr and exit code."""
        if timeout <= 0:  # none given: the user's
            timeout = self.config["shell_timeout"]
        return Command(command, timeout)

    def search_files(self, pattern: str, path: str = ".") -> str:
        """Regex search in project files (ignored files left out); returns path:line: text."""
        import regex  # re has no time limit: `(-+)+\d$` would hold amas for ever

        search = _Search(regex.compile(pattern))
        base = self.path(path)
        if not base.exists():
            raise ValueError(f"{path} does not exist")
        literal = None  # a pattern with no regex in it: git grep finds its files first
        if re.fullmatch(r"[\w\s\-:=,;'\"/<>@#%&!~`]+", pattern):
            literal = pattern
        if base.is_dir():
            files = project_files(base, self.config["ignore"], literal)
        else:
            files = [str(regular(base, path))]
        for f in files:
            try:
                search.lines(self.searchable(f, base), shown(self.root, f))
            except TimeoutError:  # an OSError too: first
                return search.report(pattern, stopped=True)
            except (OSError, UnicodeDecodeError):  # unreadable, or not text: not searched
                continue
            if len(search.hits) > MAX_LINES:
                break
        return search.report(pattern)

    def searchable(self, f: str, base: Path) -> Iterator[str]:
        """A file's text in blocks of whole lines as the model may see it (secrets redacted, so a
        pattern never runs on one); nothing for a link out of the project or a file that is not a
        regular one."""
        if not os.path.isfile(f):  # git lists a file deleted since it was staged
            return
        # a link out of the project is never followed, on the way either:
        # a clone can ship lnk -> ~/.ssh
        real = os.path.realpath(f)
        inside = any(
            os.path.commonpath((real, folder)) == str(folder) for folder in (self.root, base)
        )
        if not inside:
            return
        with open(f, "rb") as raw:
            for block in _blocks(raw):
                yield self.secrets.redact(block.decode("utf-8"))

    def list_files(self, path: str = ".") -> str:
        """List project files as a tree (ignored files left out)."""
        base = self.path(path)
        if base.exists() and not base.is_dir():
            raise ValueError(f"{path} is not a folder")
        if not base.exists():
            raise ValueError(f"{path} does not exist")
        cut = len(str(base)) + 1
        rels = (f[cut:] for f in project_files(base, self.config["ignore"]))
        listed, rest = _first(rels)
        if not listed:
            return f"No files under {path}"
        return "\n".join(_tree(listed)) + _counted(rest)

    # -- the user's memory -------------------------------------------------------------------------
    def memory(self, action: str, text: str, days: int = 0) -> str | Change:
        """Notes kept across sessions: search (text: what about), store (text: a fact worth
        keeping; days: expires after) or forget (the notes holding text); the user allows each."""
        if action == "search":
            return memory.search(self.root, text)
        if action == "store":
            path, kept = memory.added(self.root, self.secrets.redact(text), days)
            return Change(path, _bytes(path), kept.encode(), "remember")
        if action != "forget":
            raise ValueError(f"action must be store, search or forget, not {action!r}")
        gone = memory.matching(self.root, text)
        if not gone:
            raise ValueError(f"no note holds {text!r}; search first")
        path, kept = next(iter(memory.without(self.root, gone).items()))
        return Change(path, _bytes(path), kept.encode(), "forget")

    # -- the web -----------------------------------------------------------------------------------
    def search_google(self, query: str, num_results: int = 5) -> str:
        """Search the web; returns title, url and snippet per result."""
        return browser.search(query, num_results, self.config)

    def fetch_url(self, url: str) -> str:
        """Fetch a web page as readable text."""
        return browser.fetch(url, self.reach)

    def page(self) -> browser.Browser:
        """The browser, started on first use;
        every navigation, the page's own too, goes through visit."""
        self.browser = self.browser or browser.Browser(self.config, self.visit, self.known)
        self.browser_used = True
        return self.browser

    def visit(self, url: str) -> str:
        """The URL, if the browser may open it:
        a file through the path gate, a new host asked about."""
        scheme = urlsplit(url).scheme.lower()
        if scheme == "file":
            return self.path(unquote(urlsplit(url).path)).as_uri()
        if scheme in ("http", "https"):
            self.reach(url)
        # view-source:file://… would skip the path gate
        elif scheme not in ("about", "data", "blob"):
            raise PermissionError(
                f"the browser opens http, https, file, about, data and blob URLs, not {scheme}:"
            )
        return url

    def known(self, where: str) -> bool:
        """Whether the gate lets the browser reach host:port without asking: the proxy's question
        for a connection no route saw (it cannot ask the person)."""
        verdicts = (self.gate.judge_host(f"{scheme}://{where}") for scheme in ("http", "https"))
        return any(verdict.decision == "allow" for verdict in verdicts)

    def reach(self, url: str) -> None:
        """A request to a host: the first one in a session is asked about
        (PermissionError if declined)."""
        self.allow(self.gate.judge_host(url))

    def close_browser(self, idle_only: bool = False) -> None:
        """Free the browser (hundreds of MB); with idle_only, only if no tool used it since the
        last call (a browser unused for a whole turn)."""
        if self.browser is not None and not (idle_only and self.browser_used):
            self.browser.close()
            self.browser = None
        self.browser_used = False

    def close(self) -> None:
        """The session ends: the browser and the session's /tmp go."""
        self.close_browser()
        if self.box:
            self.box.close()

    def navigate(self, url: str) -> str:
        """Browser: open a URL; returns the title and visible text."""
        known = "://" in url or url.lower().startswith(("about:", "data:", "view-source:"))
        if not known:  # a bare host, as people write it
            url = f"https://{url}"
        return self.page().navigate(self.visit(url))

    def click(self, selector: str) -> str:
        """Browser: click the element matching a CSS selector."""
        return self.page().click(selector)

    def type(self, selector: str, text: str) -> str:
        """Browser: type text into the element matching a CSS selector."""
        return self.page().type(selector, text)

    def screenshot(self, path: str = "screenshot.png") -> Change | str:
        """Browser: save a PNG of the page; returns its path."""
        p = regular(resolved(self.root, path, write=True), path)
        png = self.page().png()
        if isinstance(png, str):  # the browser's error
            return png
        return Change(p, _bytes(p), png, "screenshot")

    def get_text(self, selector: str = "body") -> str:
        """Browser: visible text of the page or of one element."""
        return self.page().get_text(selector)


class _Search:
    """One search_files call: its pattern and time limit, and the lines found."""

    def __init__(self, pattern):
        import regex

        self.pattern = pattern
        self.started = time.thread_time()  # CPU time: a busy machine does not use it up
        self.deadline = time.monotonic() + SEARCH_WALL
        self.hits = []
        # a block of lines none of which matches is passed over in one search, where `^` and `$`
        # mean a line's ends; an anchor on the whole text (\A, \Z) would miss there
        self.block = None
        if not re.search(r"\\[AZzG]", pattern.pattern):
            self.block = regex.compile(pattern.pattern, pattern.flags | regex.M)

    def lines(self, blocks: Iterator[str], name: str) -> None:
        """Add the lines of a file the pattern finds; TimeoutError once the time is up."""
        start = 1
        for text in blocks:
            first = start
            start = start + text.count("\n")
            if self.block and not self.found(self.block, text):
                continue
            pieces = text.split("\n")
            if text.endswith("\n"):
                pieces.pop()
            for n, line in enumerate(pieces, first):
                if self.found(self.pattern, line.removesuffix("\r")):
                    self.hits.append(f"{name}:{n}: {line.strip()[:200]}")

    def found(self, pattern, text: str) -> bool:
        """Whether pattern is in text, within the CPU time left. regex's own limit is wall time: a
        search it stops while CPU time is left (the machine was busy) is tried again."""
        while True:
            try:
                return bool(pattern.search(text, timeout=self.left()))
            except TimeoutError:
                self.left()  # raises when the time is really up

    def spent(self) -> float:
        return time.thread_time() - self.started

    def left(self) -> float:
        """CPU seconds left (at most the wall time left); TimeoutError when there are none."""
        left = min(SEARCH_SECONDS - self.spent(), self.deadline - time.monotonic())
        if left <= 0:
            raise TimeoutError
        return left

    def report(self, pattern: str, stopped: bool = False) -> str:
        """The lines found, capped, and whether the time ran out: the pattern's CPU time, or the
        machine's load."""
        out = self.hits[:MAX_LINES] or [f"No matches for {pattern!r}"]
        if len(self.hits) > MAX_LINES:
            out.append(f"[capped at {MAX_LINES} matches; narrow the pattern or path]")
        if stopped and self.spent() >= SEARCH_SECONDS:
            out.append(
                f"[stopped after {SEARCH_SECONDS} s, not every file searched: "
                "the pattern is too slow (a nested repeat such as (a+)+ backtracks); "
                "simplify it or search a narrower path]"
            )
        elif stopped:
            out.append(
                f"[stopped after {SEARCH_WALL} s, not every file searched: the machine is too busy "
                "to finish in time (the pattern used little of it); "
                "try again, or search a narrower path]"
            )
        return "\n".join(out)


def named_in(tools: "Tools", name: str | None) -> list[str]:
    """The first lines of the project that hold a name as a word (path:line: text), for a name
    that could be code's; none when it is no identifier or the search fails."""
    if not (name and name.isidentifier()):
        return []
    try:  # as a literal, which git grep finds first
        found = tools.search_files(name).splitlines()
    except (ValueError, OSError):
        return []
    word = re.compile(rf".+?:\d+: .*\b{name}\b")
    return [line for line in found if word.match(line)][:3]


def parse_error(config: dict, path: Path, old: bytes | None, new: bytes) -> int | None:
    """The line of a parse error new brings that old did not have (repomap.syntax_error), or None:
    also when check_syntax is off, or the grammar fails to load (that costs the check, never the
    change)."""
    if not config.get("check_syntax", True):
        return None
    try:
        return repomap.syntax_error(path, old, new)
    except Exception:
        return None


def attachment(path: Path) -> str:
    """A file's text as the user attaches it to a message, cut at MAX_READ (its secrets are hidden
    with the message it goes in). ValueError or OSError when it cannot be."""
    if not path.exists():
        raise ValueError("no such file")
    if path.is_dir():
        raise ValueError("it is a folder; attach the files in it, e.g. /attach 'folder/*.py'")
    data = regular(path, path.name).read_bytes()
    if looks_binary(data):
        raise ValueError("it is a binary file")
    text = data[:MAX_READ].decode(errors="replace")
    if len(data) > MAX_READ:
        whole = f"{len(data) // 1000} KB"
        text += f"\n[cut at {MAX_READ // 1000} KB of {whole}; the agent can read_file the rest]"
    return text


def _tree(rels: list[str]) -> list[str]:
    """Paths as an indented tree, each folder named once."""
    lines = []
    shown = set()
    for rel in rels:
        parts = rel.split("/")
        for depth in range(len(parts) - 1):
            folder = "/".join(parts[: depth + 1])
            if folder not in shown:
                shown.add(folder)
                lines.append("  " * depth + parts[depth] + "/")
        lines.append("  " * (len(parts) - 1) + parts[-1])
    return lines


def _top(rel: str) -> str:
    """The top folder a listed path is in (`./` for a file at the top)."""
    if "/" not in rel:
        return "./"
    return rel.split("/", 1)[0] + "/"


def _first(rels: Iterator[str]) -> tuple[list[str], Counter]:
    """The MAX_LINES first names in order, and the others counted by top folder: sorted in batches,
    so that a tree of any size is never held whole."""
    shown = []
    rest = Counter()
    for rel in rels:
        rest[_top(rel)] += 1
        shown.append(rel)
        if len(shown) >= 4 * MAX_LINES:
            shown = sorted(shown)[:MAX_LINES]
    shown = sorted(shown)[:MAX_LINES]
    rest.subtract(_top(rel) for rel in shown)
    return shown, +rest


def _counted(folders: Counter) -> str:
    """The files past the listing, counted by top folder:
    a huge tree is summed up, not cut unsaid."""
    if not folders:
        return ""
    top = ", ".join(f"{name} {n}" for name, n in folders.most_common(20))
    more = ""
    if len(folders) > 20:
        more = f"; {len(folders) - 20} more folders"
    total = sum(folders.values())
    return f"\n[{total} more files not shown, by folder: {top}{more}; list a subfolder]"


def _blocks(f) -> Iterator[bytes]:
    """A file in blocks of about BLOCK bytes that end where a line ends
    (a line over LINE_CAP is cut)."""
    while block := f.read(BLOCK):
        if not block.endswith(b"\n"):
            block += f.readline(LINE_CAP)
        yield block


class _Window:
    """The lines of a file around the part shown, gathered while it is read in chunks: a file of
    any size costs a bounded buffer (each line cut, a byte budget for the part shown)."""

    def __init__(self, offset: int, limit: int):
        self.offset = offset
        self.end = offset + limit  # lines shown: offset to end - 1
        self.first = max(0, offset - CONTEXT)
        self.lines = []
        self.size = 0

    def read(self, f) -> int:
        """Read the file through; the number of lines it has (counted, never held)."""
        count = 0
        line = b""
        while chunk := f.read(1 << 16):
            n = chunk.count(b"\n")
            if count + n >= self.first and count < self.end + CONTEXT:
                ended = chunk.split(b"\n")[:-1]
                if ended:
                    ended[0] = line + ended[0]  # the line the last chunk began
                for k, piece in enumerate(ended):
                    self.take(count + k, piece)
            line = _carried(line, chunk)
            count += n
        if line:
            self.take(count, line)
        return count + bool(line)

    def take(self, n: int, piece: bytes) -> None:
        """Keep line n if it is shown or beside the part shown."""
        shown = self.offset <= n < self.end
        if shown:
            self.size += len(piece) + 8
        if shown and n > self.offset and self.size > 4 * MAX_READ:
            self.end = n  # more than one reply can show: the rest is read on
        cut = 4096  # a line beside the part shown is only context
        if self.offset <= n < self.end:
            cut = LINE_CAP
        if self.first <= n < self.end + CONTEXT:
            self.lines.append(piece.removesuffix(b"\r")[:cut])

    def utf8(self) -> bool:
        """Whether the lines read are UTF-8 text (else they are shown with � for what is not)."""
        try:
            b"\n".join(self.lines).decode("utf-8")
        except UnicodeDecodeError:
            return False
        return True

    def shown(self, redact) -> list[str]:
        """The lines to show, redacted together with their neighbours."""
        text = b"\n".join(self.lines).decode("utf-8", errors="replace")
        lines = redact(text).split("\n")
        return lines[self.offset - self.first : self.end - self.first]


def _bytes(path: Path) -> bytes | None:
    """A file's bytes, or None when there is none."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _version(path: Path) -> tuple[int, int]:
    """What changes when a file's content does: its modification time and size."""
    info = path.stat()
    return info.st_mtime_ns, info.st_size


def _carried(line: bytes, chunk: bytes) -> bytes:
    """The line still being read after chunk: grown by it when it ends no line, else what follows
    its last line end; kept up to LINE_CAP bytes (a line of a gigabyte is never copied whole)."""
    if b"\n" in chunk:
        return chunk.rpartition(b"\n")[2][:LINE_CAP]
    if len(line) >= LINE_CAP:
        return line
    return (line + chunk)[:LINE_CAP]


def _numbered(lines: list[str], offset: int, total: int) -> str:
    """Lines with their numbers, up to 50 KB, and how to read on."""
    out = []
    size = 0
    end = offset + len(lines)
    for i, line in enumerate(lines, offset):
        size += len(line) + 8
        if size > MAX_READ and out:
            end = i
            break
        if size > MAX_READ:  # a single line longer than that is shown cut: the model is never stuck
            out.append(f"{i + 1:6}\t{line[:MAX_READ]} [line cut at {MAX_READ:,} characters]")
            end = i + 1
            break
        out.append(f"{i + 1:6}\t{line}")
    why = "more lines follow"
    if size > MAX_READ:
        why = "truncated at 50 KB"
    if end < total:
        out.append(
            f"[{why}: lines {offset + 1}-{end} of {total} shown; read_file offset={end} reads on]"
        )
    return "\n".join(out)


def _bound(name: str, sig: inspect.Signature, args: dict) -> None:
    """ValueError unless args bind to the signature: none missing, none unknown, no empty path."""
    required = [p.name for p in sig.parameters.values() if p.default is p.empty]
    missing = [key for key in required if key not in args]
    if missing:
        raise ValueError(f"{name} is missing required argument(s): {', '.join(missing)}")
    unknown = [key for key in args if key not in sig.parameters]
    if unknown:
        takes = ", ".join(sig.parameters)
        raise ValueError(f"{name} has no argument(s) {', '.join(unknown)}; it takes {takes}")
    if args.get("path") == "":
        raise ValueError(
            f"the path for {name} is empty; name a file or folder, e.g. README.md or ."
        )


def _tolerant(name: str, sig: inspect.Signature, args: dict) -> dict:
    """The arguments as a tolerant reader takes them: a null is the parameter's default (a required
    one is then missing); a value of another type is converted where that is unambiguous (7 for a
    string, "30" or 30.0 for an integer), else refused, naming what to send."""
    typed = {}
    for key, value in args.items():
        if value is None:
            continue
        param = sig.parameters.get(key)
        if param is None:  # kept as it is, for the error that names it
            typed[key] = value
        else:
            typed[key] = _converted(name, key, value, param.annotation)
    return typed


def _converted(name: str, key: str, value, want):
    """value as the type the parameter wants (want None: no such parameter, kept for its error)."""
    whole = isinstance(value, float) and value.is_integer()
    if want is None or (isinstance(value, want) and not isinstance(value, bool)):
        return value
    if want is str and isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if want is int and whole:
        return int(value)
    if want is int and isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
        return int(value)
    got = json.dumps(value)[:40]
    raise ValueError(f"argument {key!r} of {name} must be {TYPE_NAMES[want]}, not {got}")


def _text(data: bytes) -> str | None:
    """A file's text with its lines ending in \\n (a CRLF file's too); None when it is not UTF-8."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if _crlf(data):
        return text.replace("\r\n", "\n")
    return text


def _crlf(data: bytes) -> bool:
    """Some line ends in CRLF: the text is edited with LF endings, and _like puts each back."""
    return b"\r\n" in data


def _like(old: bytes, text: str) -> bytes:
    """New text in the line endings of the file it replaces: a line kept keeps its own ending."""
    text = text.replace("\r\n", "\n")
    if not _crlf(old):
        return text.encode()
    if old.count(b"\n") == old.count(b"\r\n"):
        return text.replace("\n", "\r\n").encode()
    lines = text.split("\n")
    crlf = _endings(old.decode(errors="surrogateescape").split("\n"), lines)
    ended = [line + "\r" * crlf[n] + "\n" for n, line in enumerate(lines[:-1])]
    return ("".join(ended) + lines[-1]).encode()


def _endings(old: list[str], new: list[str]) -> list[bool]:
    """Per new line, whether it ends in CRLF: a line found in old as it ends there, a line written
    in place of others as the first of them, an added line as the line above it."""
    plain = [line.removesuffix("\r") for line in old]
    crlf = [line.endswith("\r") for line in old]
    head = _common(plain, new)  # an edit keeps most lines: only the middle is matched
    room = min(len(plain), len(new)) - head
    tail = min(room, _common(plain[::-1], new[::-1]))
    out = crlf[:head]
    middle = difflib.SequenceMatcher(
        None, plain[head : len(plain) - tail], new[head : len(new) - tail]
    )
    for tag, i1, i2, j1, j2 in middle.get_opcodes():
        for j in range(j2 - j1):
            if tag == "equal":
                out.append(crlf[head + i1 + j])
            else:  # the line it replaces, or the line above where it is added
                out.append(crlf[max(0, head + min(i1 + j, i2 - 1))])
    return out + crlf[len(plain) - tail :]


def _common(a: list[str], b: list[str]) -> int:
    """How many lines the two start with alike."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _found_once(view: redact.Masked, old_str: str, path: str, known: str) -> int:
    """Where old_str is in the file as the model sees it; ValueError unless it is there once, saying
    where it is, or what to do: known is "read" (the model has the file: what is most like it),
    "unread" or "changed" (it has not read it as it is: read it, or here is the whole of a small
    one) or "outside" (a place outside the project: nothing, no line reaches the model unasked)."""
    found = view.find(old_str)
    if len(found) != 1 and known == "outside":
        raise ValueError(f"old_str is not found exactly once in {path}")
    if len(found) > 1:
        raise ValueError(_ambiguous(view.shown, found, path))
    if not found and known in ("unread", "changed"):
        raise ValueError(_unread(view.shown, path, known))
    if not found:
        raise ValueError(f"old_str not found in {path}. " + _closest(view.shown, old_str))
    return found[0]


def _whole(text: str) -> str:
    """A small file's lines, numbered as read_file shows them."""
    return "\n".join(f"{n:6}\t{line}" for n, line in enumerate(text.splitlines(), 1))


def _unread(shown: str, path: str, known: str) -> str:
    """old_str is not in a file the model has not read (or not since it changed): the whole file
    when it is small, else the advice to read it (a closest match in a file it never saw leads it
    to guess again)."""
    said = f"old_str not found in {path}, which you have not read in this session"
    if known == "changed":
        said = f"old_str not found in {path}, which changed since you last read it"
    if len(shown) > SMALL_FILE:
        return f"{said}: read_file it, then copy old_str exactly from what it shows."
    numbered = _whole(shown)
    hint = "Copy old_str exactly from it."
    if "[REDACTED]" in shown:
        hint = KEEP
    return f"{said} (read_file shows it). It holds:\n{numbered}\n{hint}"


def _entry(entry: os.DirEntry) -> str:
    """A folder's entry as a listing names it: a folder with its slash."""
    if entry.is_dir():
        return entry.name + "/"
    return entry.name


def _nearest(root: Path, p: Path, ignore: list[str]) -> list[str]:
    """The real paths nearest a missing one: files of its name elsewhere in the project, and what
    the nearest folder that exists holds."""
    said = []
    rel = shown(root, p)
    alike = []
    for found in project_files(root, ignore):
        if os.path.basename(found) == p.name:
            alike.append(shown(root, found))
        if len(alike) == 5:
            break
    if alike:
        said.append(f"A file of that name is at: {', '.join(alike)}.")
    folder = p.parent
    while not folder.is_dir():
        folder = folder.parent
    names = sorted(map(_entry, os.scandir(folder)))[:30]
    where = f"{shown(root, folder)}/"
    if folder == root:
        where = "The project's top folder"
    if Path(rel).parent != Path(".") and folder != p.parent:
        said.append(f"{shown(root, p.parent)}/ does not exist either.")
    said.append(f"{where} holds: {', '.join(names) or 'nothing'}.")
    return said


def _ambiguous(shown: str, found: list[int], path: str) -> str:
    """old_str occurs more than once: where, each line as read_file shows it (the first ten), so
    the model can copy more of one to make it unique."""
    lines = shown.splitlines()
    numbers = sorted({shown.count("\n", 0, at) + 1 for at in found})
    places = [f"{n:6}\t{lines[n - 1][:200]}" for n in numbers[:10]]
    if len(numbers) > 10:
        places.append(f"[… and {len(numbers) - 10} more lines]")
    return (
        f"old_str occurs {len(found)} times in {path} "
        f"(lines {', '.join(map(str, numbers))}); include more of its line or the lines around "
        "it to make it unique, or edit each place in turn:\n" + "\n".join(places)
    )


def _closest(content: str, old: str) -> str:
    """The file region most like old as the model sees it,
    with line numbers and a hint that works."""
    lines = content.splitlines()
    k = max(1, len(old.splitlines()))
    if not lines:
        return "The file is empty."
    starts = max(1, len(lines) - k + 1)
    cost = starts * min(len(content), len(old) * 2)  # characters compared, about
    if cost <= CLOSEST_BUDGET:  # small enough to compare character by character
        best = _by_characters(lines, old, k)
    else:
        best = _by_lines(lines, old, k)
    end = min(len(lines), best + k)
    shown = range(best, min(end, best + MAX_LINES))
    region = "\n".join(f"{n + 1:6}\t{lines[n]}" for n in shown)
    if end > shown.stop:
        region += f"\n[… {end - shown.stop} more lines]"
    hint = "Copy old_str exactly from the file."
    if "[REDACTED]" in region:
        hint = KEEP
    return f"The closest region (lines {best + 1}-{end}) is:\n{region}\n{hint}"


def _by_characters(lines: list[str], old: str, k: int) -> int:
    """The first line of the k lines whose characters are most like old's."""
    matcher = difflib.SequenceMatcher(None)
    matcher.set_seq2(old)  # its character counts are made once

    def like(i: int) -> float:
        matcher.set_seq1("\n".join(lines[i : i + k]))
        return matcher.quick_ratio()

    return max(range(max(1, len(lines) - k + 1)), key=like)


def _by_lines(lines: list[str], old: str, k: int) -> int:
    """The first line of the k lines holding most of old's lines (spacing aside): one pass, whatever
    the sizes."""
    wanted = {" ".join(line.split()) for line in old.splitlines()}
    hits = [" ".join(line.split()) in wanted for line in lines]
    score = best_score = sum(hits[:k])
    best = 0
    for i in range(1, len(lines) - k + 1):
        score += hits[i + k - 1] - hits[i - 1]
        if (score, hits[i]) > (best_score, hits[best]):  # a tie: the region that starts alike
            best = i
            best_score = score
    return best
