"""What one run did, for scripts: `--output-format json` (one object) or `stream-json`
(a line per event).

Its own file because its field names are a contract (README, docs/scripting.md) that the agent's
internals must not move.
"""

import json
import sys
import time
import uuid

EXIT = {"done": 0, "error": 1, "declined": 2, "limited": 3, "unchanged": 4, "interrupted": 130}
CHANGES = ("write_file", "create_file", "edit_file")  # the tools whose success changes a file


class Report:
    """The record of a run: model calls, tool calls and their outcomes, checkpoints, warnings."""

    def __init__(self, fmt: str = "text", out=None):
        self.fmt = fmt
        self.out = out or sys.stdout
        self.started = time.monotonic()
        self.model_calls = 0
        self.tool_calls = []
        self.files = []
        self.answer = ""
        self.refused = False
        self.changes = []  # how each change the model attempted went (ok, failed, …)
        self.warnings = []
        self.mode = "normal"  # or "plan": the answer is a plan, nothing was changed
        self.hide = _as_is  # the run's secrets, hidden from every event and the result (see start)
        # the run's id, as its conversation's (start); a run that ends before one began has its own
        self.session = uuid.uuid4().hex[:12]

    def emit(self, kind: str, **fields) -> None:
        """One event: a JSON line, flushed, when streaming; nothing otherwise."""
        if self.fmt == "stream-json":
            event = self.hide({"type": kind, **fields})
            self.out.write(json.dumps(event, ensure_ascii=False) + "\n")
            self.out.flush()

    def start(self, session: str, model: str, hide=None) -> None:
        """The run begins: its session and model, and `hide`, which takes its secrets out of a JSON
        value (every string in it)."""
        self.hide = hide or _as_is
        self.session = session
        self.emit("start", session_id=session, model=model, mode=self.mode)

    def reply(self, text: str) -> None:
        """The model answered (text, possibly beside tool calls)."""
        self.model_calls += 1
        if text.strip():
            self.answer = text
            self.emit("text", text=text)

    def call(self, call_id: str, name: str, arguments) -> None:
        self.emit("tool_call", id=call_id, name=name, arguments=arguments)

    def result(self, call_id: str, name: str, target: str, outcome: tuple[str, str]) -> None:
        """A call's result as the model reads it, and its status: ok, failed, declined or denied."""
        content, status = outcome
        self.refused |= status in ("declined", "denied")
        if name in CHANGES:
            self.changes.append(status)
        self.tool_calls.append({"name": name, "target": target, "status": status})
        self.emit("tool_result", id=call_id, name=name, status=status, content=content)

    def checkpoint(self, checkpoint_id: str, files: list[str]) -> None:
        self.files += [{"path": f, "checkpoint": checkpoint_id} for f in files]
        self.emit("checkpoint", id=checkpoint_id, files=files)

    def warning(self, message: str) -> None:
        self.warnings.append(message)
        self.emit("warning", message=message)

    def unchanged(self) -> bool:
        """Whether the model attempted changes, every one failed, and nothing changed (in plan
        mode nothing is meant to change)."""
        if self.mode == "plan":
            return False
        return bool(self.changes) and "ok" not in self.changes and not self.files

    def finish(self, outcome: str, session: str, usage: dict) -> int:
        """The exit code for how the run ended (done, error, interrupted), and the final object."""
        if outcome == "done" and self.refused:
            outcome = "declined"
        elif outcome == "done" and self.unchanged():
            outcome = "unchanged"
        if self.fmt != "text":
            self.write_result(outcome, session or self.session, usage)
        return EXIT[outcome]

    def write_result(self, outcome: str, session: str, usage: dict) -> None:
        """The one result object, of one shape whatever ended the run: every field there, of its
        type (cost_usd a number, or null when a call had no known price)."""
        cost = None
        if usage.get("cost_known", True):
            cost = round(usage.get("cost", 0.0), 6)
        result = {
            "type": "result",
            "result": self.answer,
            "is_error": outcome == "error",
            "exit_code": EXIT[outcome],
            "mode": self.mode,
            "session_id": session,
            "num_model_calls": self.model_calls,
            "num_tool_calls": len(self.tool_calls),
            "tool_calls": self.tool_calls,
            "files_changed": self.files,
            "warnings": self.warnings,
            "usage": {k: usage.get(k, 0) for k in ("prompt_tokens", "completion_tokens")},
            "cost_usd": cost,
            "duration_ms": int((time.monotonic() - self.started) * 1000),
        }
        self.out.write(json.dumps(self.hide(result), ensure_ascii=False) + "\n")
        self.out.flush()

    def error(self, message: str) -> None:
        """A failure before or during the run, in the same shape
        (json modes; text says it on stderr)."""
        self.answer = message


def _as_is(value):
    return value
