"""The user's memory: notes that last across sessions, in ~/.amas where no clone can ship them, as
Markdown a person can read and edit. Long-term notes hold; a short-term note ends with
"(until YYYY-MM-DD)" and is dropped once that day has passed. Its own file because the REPL, the
model's tool and the system prompt all read it."""

import contextlib
import datetime
import re
from dataclasses import dataclass
from pathlib import Path

from amas_code import home

HEADER = (
    "# amas memory: one note a line, `- ` first; a note that ends with (until YYYY-MM-DD) is "
    "dropped after that day\n"
)
UNTIL = re.compile(r"\s*\(until (\d{4}-\d{2}-\d{2})\)\s*$")
WORDS = re.compile(r"[a-z0-9_]{3,}")


@dataclass(frozen=True)
class Note:
    """One note: its words, the day it expires (None: long-term), and whose it is."""

    text: str
    until: datetime.date | None = None
    scope: str = "project"  # or "user": every project's

    def line(self) -> str:
        """The note as its file holds it."""
        if self.until is None:
            return f"- {self.text}"
        return f"- {self.text} (until {self.until.isoformat()})"

    def live(self, today: datetime.date) -> bool:
        return self.until is None or self.until >= today


def places(root: Path) -> dict[str, Path]:
    """The files notes live in: the project's (by its identity) and the user's own."""
    return {
        "project": home.state_file(root, "memory.md"),
        "user": Path.home() / ".amas" / "memory.md",
    }


def read(path: Path, scope: str) -> list[Note]:
    """The notes of one file (a line that is not a note is a person's: kept, never read as one)."""
    notes = []
    for line in _text(path, "").splitlines():
        if line.startswith("- ") and line[2:].strip():
            notes.append(_note(line[2:].strip(), scope))
    return notes


def _text(path: Path, default: str) -> str:
    """A memory file's text; default when there is none, or it cannot be read."""
    with contextlib.suppress(OSError, home.ConfigError):
        if path.is_file():
            return home.read_private(path)
    return default


def _note(said: str, scope: str) -> Note:
    found = UNTIL.search(said)
    if not found:
        return Note(said, None, scope)
    try:
        until = datetime.date.fromisoformat(found[1])
    except ValueError:  # a date a person mistyped: the note stays, long-term
        return Note(said, None, scope)
    return Note(said[: found.start()], until, scope)


def notes(root: Path) -> list[Note]:
    """Every note, the project's first."""
    return [note for scope, path in places(root).items() for note in read(path, scope)]


def lines(root: Path, scope: str, notes_now: list[Note]) -> str:
    """A memory file's whole text with these notes (its other lines as the person left them)."""
    text = _text(places(root)[scope], HEADER)
    kept = [line for line in text.splitlines() if not line.startswith("- ")]
    mine = [note.line() for note in notes_now if note.scope == scope]
    return "\n".join([*kept, *mine]) + "\n"


def added(root: Path, text: str, days: int = 0, scope: str = "project") -> tuple[Path, str]:
    """The file a note goes into, and its text with the note added (a short-term note when days)."""
    until = None
    if days > 0:
        until = datetime.date.today() + datetime.timedelta(days=days)
    note = Note(" ".join(text.split()), until, scope)
    mine = [n for n in notes(root) if n.scope == scope]
    return places(root)[scope], lines(root, scope, [*mine, note])


def matching(root: Path, words: str) -> list[Note]:
    """The notes that hold `words` (every note for "all"), exactly or as a part."""
    wanted = " ".join(words.split()).lower()
    if wanted == "all":
        return notes(root)
    return [note for note in notes(root) if wanted and wanted in note.text.lower()]


def without(root: Path, gone: list[Note]) -> dict[Path, str]:
    """Each memory file gone notes were in, and its text without them."""
    texts = {}
    for scope, path in places(root).items():
        if any(note.scope == scope for note in gone):
            kept = [note for note in read(path, scope) if note not in gone]
            texts[path] = lines(root, scope, kept)
    return texts


def expire(root: Path, today: datetime.date | None = None) -> int:
    """Drop the short-term notes whose day has passed (at start); how many went."""
    today = today or datetime.date.today()
    old = [note for note in notes(root) if not note.live(today)]
    for path, text in without(root, old).items():
        home.write_private(path, text)
    return len(old)


def ranked(root: Path, latest: str) -> list[Note]:
    """The live notes, those sharing most words with the latest message first (ties: the later
    in its file first, as a person adds a note after those it builds on)."""
    today = datetime.date.today()
    live = [note for note in notes(root) if note.live(today)]
    shared = [_shared(latest, note) for note in live]
    order = sorted(range(len(live)), key=lambda i: (shared[i], i), reverse=True)
    return [live[i] for i in order]


def _shared(text: str, note: Note) -> int:
    """How many words of three letters or more text and the note have in common."""
    return len(set(WORDS.findall(text.lower())) & set(WORDS.findall(note.text.lower())))


def search(root: Path, query: str) -> str:
    """The model's search: the live notes sharing a word with the query, or holding it, best
    first."""
    wanted = query.lower().strip()
    found = [n for n in ranked(root, query) if _shared(query, n) or wanted in n.text.lower()]
    if not found:
        return f"No note holds {query!r}."
    return "\n".join(shown(note) for note in found[:20])


def shown(note: Note) -> str:
    """A note as the model and the person read it: its words, whose, and until when."""
    said = f"- {note.text}"
    if note.scope == "user":
        said += " [yours, every project]"
    if note.until is not None:
        said += f" [until {note.until.isoformat()}]"
    return said


def prompt(root: Path, latest: str, budget: int) -> str:
    """The notes for the system prompt, the most relevant first, within budget tokens (at 3
    characters a token), and how many more the memory tool can search."""
    kept = []
    room = budget * 3
    live = ranked(root, latest)
    for note in live:
        line = shown(note)
        if len(line) + 1 > room:
            break
        kept.append(line)
        room -= len(line) + 1
    if not kept:
        return ""
    more = len(live) - len(kept)
    text = "\n### Memory (notes the user keeps across sessions)\n" + "\n".join(kept) + "\n"
    if more:
        text += f"({more} more: search them with the memory tool)\n"
    return text
