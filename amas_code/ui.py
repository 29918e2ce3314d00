"""Everything the user sees: answers on stdout; progress, tools and diffs on stderr; questions on the terminal."""

import contextlib
import difflib
import functools
import io
import os
import re
import select
import sys
import threading
import time

from rich.console import Console
from rich.text import Text

out = Console(highlight=False)  # the answer: what `amas "..." > file` keeps
console = Console(stderr=True, highlight=False)  # everything about the work
UNWRAPPED = (
    1 << 20
)  # the width of a file or pipe: lines as long as they are (a CI log wraps itself)
for _console in (out, console):
    if not _console.is_terminal:
        _console.width = UNWRAPPED
TTY = "/dev/tty"  # where questions go when stdin or stderr is not the terminal
INVISIBLE = re.compile(  # control, bidi, zero-width, fillers, variation selectors, tags
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u2028-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb\U000e0000-\U000e0fff"
    "\u0600-\u0605\u06dd\u070f\u0890\u0891\u08e2\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a]"  # and the rest of Unicode's format characters (Cf)
)
# letters and spaces that draw as nothing: a run of them can hide the rest of a command
BLANK = re.compile("[\u00a0\u115f\u1160\u2000-\u200a\u202f\u205f\u2800\u3000\u3164\uffa0]")
SHORT = 200  # characters of a command shown whole; a longer one is summarized
HEAD = 80  # characters of a summarized command shown before the summary


# what the screen must never show: the session's secrets, hidden by the function hiding() was
# given (it keeps lines); only this module reads it, inside the with-block of whoever runs a session
_HIDERS = [str]


@contextlib.contextmanager
def hiding(hide):
    """Inside: every text this module shows passes `hide` first (secrets as [REDACTED], lines kept)."""
    _HIDERS.append(hide)
    try:
        yield
    finally:
        _HIDERS.remove(hide)


def hidden(text: str) -> str:
    """Text as the screen may show it: the secrets of the session running now hidden."""
    return _HIDERS[-1](text)


def _shown(text: str) -> str:
    """Text from outside as the screen may show it: secrets hidden, control characters escaped."""
    return clean(hidden(text))


def clean(text: str) -> str:
    """Control, bidi and zero-width characters shown escaped, so text from outside cannot fake the screen."""
    return INVISIBLE.sub(lambda m: m[0].encode("unicode_escape").decode(), text)


def one_line(text: str) -> str:
    """Text escaped and on one line: blank lines cannot push what a command really runs off the screen."""
    text = BLANK.sub(lambda m: m[0].encode("unicode_escape").decode(), clean(text))
    return text.replace("\n", "\\n").replace("\t", "\\t")


def command_summary(line: str, programs: list[str] = ()) -> str:
    """A command as the person reads it: whole when short and plain, else its start, the programs
    it runs (as the shell grammar reads them: policy.programs) and how much more there is, so
    blank-drawing characters cannot hide part of it."""
    line = hidden(line)  # before it is cut: a cut could halve a secret
    plain = not BLANK.search(line) and not INVISIBLE.search(line)
    if len(line) <= HEAD or (len(line) <= SHORT and plain):  # whole: escaped, nothing can hide
        return one_line(line)
    head = one_line(line[:HEAD])[:HEAD]
    runs = ""
    if programs:
        shown = [one_line(p)[:40] for p in programs[:8]]
        runs = f"; runs {', '.join(shown)}"
    if len(programs) > 8:
        runs += " …"
    return f"{head} … (+{len(line) - HEAD:,} characters{runs})"


def row(*parts) -> None:
    """One line on the work console from parts (text, or (text, style)), each escaped and on one
    line: names from outside (skills, files, rules) cannot fake the screen."""
    pieces = [(p, "") if isinstance(p, str) else p for p in parts]
    pieces = [(one_line(hidden(text)), style) for text, style in pieces]
    console.print(Text.assemble(*pieces), overflow="fold")


def _say(mark: str, style: str, msg: str) -> None:
    # wrapped at words to the terminal (never to a file or pipe: see UNWRAPPED)
    console.print(Text.assemble((mark + " ", style), _shown(msg)), overflow="fold")


info = functools.partial(_say, "ℹ", "blue")
success = functools.partial(_say, "✓", "green")
warning = functools.partial(_say, "⚠", "yellow")
error = functools.partial(_say, "✗", "red")


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def show_call(name: str, target: str) -> None:
    """One line per tool call: what it is about, escaped, never interpreted as markup."""
    console.print(
        Text.assemble(("● ", "cyan"), (one_line(name), "bold"), " ", one_line(hidden(target))),
        overflow="fold",
    )


