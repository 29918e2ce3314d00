"""The conversation log: every message of a project's conversations, one JSON line each, in the
user's home (~/.amas/projects/<id>/history.jsonl); --continue and --resume read it."""

import json
import re
import time
import uuid
from pathlib import Path

from amas_code import home, ui

KEYS = ("role", "content", "tool_calls", "tool_call_id")  # what a message of the conversation holds


def new_session() -> str:
    return uuid.uuid4().hex[:12]


class Log:
    """One project's history file, appended as a conversation grows."""

    def __init__(self, root: Path):
        self.path: Path | None = home.state_file(root, "history.jsonl")
        self.logged = 0  # messages of the conversation already in the file

    def entries(self) -> list[dict]:
        """Every well-formed line of the history."""
        lines = []
        try:
            if self.path.is_file():
                lines = home.read_private(self.path).splitlines()
        except (OSError, home.ConfigError) as e:
            ui.warning(f"cannot read the history: {e}")
        return [e for e in map(_entry, lines) if e]

    def conversations(self) -> list[dict]:
        """The conversations in the history, newest first: session, time, first message, count. A
        compacted conversation goes on in a new session that starts with the summary: listed once,
        as that one, under its first words."""
        found = {}
        for e in self.entries():
            if "content" not in e:
                continue
            if e["session"] not in found and str(e["content"]).startswith(SUMMARY):
                first = ""
                if found:
                    first = found.popitem()[1]["first"]
                found[e["session"]] = {"session": e["session"], "first": first, "count": 0}
            seen = found.setdefault(
                e["session"], {"session": e["session"], "first": "", "count": 0}
            )
            seen["time"] = e["time"]
            seen["count"] = seen["count"] + 1
            if e["role"] == "user" and not seen["first"]:
                seen["first"] = " ".join(said(str(e["content"])).split())[:80]
        return sorted(found.values(), key=lambda c: c["time"], reverse=True)

    def resume(self, chosen: str | None = None) -> tuple[str, list[dict]]:
        """A session's id and messages: the chosen one, or the latest (after /clear or /compact, the
        new conversation)."""
        entries = self.entries() or [{"session": new_session(), "time": 0}]
        session = chosen or entries[-1]["session"]
        mine = [e for e in entries if e["session"] == session]
        found = [{k: e[k] for k in KEYS if k in e} for e in mine if "content" in e]
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime((mine or entries)[-1]["time"]))
        if found:
            ui.info(f"resuming the conversation of {when} ({ui.plural(len(found), 'message')})")
        else:
            ui.info("no earlier conversation")
        self.logged = len(found)
        return session, found

    def opened(self, resume: bool | str) -> tuple[str, list[dict]]:
        """The conversation a session starts with: a new one, the latest (True: -c) or the one
        picked (its session id: --resume)."""
        if resume is True:
            return self.resume()
        if resume:
            return self.resume(resume)
        return new_session(), []

    def flush(self, session: str, messages: list[dict], marker: bool = False) -> str:
        """Append the messages the file lacks (or a session marker); what went wrong, if anything
        (then nothing more is written)."""
        new = messages[self.logged :]
        if marker:
            new = [{"role": "session"}]
        self.logged = len(messages)
        stamp = {"session": session, "time": time.time()}
        try:
            if self.path and new:
                lines = "".join(json.dumps({**stamp, **m}) + "\n" for m in new)
                home.append_private(self.path, lines)
        except (OSError, home.ConfigError) as e:
            self.path = None
            return str(e)
        return ""


SUMMARY = "[Summary of the earlier conversation]"
# what amas puts before the user's words: notes of what they did, attached files
INTERNAL = re.compile(
    r"\A(?:\[Note: [^\n]*\]\n\n"
    r"|The user ran a command themselves:\n```\n.*?\n```\n\n"
    r"|Attached file [^\n]*:\n```\n.*?\n```\n\n)",
    re.S,
)


def said(content: str) -> str:
    """The user's own words in a user message, without what amas put before them."""
    while match := INTERNAL.match(content):
        content = content[match.end() :]
    return content


def preview(messages: list[dict], turns: int = 3) -> list[tuple[str, str]]:
    """The last few exchanges for the screen after --continue: (who, text) for what the user
    typed, the tools that ran, and the answer; amas's own messages left out."""
    shown = []
    for m in messages:
        content = str(m.get("content") or "")
        if m["role"] == "user" and not content.startswith(("Error: your tool call", SUMMARY)):
            shown.append(("user", said(content)))
        elif m["role"] == "user" and content.startswith(SUMMARY):
            shown.append(("summary", "earlier conversation, compacted"))
        elif m["role"] == "assistant" and m.get("tool_calls"):
            names = [c["function"]["name"] for c in m["tool_calls"]]
            shown.append(("tools", ", ".join(names)))
        elif m["role"] == "assistant" and content.strip():
            shown.append(("assistant", content))
    starts = [i for i, (who, _) in enumerate(shown) if who == "user"]
    if len(starts) < turns:
        return shown
    return shown[starts[-turns] :]


def _entry(line: str) -> dict | None:
    """One line of the history, if it has the shape amas writes
    (a hand-edited or damaged one is skipped)."""
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    shape = {
        "session": str,
        "time": (int, float),
        "role": str,
        "content": (str, type(None)),
        "tool_calls": list,
    }
    if not isinstance(entry, dict) or not {"session", "time", "role"} <= entry.keys():
        return None
    if any(not isinstance(entry[k], t) for k, t in shape.items() if k in entry):
        return None
    if not all(map(_whole_call, entry.get("tool_calls", []))):
        return None
    return entry


def _whole_call(c) -> bool:
    return (
        isinstance(c, dict) and isinstance(c.get("id"), str) and isinstance(c.get("function"), dict)
    )
