"""Everything the user sees: answers on stdout; progress, tools and diffs on stderr; questions on the terminal."""

import difflib
import functools
import io
import re
import sys

from rich.console import Console
from rich.text import Text

out = Console(highlight=False)  # the answer: what `amas "..." > file` keeps
console = Console(stderr=True, highlight=False)  # everything about the work
TTY = "/dev/tty"  # where questions go when stdin or stderr is not the terminal
INVISIBLE = re.compile(  # control, bidi, zero-width, fillers, variation selectors, tags
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u2028-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb\U000e0000-\U000e0fff"
    "\u0600-\u0605\u06dd\u070f\u0890\u0891\u08e2\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a]"  # and the rest of Unicode's format characters (Cf)
)


def clean(text: str) -> str:
    """Control, bidi and zero-width characters shown escaped, so text from outside cannot fake the screen."""
    return INVISIBLE.sub(lambda m: m[0].encode("unicode_escape").decode(), text)


def one_line(text: str) -> str:
    """Text escaped and on one line: blank lines cannot push what a command really runs off the screen."""
    return clean(text).replace("\n", "\\n").replace("\t", "\\t")


def _say(mark: str, style: str, msg: str) -> None:
    console.print(Text.assemble((mark + " ", style), clean(msg)), soft_wrap=True)


info, success = functools.partial(_say, "ℹ", "blue"), functools.partial(_say, "✓", "green")
warning, error = functools.partial(_say, "⚠", "yellow"), functools.partial(_say, "✗", "red")


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def show_call(name: str, target: str) -> None:
    """One line per tool call: what it is about, escaped, never interpreted as markup."""
    console.print(
        Text.assemble(("● ", "cyan"), (name, "bold"), " ", one_line(target)), soft_wrap=True
    )


def show_result(text: str, lines: int = 3) -> None:
    """A short excerpt of a result: its first and last lines (errors and exit codes), or with lines=0 its first."""
    rows = [clean(r) for r in text.rstrip("\n").split("\n")]
    if not lines and len(rows) > 1:
        rows = [rows[0], f"… {plural(len(rows) - 1, 'more line')}"]
    elif len(rows) > 2 * lines + 1:
        rows = [*rows[:lines], f"… {plural(len(rows) - 2 * lines, 'more line')}", *rows[-lines:]]
    console.print(Text("\n".join(f"  │ {r}" for r in rows), style="dim"), overflow="fold")


def diff(old: str, new: str, path: str, hide=str) -> Text:
    """A unified diff with every byte of every changed line visible (wrapped, escaped, never cropped) but secrets:
    `hide` redacts, keeping lines, so a line whose secret changed shows changed, as [REDACTED]."""
    lines = lambda t: t.removesuffix("\n").split("\n") if t else []  # noqa: E731
    real, shown = (lines(old), lines(new)), (lines(hide(old)), lines(hide(new)))
    real = (
        real if list(map(len, real)) == list(map(len, shown)) else shown
    )  # lines kept, as redact does
    text = Text()
    for line in _unified(real, shown, path):
        style = (
            "bold"
            if line[:3] in ("---", "+++")
            else {"+": "green", "-": "red", "@": "cyan"}.get(line[:1], "")
        )
        text.append(clean(line.removesuffix("\r")) + "\n", style)
    return text if text else Text(f"(no changes to {path})\n")


def _unified(real: tuple, shown: tuple, path: str):
    """The unified diff of the real old and new lines, written with the shown ones. difflib.unified_diff without
    its autojunk: in a file of repeated lines (data, fixtures) that marks the repeated lines junk, and a one-line
    change is shown as the whole file removed and added. The lines both ends share are left out of the matching,
    which is quadratic in repeated lines (10,000 took 13 s)."""
    (old, new), (old_shown, new_shown) = real, shown

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
    matcher.opcodes = [  # the cache get_opcodes() returns, which get_grouped_opcodes() groups with context
        ("equal", 0, top, 0, top),
        *middle,
        ("equal", len(old) - end, len(old), len(new) - end, len(new)),
    ]
    for n, group in enumerate(matcher.get_grouped_opcodes(2) if old != new else []):
        if n == 0:
            yield from (f"--- a/{path}", f"+++ b/{path}")
        (_, a1, _, b1, _), (_, _, a2, _, b2) = group[0], group[-1]
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


def ask(question: str, choices: str = "yna", detail: Text | None = None) -> str:
    """One of choices from the person at the terminal, after what the question needs (a diff);
    without a terminal, 'n' and a warning saying so."""
    detail = Text(clean(detail)) if isinstance(detail, str) else detail
    con, stream = _terminal() or (None, None)
    if detail is not None:
        (con or console).print(detail, overflow="fold")
    if con is None:
        warning(
            f"{question} declined: no terminal to ask on{' (run with --yes to accept)' * ('a' in choices)}"
        )
        return "n"
    labels = {"y": "[y]es", "n": "[n]o", "a": "[a]lways"}
    prompt = Text.assemble(
        (one_line(question), "bold"), " ", "/".join(labels[c] for c in choices), ": "
    )
    try:
        while True:
            raw = con.input(prompt, stream=stream)
            if (answer := raw.strip().lower()[:1]) and answer in choices:
                return answer
            if stream and not raw:  # end of input at the terminal: no
                return "n"
    except EOFError:
        return "n"
    finally:
        if stream:
            stream.close()


def show_answer(text: str) -> None:
    """The model's answer as plain text: names like __init__.py and code keep every character."""
    if text.strip():
        out.print(Text(clean(text.strip("\n"))), soft_wrap=True)


class Stream:
    """While a reply streams: a spinner, then its last lines (tool-call text hidden); the caller shows the end."""

    TAIL = 12  # lines kept on screen while streaming, so a long answer never re-renders whole

    def __init__(self, live: bool = True):
        self.text, self.live, self.show_live = "", None, live and console.is_terminal

    def __enter__(self):
        if self.show_live:
            from rich.live import Live
            from rich.spinner import Spinner

            self.live = Live(
                Spinner("dots", "thinking…"), console=console, transient=True, refresh_per_second=8
            )
            self.live.start()
        return self

    def __call__(self, chunk: str) -> None:
        self.text += chunk
        if self.live:
            shown = self.text[-4000:].split("<tool_call")[0]  # O(1) a token
            self.live.update(Text(clean("\n".join(shown.splitlines()[-self.TAIL :]))))

    def __exit__(self, *exc) -> None:
        if self.live:
            self.live.stop()
