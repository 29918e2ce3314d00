"""The effects tools want and the gate's verdicts on them: the vocabulary the floors share."""

from dataclasses import dataclass
from pathlib import Path


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
