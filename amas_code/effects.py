"""The effects tools want, the gate's verdicts on them, and text kept within bounds (Capped): the
vocabulary the floors share."""

import codecs
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple


@dataclass
class Change:
    """A file a tool wants written (old is None when it does not exist): the agent asks with its
    diff, checkpoints it and writes it."""

    path: Path
    old: bytes | None
    new: bytes
    verb: str  # edit, write, create, screenshot


@dataclass
class Command:
    """A shell line a tool wants run: the agent asks, checkpoints it and runs it (with env, the
    environment the agent gives it: see redact.child_env)."""

    line: str
    timeout: float
    env: dict | None = None


@dataclass
class Verdict:
    """The gate's word: allow, ask or deny. An ask names its kind and question; kind and key scope
    an 'always'; a deny says why, for the model."""

    decision: str
    kind: str = ""
    question: str = ""
    key: str = ""
    reason: str = ""


ALLOW = Verdict("allow")


class Declined(PermissionError):
    """The person said no (or no one could be asked)."""


class Outcome(NamedTuple):
    """What one tool call came to: the text the model reads, and how it went (ok, failed, declined
    or denied)."""

    text: str
    status: str


class Answer(NamedTuple):
    """The person's answer to a question: yes or no, and what they typed instead, for the model."""

    yes: bool
    said: str


class Stopped(KeyboardInterrupt):
    """Ctrl+C while a command ran: what it printed until then, for the model."""

    def __init__(self, output: str):
        super().__init__(output)
        self.output = output


class Capped:
    """Text within bounds, from a string or a stream of bytes: its first `head` characters and its
    last `tail`, and a count of what was cut between, said where the cut is. The one capper: a
    tool's result, a command's output, a page, what was piped into amas."""

    def __init__(self, head: int, tail: int = 0, what: str = "characters", watch=None):
        self.keep = head
        self.keep_tail = tail
        self.head = ""
        self.tail = ""
        self.dropped = 0
        self.what = what  # named where the cut is said
        self.watch = watch  # shown live, as it comes
        # bytes are decoded as they come: a character split between two reads stays whole
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def add(self, data: bytes | str) -> "Capped":
        if isinstance(data, bytes):
            data = self.decoder.decode(data)
        if self.watch:
            self.watch(data)
        room = max(0, self.keep - len(self.head))
        self.head += data[:room]
        self.tail += data[room:]
        if len(self.tail) > 2 * self.keep_tail + (1 << 16):  # trimmed in batches: cheap, bounded
            drop = len(self.tail) - self.keep_tail
            self.dropped += drop
            self.tail = self.tail[drop:]
        return self

    @property
    def cut(self) -> int:
        """Characters left out between the head and the tail kept."""
        return self.dropped + max(0, len(self.tail) - self.keep_tail)

    def size(self) -> int:
        return len(self.head) + len(self.tail) + self.dropped

    def text(self, hint: str = "") -> str:
        """What was kept, the cut said in one line between its head and its tail."""
        if not self.cut:
            return self.head + self.tail
        tail = ""
        if self.keep_tail:
            tail = self.tail[-self.keep_tail :]
        return f"{self.head}\n[… {self.cut:,} {self.what} cut{hint} …]\n{tail}"


def cap(text: str, limit: int) -> str:
    """Text cut to about limit characters, keeping its head and its tail (where errors and exit
    codes are)."""
    kept = Capped(limit // 2, limit // 2).add(text)
    return kept.text("; ask for less, e.g. a line range")