def show_result(text: str, lines: int = 3) -> None:
    """A short excerpt of a result: its first and last lines (errors and exit codes), or with lines=0 its first."""
    rows = [clean(r) for r in hidden(text).rstrip("\n").split("\n")]
    if not lines and len(rows) > 1:
        rows = [rows[0], f"… {plural(len(rows) - 1, 'more line')}"]
    elif len(rows) > 2 * lines + 1:
        rows = [*rows[:lines], f"… {plural(len(rows) - 2 * lines, 'more line')}", *rows[-lines:]]
    console.print(Text("\n".join(f"  │ {r}" for r in rows), style="dim"), overflow="fold")


def show_output(text: str) -> None:
    """A command's whole output, as the person who ran it wants it: escaped, secrets hidden."""
    console.print(Text(_shown(text)), overflow="fold")


def _lines(text: str) -> list[str]:
    return text.removesuffix("\n").split("\n") if text else []


def diff(old: str, new: str, path: str) -> Text:
    """A unified diff with every byte of every changed line visible (wrapped, escaped, never cropped) but secrets,
    hidden with their lines kept: a line whose secret changed shows changed, as [REDACTED]."""
    real = (_lines(old), _lines(new))
    shown = (_lines(hidden(old)), _lines(hidden(new)))
    # lines kept, as redact does
    real = real if list(map(len, real)) == list(map(len, shown)) else shown
    text = Text()
    for line in _unified(real, shown, path):
        style = (
            "bold"
            if line[:3] in ("---", "+++")
            else {"+": "green", "-": "red", "@": "cyan"}.get(line[:1], "")
        )
        text.append(clean(line.removesuffix("\r")) + "\n", style)
    return text if text else Text(f"(no changes to {path})\n")


def _matcher(old: list, new: list) -> difflib.SequenceMatcher:
    """A matcher of old and new lines that matched only what lies between the lines both ends share."""

    def same(a: list, b: list) -> int:
        pairs = enumerate(zip(a, b, strict=False))
        return next((i for i, (x, y) in pairs if x != y), min(len(a), len(b)))

    top = same(old, new)
    end = min(same(old[::-1], new[::-1]), len(old) - top, len(new) - top)
    matcher = difflib.SequenceMatcher(
        None, old[top : len(old) - end], new[top : len(new) - end], autojunk=False
    )
    middle = [
        (tag, i1 + top, i2 + top, j1 + top, j2 + top)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
    ]
    matcher.opcodes = [  # the cache get_opcodes() returns, which get_grouped_opcodes() groups
        ("equal", 0, top, 0, top),
        *middle,
        ("equal", len(old) - end, len(old), len(new) - end, len(new)),
    ]
    return matcher


def _unified(real: tuple, shown: tuple, path: str):
    """The unified diff of the real old and new lines, written with the shown ones. difflib.unified_diff without
    its autojunk: in a file of repeated lines (data, fixtures) that marks the repeated lines junk, and a one-line
    change is shown as the whole file removed and added. The lines both ends share are left out of the matching,
    which is quadratic in repeated lines (10,000 took 13 s)."""
    old, new = real
    old_shown, new_shown = shown
    matcher = _matcher(old, new)
    for n, group in enumerate(matcher.get_grouped_opcodes(2) if old != new else []):
        if n == 0 and path.startswith("/"):  # a place outside the project: its own path
            yield from (f"--- {path}", f"+++ {path}")
        elif n == 0:
            yield from (f"--- a/{path}", f"+++ b/{path}")
        _, a1, _, b1, _ = group[0]
        _, _, a2, _, b2 = group[-1]
        yield f"@@ -{_span(a1, a2)} +{_span(b1, b2)} @@"
        for tag, i1, i2, j1, j2 in group:
            yield from (f"{' ' if tag == 'equal' else '-'}{ln}" for ln in old_shown[i1:i2])
            yield from (f"+{ln}" for ln in new_shown[j1:j2] if tag != "equal")


def _span(start: int, stop: int) -> str:
    """A hunk's line range as unified diffs write it: 1-based start, ',length' unless 1; 0,0 for none."""
    length = stop - start
    return f"{start + 1}" if length == 1 else f"{start + (length > 0)},{length}"


