"""The orchestrator: one tool call end to end. Bind the arguments, run the handler; for an effect,
judge it (policy), ask once, record the checkpoint, perform it (a command in the box), offer the way
out of the box; then redact, cap once and report what the model reads."""

import contextlib
import dataclasses
import functools
import types
from collections.abc import Callable
from pathlib import Path

from amas_code import effects, policy, project, redact, repomap, sandbox, toolcalls, tools, ui
from amas_code.checkpoint import Checkpoint
from amas_code.report import Report

NOT_COPIED = (
    "[no checkpoint: it would have copied more than checkpoint_max_mb; /undo cannot take it back]"
)
HELP = "The user can run it themselves"  # when no run with more was granted
NETWORK_HELP = (
    ", or allow the network for every boxed command in their own ~/.amas/config.yaml "
    "(sandbox_network: true)"
)
TARGETS = ("path", "command", "url", "query", "selector", "pattern")  # the argument a call is about


def ask(gate: policy.Gate, verdict: effects.Verdict, detail=None) -> effects.Answer:
    """The one question to the person: yes or no, and what they typed instead of an answer."""
    # the wider yeses the kind offers: this session, always
    scopes = {"s": policy.SESSION.get(verdict.kind, ""), "a": policy.KINDS[verdict.kind][1]}
    question = verdict.question
    # a command cannot hide in blank characters
    if verdict.kind in ("shell", "unboxed", "grant", "timeout"):
        summary = ui.command_summary(verdict.key, policy.programs(verdict.key))
        question = question.replace(verdict.key, summary)
    choice, feedback = ui.question(question, detail, scopes)
    if choice != "n":
        note = gate.granted(verdict, always=choice == "a", session=choice == "s")
        if note:
            ui.info(note)
    return effects.Answer(choice != "n", feedback)


