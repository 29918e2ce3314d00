"""The conversation log: .amas/history.jsonl, one message a line, appended, read as a stream."""

import json
import time
from pathlib import Path

from amas_code import ui


def append(path: Path, session: str, message: dict) -> None:
    """Add one message; never rewrites the file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps({"session": session, "time": time.time(), **message}, ensure_ascii=False) + "\n")


def _entries(path: Path, warn: bool = True):
    with path.open(encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            try:
                entry = json.loads(line)
                if isinstance(entry, dict) and "session" in entry and "role" in entry:
                    yield entry
                    continue
            except ValueError:
                pass
            if warn and line.strip():
                ui.warning(f"{path}:{n}: skipped a corrupt history line")


def latest(path: Path) -> tuple[str | None, list[dict]]:
    """The last session's id and messages; two passes so the whole file is never held in memory."""
    if not path.is_file():
        return None, []
    session = None
    for entry in _entries(path):
        session = entry["session"]
    keep = ("role", "content", "tool_calls", "tool_call_id")
    return session, [{k: e[k] for k in keep if k in e} for e in _entries(path, False) if e["session"] == session]