def _terminal() -> tuple[Console, object] | None:
    """The console and input stream of the person at the terminal, or None when there is none."""
    if sys.stdin.isatty() and console.is_terminal:
        return console, None
    try:  # unbuffered: a terminal cannot seek, which a buffered text file opened "r+" needs
        tty = io.TextIOWrapper(open(TTY, "r+b", buffering=0), encoding="utf-8", line_buffering=True)  # noqa: SIM115
    except OSError:
        return None
    return Console(file=tty, highlight=False), tty


def can_ask() -> bool:
    """Whether a person at a terminal can be asked something."""
    where = _terminal()
    if where and where[1]:
        where[1].close()
    return where is not None


ANSWERS = {"y": "y", "yes": "y", "n": "n", "no": "n", "a": "a", "always": "a"}
LABELS = {"y": "[y]es", "n": "[n]o", "a": "[a]lways"}
INSTEAD = ", or say what instead"  # words other than an answer decline, for the model


def question(
    question: str, choices: str = "yna", detail: Text | None = None, always: str = ""
) -> tuple[str, str]:
    """The person's choice, and their words when they typed something other than an answer (which
    declines: the words are feedback for the model); without a terminal, 'n' and a warning."""
    prompt = _prompt(question, choices)
    if always and "a" in choices:  # on its own line: the question itself fits one
        detail = _with_line(detail, f"[a]lways: {one_line(hidden(always))}")
    return _answer(question, choices, detail, prompt.append(INSTEAD + ": "))


def _with_line(detail, line: str) -> Text:
    """What a question shows before it, and one dim line more."""
    shown = Text(_shown(detail)) if isinstance(detail, str) else (detail or Text())
    shown = shown.copy()
    if shown.plain and not shown.plain.endswith("\n"):
        shown.append("\n")
    return shown.append(line, "dim")


def ask(question: str, choices: str = "yna", detail: Text | None = None) -> str:
    """One of choices from the person at the terminal (any other text declines)."""
    return _answer(question, choices, detail, _prompt(question, choices).append(": "))[0]


def _prompt(question: str, choices: str) -> Text:
    labels = [LABELS[c] for c in choices]
    return Text.assemble((one_line(hidden(question)), "bold"), " ", "/".join(labels))


def _answer(question: str, choices: str, detail, prompt: Text) -> tuple[str, str]:
    """Show the detail, drop what was typed ahead, read a fresh answer."""
    con, stream = _terminal() or (None, None)
    _show_detail(con or console, detail)
    if con is None:
        always = " (run with --yes to accept)" * ("a" in choices)
        warning(f"{question} declined: no terminal to ask on{always}")
        return "n", ""
    try:
        with _TYPED.paused():
            _drop_typed_ahead(stream)
            return _read_answer(con, stream, prompt, choices)
    finally:
        if stream:
            stream.close()


KEYS = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1bO.|\x1b.|[\x00-\x1f\x7f]|[^\x00-\x1f\x7f\x1b]+")


class Typed:
    """Lines typed while a turn runs: read without echo, shown dimmed under the live area, kept
    for after the turn (Enter queues a line; Backspace on an empty line takes the last one back
    to edit; Esc clears the line). Reading pauses while a question is asked: typed ahead, a line
    never answers one."""

    def __init__(self):
        self.lines = []  # queued: Enter was pressed
        self.partial = ""  # being typed
        self.lock = threading.Lock()  # held while reading; a question takes it to pause
        self.saved = None  # the terminal's mode before, restored after
        self.on = False

    def view(self) -> Text:
        """What was typed, for the bottom of a live area (empty when nothing was)."""
        text = Text(style="dim")
        for line in self.lines:
            text.append(f"\n  queued › {one_line(line)}")
        if self.partial:
            text.append(f"\n  › {one_line(self.partial)}▏")
        if self.lines:
            text.append("\n  sent when this turn ends (Backspace takes it back to edit)")
        return text

    def keys(self, data: str) -> None:
        """Typed keys: letters, Enter, Backspace, Esc and Ctrl+U (arrows and the rest ignored)."""
        for key in KEYS.findall(data):
            if key in ("\r", "\n") and self.partial.strip():
                self.lines.append(self.partial.strip())
                self.partial = ""
            elif key in ("\x7f", "\x08") and not self.partial and self.lines:
                self.partial = self.lines.pop()
            elif key in ("\x7f", "\x08"):
                self.partial = self.partial[:-1]
            elif key in ("\x1b", "\x15"):
                self.partial = ""
            elif key[0] >= " " and key[0] != "\x7f":
                self.partial += key

    def start(self) -> None:
        """Read the terminal without echo until stop() (nothing when stdin is not a terminal)."""
        import termios
        import tty

        if not sys.stdin.isatty() or self.on:
            return
        self.saved = termios.tcgetattr(sys.stdin.fileno())
        tty.setcbreak(sys.stdin.fileno(), termios.TCSANOW)  # Ctrl+C still interrupts
        self.on = True
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        fd = sys.stdin.fileno()
        while self.on:
            with self.lock:
                ready = self.on and select.select([fd], [], [], 0.05)[0]
                data = os.read(fd, 1024) if ready else b""
            self.keys(data.decode(errors="ignore"))
            time.sleep(0.005)  # a question waiting for the lock gets it

    def stop(self) -> tuple[list[str], str]:
        """Stop reading, the terminal as it was; the queued lines and the line being typed."""
        import termios

        if self.on:
            with self.lock:
                self.on = False
                termios.tcsetattr(sys.stdin.fileno(), termios.TCSANOW, self.saved)
        taken = (self.lines, self.partial)
        self.lines = []
        self.partial = ""
        return taken

    @contextlib.contextmanager
    def paused(self):
        """The terminal as it was, for a question; reading again after it."""
        import termios
        import tty

        if not self.on:
            yield
            return
        with self.lock:
            termios.tcsetattr(sys.stdin.fileno(), termios.TCSANOW, self.saved)
            try:
                yield
            finally:
                tty.setcbreak(sys.stdin.fileno(), termios.TCSANOW)


