"""Everything the user sees: answers on stdout; progress, tools and diffs on stderr;
questions on the terminal."""

import contextlib
import difflib
import functools
import io
import os
import re
import select
import signal
import sys
import threading
import time
from typing import NamedTuple

from rich.console import Console
from rich.text import Text

out = Console(highlight=False)  # the answer: what `amas "..." > file` keeps
console = Console(stderr=True, highlight=False)  # everything about the work
# the width of a file or pipe: lines as long as they are (a CI log wraps itself)
UNWRAPPED = 1 << 20
for _console in (out, console):
    if not _console.is_terminal:
        _console.width = UNWRAPPED
TTY = "/dev/tty"  # where questions go when stdin or stderr is not the terminal
INVISIBLE = re.compile(  # control, bidi, zero-width, fillers, variation selectors, tags
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f"
    "\u200b-\u200f\u2028-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb\U000e0000-\U000e0fff"
    "\u0600-\u0605\u06dd\u070f\u0890\u0891\u08e2\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3"
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
    """Inside: every text this module shows passes `hide` first
    (secrets as [REDACTED], lines kept)."""
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
    """Control, bidi and zero-width characters shown escaped,
    so text from outside cannot fake the screen."""
    return INVISIBLE.sub(lambda m: m[0].encode("unicode_escape").decode(), text)


def one_line(text: str) -> str:
    """Text escaped and on one line:
    blank lines cannot push what a command really runs off the screen."""
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


ROWS = 2  # screen rows one line of a tool's output may take; the rest is counted
CUT = re.compile(r"\[… [\d,]+ .* cut.* …\]")  # where effects.Capped says it cut
ENDED = "[exit code "  # how a command's result says it ended (sandbox.run)


def _bounded(line: str, size: int = -1) -> str:
    """A line of output as the screen shows it: escaped, at most ROWS screen rows (at most WIDE
    characters where nothing wraps), what is left out counted ("… +N characters"); size is the
    whole line's length when line holds only its start."""
    size = max(size, len(line))
    whole = min(ROWS * (console.width - 4), Tail.WIDE)
    if size <= whole and len(clean(line)) <= whole:
        return clean(line)
    room = whole - 24  # for the count
    return f"{clean(line[:room])[:room]} … (+{size - room:,} characters)"


def _gutter(rows: list[str], style: str = "dim") -> Text:
    """Rows of output behind the gutter, each wrapped within it (a long word is folded where it
    starts, not pushed below an empty gutter)."""
    text = Text()
    for row in rows:
        wrapped = Text(row, style).wrap(console, max(console.width - 4, 10), overflow="fold")
        for n, line in enumerate(wrapped):
            mark = "    "
            if n == 0:
                mark = "  │ "
            text.append(mark, "dim").append_text(line).append("\n")
    return text


def show_result(text: str, lines: int = 3) -> None:
    """A short excerpt of a result, each line at most ROWS screen rows: its first and last lines
    (errors and exit codes), or with lines=0 its first. A command's result on a terminal starts
    at its exit code (Tail showed what each run printed), and says what the model gets of a long
    output."""
    rows = hidden(text).rstrip("\n").split("\n")
    ended = [n for n, row in enumerate(rows) if row.startswith(ENDED)]
    if lines and ended and console.is_terminal:
        console.print(_gutter(_ending(text, rows[ended[-1] :])), end="")
        return
    head = lines or 1
    shown = [_bounded(row) for row in rows[:head]]
    if not lines and len(rows) > 1:
        shown.append(f"… {plural(len(rows) - 1, 'more line')}")
    elif lines and len(rows) > 2 * lines + 1:
        shown.append(f"… {plural(len(rows) - 2 * lines, 'more line')}")
        shown += [_bounded(row) for row in rows[-lines:]]
    else:
        shown += [_bounded(row) for row in rows[head:]]
    console.print(_gutter(shown), end="")


def _ending(text: str, rows: list[str]) -> list[str]:
    """How a command ended, and what the model gets of its output when that was cut."""
    shown = [_bounded(row) for row in rows]
    if CUT.search(text):
        shown.append(f"the model gets the start and the end of it: {len(text):,} characters")
    return shown


def show_output(text: str) -> None:
    """A command's whole output, as the person who ran it wants it: escaped, secrets hidden, in
    the gutter tool output has."""
    console.print(_gutter(_shown(text).rstrip("\n").split("\n"), ""), end="")


def _lines(text: str) -> list[str]:
    return text.removesuffix("\n").split("\n") if text else []


def diff(old: str | None, new: str, path: str) -> Text:
    """A unified diff with every byte of every changed line visible (wrapped, escaped, never
    cropped) but secrets, hidden with their lines kept: a line whose secret changed shows changed,
    as [REDACTED]. A new file (old None) is said so, its diff from /dev/null as git writes it."""
    real = (_lines(old or ""), _lines(new))
    shown = (_lines(hidden(old or "")), _lines(hidden(new)))
    if list(map(len, real)) != list(map(len, shown)):  # lines kept, as redact does
        real = shown
    text = Text()
    if old is None:
        text.append(f"new file {one_line(path)}\n", "bold")
    for n, line in enumerate(_unified(real, shown, path)):
        if n == 0 and old is None:
            line = "--- /dev/null"
        text.append(clean(line.removesuffix("\r")) + "\n", _diff_style(line))
    if old is None and not new:
        text.append("(empty)\n")
    if not text:
        return Text(f"(no changes to {path})\n")
    return text


def _diff_style(line: str) -> str:
    if line[:3] in ("---", "+++"):
        return "bold"
    return {"+": "green", "-": "red", "@": "cyan"}.get(line[:1], "")


def _matcher(old: list, new: list) -> difflib.SequenceMatcher:
    """A matcher of old and new lines that matched only what lies between
    the lines both ends share."""

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
    """The unified diff of the real old and new lines, written with the shown ones.
    difflib.unified_diff without its autojunk: in a file of repeated lines (data, fixtures) that
    marks the repeated lines junk, and a one-line change is shown as the whole file removed and
    added. The lines both ends share are left out of the matching, which is quadratic in repeated
    lines (10,000 took 13 s)."""
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
    """A hunk's line range as unified diffs write it:
    1-based start, ',length' unless 1; 0,0 for none."""
    length = stop - start
    return f"{start + 1}" if length == 1 else f"{start + (length > 0)},{length}"


def _terminal() -> tuple[Console, object] | None:
    """The console and input stream of the person at the terminal, or None when there is none."""
    if sys.stdin.isatty() and console.is_terminal:
        return console, None
    try:  # unbuffered: a terminal cannot seek, which a buffered text file opened "r+" needs
        tty = io.TextIOWrapper(
            open(TTY, "r+b", buffering=0),  # noqa: SIM115
            encoding="utf-8",
            line_buffering=True,
        )
    except OSError:
        return None
    return Console(file=tty, highlight=False), tty


def can_ask() -> bool:
    """Whether a person at a terminal can be asked something."""
    where = _terminal()
    if where and where[1]:
        where[1].close()
    return where is not None


# each answer's letter is its first
ANSWERS = {word: word[0] for word in ("y", "yes", "n", "no", "s", "session", "a", "always")}
LABELS = {"y": "[y]es", "n": "[n]o", "s": "[s]ession", "a": "[a]lways"}
INSTEAD = ", or say what instead"  # words other than an answer decline, for the model
FITS = 80  # columns the question's own line should fit in; past them its hint goes above it
# how people say yes or no besides the letters ("yes please", "ok", "nope"): an answer is made of
# the words of one of them, and words of courtesy around them
SAYS = {
    "y": set(
        "y yes yeah yep yup ya yea ok okay k sure fine alright good great perfect absolutely "
        "certainly definitely course go ahead do proceed apply lgtm".split()
    ),
    "n": set("n no nope nah dont not stop cancel skip never".split()),
}
COURTESY = set("please thanks thank you it on of sounds right then just sir".split())


class Asked(NamedTuple):
    """A question as the person meets it: its words, the letters it takes, what it is about (a
    diff), its prompt line, and what is said when the words typed are no answer."""

    question: str
    choices: str
    detail: object
    prompt: Text
    again: str


def answer_of(said: str) -> str:
    """The answer words give: y, n, s or a for a letter or its word, y or n for the common ways to
    say yes or no ("yes please", "ok", "nope"); "" for anything else."""
    text = said.strip().lower()
    if text in ANSWERS:
        return ANSWERS[text]
    words = _words(text)
    meant = {kind for kind, known in SAYS.items() for word in words if word in known}
    known = COURTESY.union(*SAYS.values())
    if len(meant) == 1 and all(word in known for word in words):
        return meant.pop()
    return ""


def _words(text: str) -> list[str]:
    """The words of what was typed, lower case, apostrophes dropped (don't is dont)."""
    return re.findall(r"[a-z]+", text.lower().replace("'", "").replace("\u2019", ""))


def _instead(words: str, choice: str) -> bool:
    """Words that decline and tell the agent what to do instead (or name a folder): not an answer,
    not one word of letters (a slip: "yess"), not a yes with more ("yeah, but use tabs" may mean
    yes); those are asked again."""
    found = _words(words)
    if choice or not words or re.fullmatch(r"[^\W\d_]+", words):
        return False
    return len(found) < 2 or found[0] not in SAYS["y"]


def question(question: str, detail=None, scopes: dict | None = None) -> tuple[str, str]:
    """The person's answer: y, n, or a wider yes among scopes (s: this session, a: always; each
    said on a line of its own), and their words when they typed something other than an answer
    (which declines: the words are feedback for the model);
    without a terminal, 'n' and a warning."""
    offered = {key: what for key, what in (scopes or {}).items() if what}
    choices = "yn" + "".join(offered)
    for key, what in offered.items():  # on lines of their own: the question itself fits one
        detail = _with_line(detail, f"{LABELS[key]}: {one_line(hidden(what))}")
    prompt = _prompt(question, choices)
    if len(prompt) + len(INSTEAD) + 2 <= FITS:
        prompt.append(INSTEAD)
    else:
        detail = _with_line(detail, "or type what to do instead: the agent reads it")
    again = f"answer {_letters(choices)}, or tell the agent what to do instead"
    return _answer(Asked(question, choices, detail, prompt.append(": "), again))


def _letters(choices: str) -> str:
    """y, n or a: the letters a question takes, as a sentence says them."""
    return ", ".join(choices[:-1]) + " or " + choices[-1]


def _with_line(detail, line: str) -> Text:
    """What a question shows before it, and one dim line more."""
    shown = Text(_shown(detail)) if isinstance(detail, str) else (detail or Text())
    shown = shown.copy()
    if shown.plain and not shown.plain.endswith("\n"):
        shown.append("\n")
    return shown.append(line, "dim")


def ask(question: str, choices: str = "yn", detail: Text | None = None) -> str:
    """One of choices from the person at the terminal (a sentence declines)."""
    prompt = _prompt(question, choices).append(": ")
    return _answer(Asked(question, choices, detail, prompt, f"answer {_letters(choices)}"))[0]


def _prompt(question: str, choices: str) -> Text:
    labels = [LABELS[c] for c in choices]
    return Text.assemble((one_line(hidden(question)), "bold"), " ", "/".join(labels))


def _answer(asked: Asked) -> tuple[str, str]:
    """Show the detail and the lines queued meanwhile, drop what was typed ahead, read a fresh
    answer."""
    con, stream = _terminal() or (None, None)
    _show_detail(con or console, asked.detail)
    if con is None:
        accept = ""
        if "a" in asked.choices:
            accept = " (run with --yes to accept)"
        warning(f"{asked.question} declined: no terminal to ask on{accept}")
        return "n", ""
    try:
        with _TYPED.paused():
            _TYPED.show_queued(con)
            _drop_typed_ahead(stream)
            return _read_answer(con, stream, asked)
    finally:
        if stream:
            stream.close()


KEYS = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1bO.|\x1b.|[\x00-\x1f\x7f]|[^\x00-\x1f\x7f\x1b]+")


class Typed:
    """Lines typed while a turn runs: read without echo, shown dimmed under the live area, kept
    for after the turn, where each is handled as what it is (Enter queues a line; Backspace on an
    empty line takes the last one back to edit; Ctrl+U clears the line; Esc interrupts the turn,
    as Ctrl+C does). Reading pauses while a question is asked: typed ahead, a line never answers
    one, and the queued lines are listed above it."""

    def __init__(self):
        self.lines = []  # queued: Enter was pressed
        self.partial = ""  # being typed
        self.lock = threading.Lock()  # held while reading; a question takes it to pause
        self.saved = None  # the terminal's mode before, restored after
        self.on = False
        # when the person pressed Enter: the turn's first wait counts from there (a wait for the
        # model library too); None once an answer came, and the next wait counts from its request
        self.entered = None

    def view(self) -> Text:
        """What was typed, for the bottom of a live area (empty when nothing was)."""
        text = self.listed()
        if self.partial:
            text.append(f"\n  › {_cut(one_line(self.partial), 6)}▏")
        if self.lines:
            text.append("\n  handled in order when this turn ends (Backspace takes one back)")
        return text

    def listed(self) -> Text:
        """The queued lines, one screen row each."""
        text = Text(style="dim")
        for line in self.lines:
            text.append(f"\n  queued › {_cut(one_line(line), 13)}")
        return text

    def show_queued(self, con: Console) -> None:
        """Above a question: the lines queued before it, which it never takes as its answer."""
        if not self.lines:
            return
        text = self.listed().append("\n  typed before this question, so not its answer: ")
        con.print(text.append("handled when this turn ends"), overflow="fold")

    def keys(self, data: str) -> None:
        """Typed keys: letters, Enter, Backspace, Ctrl+U and Esc (arrows and the rest ignored)."""
        for key in KEYS.findall(data):
            if key in ("\r", "\n") and self.partial.strip():
                self.lines.append(self.partial.strip())
                self.partial = ""
            elif key in ("\x7f", "\x08") and not self.partial and self.lines:
                self.partial = self.lines.pop()
            elif key in ("\x7f", "\x08"):
                self.partial = self.partial[:-1]
            elif key == "\x1b" and self.on:  # as Ctrl+C: KeyboardInterrupt in the turn
                os.kill(os.getpid(), signal.SIGINT)
            elif key == "\x15":
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
            # keys are taken under the lock: after stop(), no Esc can interrupt what comes next
            with self.lock:
                data = b""
                if self.on and select.select([fd], [], [], 0.05)[0]:
                    data = os.read(fd, 1024)
                # an Esc at the end may be the start of an arrow key's sequence: its rest follows
                if data.endswith(b"\x1b") and select.select([fd], [], [], 0.05)[0]:
                    data += os.read(fd, 1024)
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
    _TYPED.entered = time.monotonic()
    _TYPED.start()
    try:
        yield got
    finally:
        _TYPED.entered = None
        got.extend(_TYPED.stop())


def _cut(text: str, margin: int) -> str:
    """Text cut to one screen row less margin columns, an ellipsis where it was cut."""
    room = max(console.width - margin, 10)
    if len(text) <= room:
        return text
    return text[: room - 1] + "…"


def _read_answer(con: Console, stream, asked: Asked) -> tuple[str, str]:
    """The answer their words give (answer_of); a sentence declines and is returned, for the
    model; a word that is no answer here, or a yes with more words, is asked again."""
    try:
        while True:
            raw = con.input(asked.prompt, stream=stream)
            if stream and not raw:  # end of input at the terminal: no
                return "n", ""
            words = raw.strip()
            choice = answer_of(words)
            if choice and choice in asked.choices:
                return choice, ""
            if _instead(words, choice):
                return "n", words
            if words:
                con.print(Text(f"  {asked.again}", "yellow"))
    except EOFError:
        return "n", ""


def folder(question: str, proposed: str = "", detail=None) -> str:
    """A folder from the person, for a question that needs one: y takes the one proposed (with none
    proposed, it says so and asks again), n or the end of input declines (""), other words are the
    folder they typed, for the caller to check. Without a terminal: "" and a warning."""
    if proposed:
        choices = f"[y]es: {proposed} / [n]o / or type another folder"
    else:
        choices = "type the folder / [n]o"
    prompt = Text.assemble((one_line(hidden(question)), "bold"), " ", one_line(choices), ": ")
    con, stream = _terminal() or (None, None)
    _show_detail(con or console, detail)
    if con is None:
        warning(f"{question} declined: no terminal to ask on")
        return ""
    try:
        with _TYPED.paused():
            _drop_typed_ahead(stream)
            return _read_folder(con, stream, prompt, proposed)
    finally:
        if stream:
            stream.close()


def _read_folder(con: Console, stream, prompt: Text, proposed: str) -> str:
    """The folder from their words (see folder); an empty line asks again."""
    try:
        while True:
            raw = con.input(prompt, stream=stream)
            if stream and not raw:  # end of input at the terminal: no
                return ""
            words = raw.strip()
            answer = ANSWERS.get(words.lower(), "")
            if answer == "n":
                return ""
            if answer == "y" and proposed:
                return proposed
            if answer == "y":
                said = "no folder was proposed: type the folder the command should write in, or n"
                con.print(Text.assemble(("⚠ ", "yellow"), said), overflow="fold")
            elif words:
                return words
    except EOFError:
        return ""


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
    # beside the question, where the person looks
    if tall and re.search(r"^\+\+\+ (b/|/)", detail.plain, re.M):
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

            # the turn's first wait counts from Enter, a wait for the model library included
            self.began = _TYPED.entered or time.monotonic()
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
        _TYPED.entered = None  # an answer came: the next wait counts from its own request
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
        doing = "thinking…"
        if self.pieces:
            doing = "answering…"
            took += f" · {plural(self.pieces, 'token')}"
        self.spinner.update(text=Text(f"{doing} ({took} · {_how_to_stop()})"))
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
                start = self.shown
                self.shown = settled
                with held_interrupt():
                    self.screen.print(_segment_lines(lines[start:settled]))
            if self.live and lines:
                self.current = _segment_lines(lines[settled:])
        spent = time.monotonic() - began  # a long answer renders slower: draw it less often
        self.due = time.monotonic() + min(max(spent * 10, 0.05), 1)


@contextlib.contextmanager
def held_interrupt():
    """Ctrl+C (or Esc) held until the block is done, then raised: rich keeps what a print had
    buffered when it is interrupted halfway, and writes it again with the next print (an answer's
    lines shown twice). Only the main thread takes signals; elsewhere the block just runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pressed = []
    before = signal.signal(signal.SIGINT, lambda *_: pressed.append(True))
    try:
        yield
    finally:
        if before is None:  # a handler set outside Python: Python's own stands in
            before = signal.default_int_handler
        signal.signal(signal.SIGINT, before)
    if pressed:
        raise KeyboardInterrupt


def _how_to_stop() -> str:
    """Esc in the REPL, where keys are read while a turn runs; Ctrl+C anywhere."""
    if _TYPED.on:
        return "Esc to interrupt"
    return "Ctrl+C to interrupt"


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
    """While a command runs: its last lines and the time so far (of its limit, if it has one), live
    on a terminal (silent elsewhere); then how it went in one line and, unless the caller shows the
    whole output, what it printed in a few rows: its first lines, how many more, its last lines,
    each line at most ROWS screen rows. The counts are of what it printed."""

    LINES = 5  # lines of output kept on screen while it runs
    HEAD = 3  # first and last lines of the excerpt after it
    WIDE = 2000  # characters kept of each line (its length is counted whole)

    def __init__(self, title: str, limit: float = 0, excerpt: bool = True):
        self.title = one_line(hidden(title))
        self.limit = limit
        self.excerpt = excerpt
        self.first = []  # the first HEAD lines printed, each (text, length)
        self.last = []  # the last LINES lines after them
        self.partial = ("", 0)  # the line being printed
        self.count = 0  # lines ended
        self.live = None

    def __enter__(self):
        self.start = time.monotonic()
        if console.is_terminal:
            from rich.live import Live

            self.live = Live(console=console, transient=True, get_renderable=self._view)
            self.live.start()
        return self

    def feed(self, chunk: str) -> None:
        """More output: the line being printed grows; lines that end are counted and kept (the
        first few, the last few)."""
        pieces = chunk.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        text, size = self.partial
        ended = pieces[:-1]
        self.count += len(ended)
        for n in self._keepable(len(ended)):
            self._ended((text + ended[n])[: self.WIDE], size + len(ended[n]))
            text, size = "", 0  # what was being printed ended with the first of them
        self.partial = ((text + pieces[-1])[: self.WIDE], size + len(pieces[-1]))

    def _keepable(self, count: int) -> list[int]:
        """Which of count lines that just ended may be kept (0 first, when there are any): only
        those are looked at, as 200,000 lines come in a few big chunks."""
        first = range(min(count, self.HEAD + 1))
        return sorted({*first, *range(max(count - self.LINES, 0), count)})

    def _ended(self, text: str, size: int) -> None:
        if len(self.first) < self.HEAD:
            self.first.append((text, size))
        else:
            self.last = [*self.last, (text, size)][-self.LINES :]

    def _kept(self) -> tuple[list, list]:
        """The first lines and the last ones (the line being printed too), secrets hidden: each
        group together, as a secret may span lines."""
        last = self.last
        if self.partial[1]:
            last = [*last, self.partial]
        return _hidden_lines(self.first), _hidden_lines(last)

    def total(self) -> int:
        """Lines printed, the one being printed included."""
        if self.partial[1]:
            return self.count + 1
        return self.count

    def _view(self) -> Text:
        first, last = self._kept()
        clock = f"{time.monotonic() - self.start:.0f} s"
        if self.limit:
            clock += f" of {self.limit:g} s"
        text = Text(f"  {self.title} ({clock} · {_how_to_stop()})", "dim")
        for line, _ in [*first, *last][-self.LINES :]:
            text.append(f"\n  │ {_cut(clean(line), 6)}", "dim")
        return text + _TYPED.view()

    def __exit__(self, kind, *exc) -> None:
        took = time.monotonic() - self.start
        if not self.live:
            return
        self.live.stop()
        stopped = kind is not None and issubclass(kind, KeyboardInterrupt)  # Ctrl+C, or Stopped
        how = ""
        if stopped:
            how = ", stopped"
        said = f"  {self.title}: {_lines_said(self.total())} in {took:.1f} s{how}"
        console.print(Text(said, "dim"), overflow="fold")
        if self.total() and (self.excerpt or stopped):  # what was shown stays
            console.print(_gutter(self._excerpt()), end="")

    def _excerpt(self) -> list[str]:
        """What it printed, in a few rows: its first lines, how many more, its last lines."""
        first, last = self._kept()
        rows = [_bounded(line, size) for line, size in [*first, *last]]
        if self.total() <= 2 * self.HEAD + 1:  # all of it: first and last meet
            return rows
        more = f"… {_lines_said(self.total() - 2 * self.HEAD, 'more ')}"
        return [*rows[: self.HEAD], more, *rows[-self.HEAD :]]


def _lines_said(count: int, more: str = "") -> str:
    """A count of lines as a person reads a big one: 200,001 lines (or 200,001 more lines)."""
    if count == 1:
        return f"1 {more}line"
    return f"{count:,} {more}lines"


def _hidden_lines(lines: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """Lines with the secrets in them hidden, all together (lines kept), each with its length."""
    if not lines:
        return []
    texts = hidden("\n".join(text for text, _ in lines)).split("\n")
    return list(zip(texts, [size for _, size in lines], strict=False))