class Act:
    """The tool calls of one conversation, and the parts they go through, made here: the sandbox
    (decided once), the gate, the tools (which hold the session's box and browser) and the
    checkpoints. `limit` says how many tokens the conversation may take, of which one result gets a
    share."""

    def __init__(self, config: dict, root: Path, report: Report, limit: Callable):
        self.config = config
        self.root = root
        self.report = report
        self.limit = limit
        self.sandbox = sandbox.open(config)
        self.gate = policy.Gate(config, root, self.sandbox.mode)
        ask_gate = functools.partial(ask, self.gate)
        self.tools = tools.Tools(config, self.gate, ask_gate, self.sandbox.box)
        self.secrets = self.tools.secrets
        self.checkpoint = _checkpoints(config, root)

    def answer(self, call: toolcalls.Call, go_on: bool = True) -> dict:
        """The tool message answering one call: shown, run, redacted, capped and reported."""
        target = _target(call)
        ui.show_call(call.name, target)
        self.report.call(call.id, call.name, _arguments(call))
        outcome = effects.Outcome("Cancelled: too many calls at once.", "declined")
        if go_on:
            outcome = self.outcome(call)
        self.report.result(call.id, call.name, target, outcome)
        text = outcome.text
        if call.name == "shell_command":  # its first line is the command, shown above already
            ui.show_result(text.split("\n", 1)[-1], 3)
        else:
            ui.show_result(text, 0)
        return {"role": "tool", "tool_call_id": call.id, "content": text}

    def outcome(self, call: toolcalls.Call) -> effects.Outcome:
        """One call from the model: its result or error as text, secrets redacted, then capped once;
        and how it went: ok, failed, declined or denied."""
        try:
            done = self.dispatch(call)
        except effects.Declined as e:
            done = effects.Outcome(f"Error: {e}", "declined")
        except (ValueError, PermissionError) as e:  # the tools' way of saying what they cannot do
            done = effects.Outcome(f"Error: {e}", "failed")
        except Exception as e:  # the model reads this and tries again
            done = effects.Outcome(f"Error: {type(e).__name__}: {e}", "failed")
        return effects.Outcome(self.said(done.text), done.status)

    def said(self, text: str) -> str:
        """What a tool or command printed, as the model may read it: the secrets amas knows hidden,
        then capped (after: a cut could halve a secret, and the half would not be found)."""
        text = text or "Tool executed successfully (no output)"
        return effects.cap(self.secrets.redact(text), self.result_limit())

    def dispatch(self, call: toolcalls.Call) -> effects.Outcome:
        """One call run: what its tool returned, or the outcome of the effect it wants."""
        args = self.tools.check(call)
        done = getattr(self.tools, call.name)(**args)
        if isinstance(done, (effects.Change, effects.Command)):
            return self.effect(done)
        return effects.Outcome(str(done), "ok")

    def effect(self, effect: effects.Change | effects.Command) -> effects.Outcome:
        """Ask once (with the diff or the command), record the checkpoint, perform; the result."""
        verdict = self.gate.judge(effect)
        if verdict.decision == "deny":
            return effects.Outcome(f"Error: {verdict.reason}", "denied")
        detail = self.detail(effect)
        if verdict.decision == "allow":
            if detail is not None:
                ui.console.print(detail, overflow="fold")
            return self.escape(effect, self.perform(effect))
        yes, feedback = ask(self.gate, verdict, detail)
        if yes:
            return self.escape(effect, self.perform(effect))
        by = "by user" if ui.can_ask() else "(no terminal to ask the user on)"
        declined = f"{_declined(effect)} declined {by}."
        if verdict.reason:  # a place outside the project
            declined = f"Error: {verdict.reason} was declined by the user"
        said = f"{declined} They said: {feedback}" if feedback else declined
        return effects.Outcome(said, "declined")

    def detail(self, effect: effects.Change | effects.Command):
        """What the person sees before deciding: a change's diff (a picture's size)."""
        if isinstance(effect, effects.Command):
            return None
        name = project.shown(self.root, effect.path)
        old = effect.old or b""
        if project.looks_binary(effect.new) or project.looks_binary(old):
            return f"{name}: binary file, {len(old):,} → {len(effect.new):,} bytes"
        old_text = None  # a new file: its diff says so
        if effect.old is not None:
            old_text = old.decode(errors="replace")
        new_text = effect.new.decode(errors="replace")
        return ui.diff(old_text, new_text, name)

    def escape(
        self, effect: effects.Change | effects.Command, done: tuple[str, bool]
    ) -> effects.Outcome:
        """A command the box may have stopped is offered once more with one capability more (the
        network, the repository writable, a folder writable), asked in amas's words; the answer
        is never remembered, and without a terminal it is no."""
        text, boxed = done
        offers = sandbox.refused(text) if boxed and isinstance(effect, effects.Command) else []
        if not offers:
            return effects.Outcome(text, "ok")
        grant = self.grant(effect.line, offers, _printed(text))
        if not grant:
            what = ", ".join(policy.GRANTS[o].split(":")[0].split(" (")[0] for o in offers)
            note = f"the box may have stopped it (it may need {what}); no run with more was granted"
            more = NETWORK_HELP if "network" in offers else ""
            return effects.Outcome(f"{text}\n[{note}. {HELP}{more}]", "declined")
        again, _ = self.perform(effect, grant)
        said = "a writable " + grant if grant.startswith("/") else policy.GRANTS[grant]
        allowed = f"{text}\n[run again once with {said}, as the user allowed]\n{again}"
        return effects.Outcome(allowed, "ok")

    def grant(self, line: str, offers: list[str], printed: str) -> str:
        """The capability the person grants for one more run ("" for none): each offer asked in
        turn; a folder is the one they type, checked (sandbox.grantable)."""
        for offer in offers:
            verdict = self.gate.judge_grant(line, offer)
            yes, words = ask(self.gate, verdict, printed)
            if offer != "folder" and yes:
                return offer
            folder = sandbox.grantable(words, self.root) if offer == "folder" and words else ""
            if words and offer == "folder" and not folder:
                ui.warning(
                    f"{words}: not a folder a grant may open (missing, the home, a key's place)"
                )
            if folder:
                return folder
        return ""

    def perform(
        self, effect: effects.Change | effects.Command, grant: str = ""
    ) -> tuple[str, bool]:
        """Do it inside its checkpoint (a command in the box, with the one capability granted, if
        any); the result with the checkpoint's note, and whether a command ran in the box."""
        boxed = isinstance(effect, effects.Command) and bool(self.tools.box)
        before = self.checkpoint.latest() if self.checkpoint else None
        with self.recording(effect, grant) as record:
            if isinstance(effect, effects.Command):
                done = self.run_command(effect, grant)
            else:
                done = self.write(effect)
        self.report_checkpoint(before)
        note = record.note if record else ""
        if note:
            done += f"\n{note}" if isinstance(effect, effects.Command) else f" {note}"
        return done, boxed

    def report_checkpoint(self, before: str | None) -> None:
        """A checkpoint the last action made, for scripts."""
        latest = self.checkpoint.latest() if self.checkpoint else None
        if latest and latest != before:
            files = self.checkpoint.history(limit=1)[0].get("files", [])
            self.report.checkpoint(latest, files)

    def run_command(self, command: effects.Command, grant: str = "") -> str:
        """The command, its output shown live while it runs."""
        box = self.tools.box and dataclasses.replace(self.tools.box, grant=grant)
        env = redact.child_env(self.config)
        title = ui.command_summary(command.line, policy.programs(command.line))
        with ui.Tail(title, command.timeout) as tail:  # its limit beside its time
            return sandbox.run(command, self.root, env, box, watch=tail.feed)

    def recording(self, effect: effects.Change | effects.Command, grant: str = ""):
        if self.checkpoint is None:
            return contextlib.nullcontext()
        if isinstance(effect, effects.Command) and self.copies_too_much(effect.line):
            return contextlib.nullcontext(types.SimpleNamespace(note=NOT_COPIED))
        if isinstance(effect, effects.Command):
            # the box keeps the repository read-only but for its grant: git's state stays put there
            git = not self.tools.box or grant == "repository"
            label = f"[amas] shell: {self.secrets.redact(effect.line)[:200]}"  # kept on disk
            return self.checkpoint.recording(label, git=git)
        if not effect.path.is_relative_to(self.root):
            return contextlib.nullcontext()
        label = f"[amas] {effect.verb} {project.shown(self.root, effect.path)}"
        return self.checkpoint.recording(label, [effect.path])

    def copies_too_much(self, line: str) -> bool:
        """Whether a command runs without a checkpoint because one would copy more than
        checkpoint_max_mb: asked first (never settled by --yes; no terminal: no copy)."""
        limit = self.config.get("checkpoint_max_mb") or 200
        size = self.checkpoint.copy_size()
        if size <= limit << 20:
            return False
        copied = f"would copy {size >> 20} MB into ~/.amas (checkpoint_max_mb: {limit})"
        question = f"The checkpoint before `{line}` {copied}. Copy it?"
        return not ask(self.gate, effects.Verdict("ask", "copy", question, key=line)).yes

    def write(self, change: effects.Change) -> str:
        """The change written where it was approved: no folder on its way may have become a link
        since (the project's, or the filesystem's root for a path outside)."""
        inside = change.path.is_relative_to(self.root)
        project.write(change.path, [change.new], self.root if inside else Path("/"))
        name = project.shown(self.root, change.path)
        self.tools.touched.add(name)
        if change.verb == "screenshot":
            return str(change.path)
        new = change.new
        lines = new.count(b"\n") + (not new.endswith(b"\n") and bool(new))
        said = f"{change.verb.capitalize()} {name}: {ui.plural(lines, 'line')}"
        return said + self.syntax_note(change)

    def syntax_note(self, change: effects.Change) -> str:
        """A parse error the change brought into a file the map parses, said so the model fixes it
        now; the change itself stays (it was approved and checkpointed)."""
        if not self.config.get("check_syntax", True):
            return ""
        try:
            line = repomap.syntax_error(change.path, change.old, change.new)
        except Exception:  # a grammar that fails to load costs the check, never the edit
            return ""
        if line is None:
            return ""
        return (
            f"\nWarning: the file no longer parses: a syntax error at line {line} "
            "(it parsed before this change, which was kept). Fix it before going on."
        )

    def result_limit(self) -> int:
        """Characters one tool result may take: a share of the context, at most tools.MAX_RESULT."""
        return min(tools.MAX_RESULT, max(4000, self.limit() * 3 // 2))


def _printed(text: str) -> str:
    """What the command printed last, quoted as its own words (never amas's reason)."""
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("[")]
    last = ui.one_line(lines[-1])[:200] if len(lines) > 1 else ""
    return f"The command printed: {last}" if last else ""


def _target(call: toolcalls.Call) -> str:
    """What a call is about (its path, command, url...), for the line that shows it."""
    found = [str(call.args[k]) for k in TARGETS if k in (call.args or {})]
    if found:
        return found[0]
    return str(call.raw)[:80]


def _arguments(call: toolcalls.Call):
    """A call's arguments for the scripting events: the object, or the text when it is not one."""
    if call.args is None:
        return str(call.raw)
    return call.args


def _declined(effect: effects.Change | effects.Command) -> str:
    if isinstance(effect, effects.Command):
        return "Command"
    return "Screenshot" if effect.verb == "screenshot" else "Edit"


def _checkpoints(config: dict, root: Path) -> Checkpoint | None:
    """The project's checkpoints, if on; never of the home (or / or above it), which the box keeps
    read-only."""
    if config["checkpoint_on_edit"] and sandbox.writable_root(root):
        return Checkpoint(root, config["ignore"])
    return None