_TYPED = Typed()  # one terminal: read only inside typed_meanwhile(), shown by the live areas


@contextlib.contextmanager
def typed_meanwhile():
    """Inside: lines the person types are read without echo and shown queued under the live area.
    Yields a list that holds, after the block, the lines typed and the line being typed."""
    got = []
    _TYPED.start()
    try:
        yield got
    finally:
        got.extend(_TYPED.stop())


def _read_answer(con: Console, stream, prompt: Text, choices: str) -> tuple[str, str]:
    """y, n or a from their words; other words decline and are returned; an empty line asks again."""
    try:
        while True:
            raw = con.input(prompt, stream=stream)
            if stream and not raw:  # end of input at the terminal: no
                return "n", ""
            words = raw.strip()
            choice = ANSWERS.get(words.lower(), "")
            if choice and choice in choices:
                return choice, ""
            if words and not choice:
                return "n", words
    except EOFError:
        return "n", ""


def _drop_typed_ahead(stream) -> None:
    """Text typed while the agent worked was meant for something else, never as this answer."""
    import termios

    try:
        termios.tcflush((stream or sys.stdin).fileno(), termios.TCIFLUSH)
    except (termios.error, OSError, ValueError):
        pass  # not a terminal: nothing was typed ahead


def _show_detail(con: Console, detail) -> None:
    """What the question is about (a diff); when taller than the screen, its summary after it."""
    if detail is None:
        return
    detail = Text(_shown(detail)) if isinstance(detail, str) else detail
    con.print(detail, overflow="fold")
    tall = len(detail.wrap(con, con.width, overflow="fold")) > con.height
    if tall and re.search(
        r"^\+\+\+ (b/|/)", detail.plain, re.M
    ):  # beside the question, where the person looks
        con.print(Text.assemble(("ℹ ", "blue"), diff_summary(detail.plain)))


def diff_summary(diff_text: str) -> str:
    """Files and lines added and removed in a unified diff, in one line."""
    lines = diff_text.split("\n")
    files = sum(line.startswith(("+++ b/", "+++ /")) for line in lines)
    added = sum(line.startswith("+") for line in lines) - files
    removed = sum(line.startswith("-") for line in lines) - files
    return f"{plural(files, 'file')} changed: {plural(added, 'line')} added, {removed} removed"


def show_answer(text: str) -> None:
    """The model's answer as plain text: names like __init__.py and code keep every character."""
    if text.strip():
        out.print(Text(_shown(text.strip("\n"))), soft_wrap=True)


def warm() -> None:
    """Import what a reply's spinner and Markdown need. The REPL's preload does it before litellm's
    import (which imports rich.live and pygments too): a turn's own import of them waits for the
    preload's, and a Ctrl+C in that wait may leave an import lock held (a next turn hung once)."""
    import rich.live  # noqa: F401
    import rich.markdown  # noqa: F401
    import rich.spinner  # noqa: F401


