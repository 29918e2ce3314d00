"""The effects tools want and the gate's verdicts on them: the vocabulary the floors share."""

from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple


@dataclass
class Change:
    """A file a tool wants written (old is None when it does not exist): the agent asks with its diff,
    checkpoints it and writes it."""

    path: Path
    old: bytes | None
    new: bytes
    verb: str  # edit, write, create, screenshot


@dataclass
class Command:
    """A shell line a tool wants run: the agent asks, checkpoints it and runs it."""

    line: str
    timeout: float


@dataclass
class Verdict:
    """The gate's word: allow, ask or deny. An ask names its kind and question; kind and key scope an
    'always'; a deny says why, for the model."""

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