class Stream:
    """A reply while it streams: a spinner, then on a terminal the answer rendered as Markdown, each
    settled line printed once above a live tail (the way Aider's MarkdownStream does it)."""

    TAIL = 6  # rendered lines kept live: the end of a growing answer may still change

    def __init__(self, live: bool = True, visible=None):
        self.text = ""
        self.live = None
        self.shown = 0
        self.due = 0.0
        self.current = None  # the answer's live tail, once there is one
        self.pieces = 0  # chunks received: about a token each
        self.visible = visible or str
        self.answered = False
        self.markdown = out.is_terminal  # else plain text at the end, as a pipe wants it
        self.screen = out if self.markdown else console
        self.show_live = live and self.screen.is_terminal

    def __enter__(self):
        if self.show_live:
            from rich.live import Live
            from rich.spinner import Spinner

            self.began = time.monotonic()
            self.spinner = Spinner("dots", "thinking…")
            self.live = Live(
                console=self.screen,
                transient=True,
                refresh_per_second=8,
                get_renderable=self._view,
            )
            self.live.start()
        if self.live and self.markdown:  # loaded while the model thinks, not in the first draw
            from rich.markdown import Markdown  # noqa: F401
        return self

    def __call__(self, chunk: str) -> None:
        self.text += chunk
        self.pieces += 1
        if self.live and time.monotonic() >= self.due:
            if self.markdown:
                self._draw(final=False)
            else:
                self._peek()

    def show(self, answer: str) -> None:
        """The whole answer, once: the rest of its rendered lines, or as plain text."""
        self.text = answer
        self.answered = True
        if self.markdown:
            self._draw(final=True)
        else:
            show_answer(answer)

    def __exit__(self, *exc) -> None:
        if self.markdown and self.text and not self.answered:  # stopped: keep what came
            self._draw(final=True)
        if self.live:
            self.live.stop()

    def _view(self):
        """The live area: the spinner or the answer's live tail, and what was typed meanwhile."""
        from rich.console import Group

        parts = [self.current, self._status()] if self.current else [self._status()]
        return Group(*parts, _TYPED.view()) if _TYPED.lines or _TYPED.partial else Group(*parts)

    def _status(self):
        """The spinner's line: how long since the request, tokens so far, how to stop."""
        took = f"{time.monotonic() - self.began:.0f} s"
        got = f" · {plural(self.pieces, 'token')}" if self.pieces else ""
        doing = "answering…" if self.pieces else "thinking…"
        self.spinner.update(text=Text(f"{doing} ({took}{got} · Ctrl+C to interrupt)"))
        return self.spinner

    def _peek(self) -> None:
        """With stdout elsewhere: the last lines of the text, plain, until the answer is done."""
        shown = hidden(self.visible(self.text[-4000:]))  # O(1) a token
        self.current = Text(clean("\n".join(shown.splitlines()[-12:])))

    def _draw(self, final: bool) -> None:
        """Print the lines that settled since the last draw; the rest stays live."""
        began = time.monotonic()
        lines = _markdown_lines(self.screen, self.visible(self.text))
        settled = len(lines) if final else max(len(lines) - self.TAIL, self.shown)
        with self.live._lock if self.live else contextlib.nullcontext():
            # rich's refresh thread draws under this lock; a print takes it only to place the
            # cursor, and a refresh between that and the print's text showed lines twice
            if settled > self.shown:
                # counted first: a Ctrl+C inside the print must not print these lines again
                start = self.shown
                self.shown = settled
                self.screen.print(_segment_lines(lines[start:settled]))
            if self.live and lines:
                self.current = _segment_lines(lines[settled:])
        spent = time.monotonic() - began  # a long answer renders slower: draw it less often
        self.due = time.monotonic() + min(max(spent * 10, 0.05), 1)


@functools.cache
def _steady():
    """rich's Markdown with numbered lists indented for two-digit numbers from the first item: a
    streamed list printed its first items narrower than those after its ninth."""
    from rich.markdown import ListItem, Markdown

    class SteadyItem(ListItem):
        def render_number(self, console, options, number, last_number):
            return super().render_number(console, options, number, max(last_number, 10))

    class SteadyMarkdown(Markdown):
        elements = {**Markdown.elements, "list_item_open": SteadyItem}

    return SteadyMarkdown


def visible_links(text: str):
    """Markdown whose links show their targets, `text (url)`: a terminal hyperlink (OSC 8) shows
    only its text, and `[docs](https://evil.example)` would hide where it leads."""
    return _steady()(text, hyperlinks=False)


# letters of these scripts are written together in one name (Japanese, Korean)
SCRIPTS = {"HIRAGANA": "CJK", "KATAKANA": "CJK", "HANGUL": "CJK", "FULLWIDTH": "LATIN"}


def host(name: str) -> str:
    """A host name as the person should read it: one that mixes scripts (a Cyrillic а in
    api.github.com) as its punycode, which shows it is not the name it looks like."""
    import unicodedata

    if name.isascii():
        return name
    scripts = set()
    for letter in filter(str.isalpha, name):
        script = unicodedata.name(letter, "?").split(" ")[0]
        scripts.add(SCRIPTS.get(script, script))
    if "CJK" in scripts:  # Chinese, Japanese and Korean names are written with Latin too
        scripts.discard("LATIN")
    if len(scripts) < 2:
        return name
    try:
        return name.encode("idna").decode("ascii")
    except UnicodeError:  # not a name IDNA can write (too long, a forbidden character)
        return name.encode("unicode_escape").decode("ascii")


def _segment_lines(lines: list):
    from rich.segment import SegmentLines

    return SegmentLines(lines, new_lines=True)


def _markdown_lines(con: Console, text: str) -> list:
    """Markdown rendered into lines of the console's width (rich.markdown loads on first use)."""
    if not text.strip():
        return []
    markdown = visible_links(keep_names(_shown(text.strip("\n"))))
    return con.render_lines(markdown, con.options, pad=False)


FENCE = re.compile(r" {0,3}(```|~~~)")
NAMES = re.compile(r"(`+).*?\1|<[^<>\s]+>|[\w.]*_[\w.]*")  # code spans, autolinks, words with _
INNER = re.compile(r"[^\W_]_+[^\W_]|__[^\W_]")  # an underscore inside a word, or a dunder's


def keep_names(markdown: str) -> str:
    """Markdown whose names keep their underscores (__init__.py, snake_case): Markdown reads
    `__init__` as bold, so those underscores are escaped, outside code, where escapes show."""
    lines = []
    fenced = False
    for line in markdown.split("\n"):
        fence = FENCE.match(line)
        fenced = fenced != bool(fence)
        lines.append(line if fenced or fence else NAMES.sub(_escape_name, line))
    return "\n".join(lines)


def _escape_name(match: re.Match) -> str:
    word = match[0]
    if word[0] in "`<" or not INNER.search(word):
        return word  # code, a link, or _emphasis_
    return word.replace("_", "\\_")


class Tail:
    """While a command runs: its last lines and the time so far, live on a terminal (silent
    elsewhere), then one line saying how it went."""

    LINES = 5  # lines of output kept on screen
    WIDE = 2000  # characters kept of a line that never ends

    def __init__(self, title: str):
        self.title = one_line(hidden(title))
        self.lines = [""]
        self.count = 0
        self.live = None

    def __enter__(self):
        self.start = time.monotonic()
        if console.is_terminal:
            from rich.live import Live

            self.live = Live(console=console, transient=True, get_renderable=self._view)
            self.live.start()
        return self

    def feed(self, chunk: str) -> None:
        """More output: the partial last line grows, whole lines scroll."""
        chunk = chunk.replace("\r\n", "\n").replace("\r", "\n")
        text = self.lines[-1] + chunk
        parts = text.split("\n")
        self.count += len(parts) - 1
        self.lines = [*self.lines[:-1], *parts][-(self.LINES + 1) :]
        self.lines[-1] = self.lines[-1][-self.WIDE :]

    def _view(self) -> Text:
        # hidden together: a chunk may split a secret
        lines = hidden("\n".join(self.lines)).split("\n")
        shown = [line for line in lines if line][-self.LINES :]
        text = Text(f"  {self.title} ({time.monotonic() - self.start:.0f} s)", "dim")
        for line in shown:
            text.append(f"\n  │ {clean(line)[: max(console.width - 6, 10)]}", "dim")
        return text + _TYPED.view()

    def __exit__(self, kind, *exc) -> None:
        took = time.monotonic() - self.start
        if not self.live:
            return
        self.live.stop()
        lines = plural(self.count + bool(self.lines[-1]), "line")
        stopped = kind is not None and issubclass(kind, KeyboardInterrupt)  # Ctrl+C, or Stopped
        how = ", stopped" if stopped else ""
        if stopped:  # what was shown stays
            shown = [line for line in hidden("\n".join(self.lines)).split("\n") if line]
            for line in shown[-self.LINES :]:
                console.print(Text(f"  │ {clean(line)}", "dim"), overflow="fold")
        console.print(Text(f"  {self.title}: {lines} in {took:.1f} s{how}", "dim"), overflow="fold")
