"""The orchestrator: one tool call end to end. Bind the arguments, run the handler; for an effect,
judge it (policy), ask once, record the checkpoint, perform it (a command in the box), offer the way
out of the box; then redact, cap once and report what the model reads."""

import contextlib
import dataclasses
import functools
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from amas_code import effects, home, policy, project, redact, sandbox, toolcalls, tools, ui
from amas_code.checkpoint import TROUBLE, Checkpoint, Record
from amas_code.report import Report

NOT_COPIED = (
    "[no checkpoint: it would have copied more than checkpoint_max_mb; /undo cannot take it back]"
)
HELP = "The user can run it themselves"  # when no run with more was granted
NETWORK_HELP = (
    ", or allow the network for every boxed command in their own ~/.amas/config.yaml "
    "(sandbox_network: true)"
)
GIT_OPTIONS_WITH_VALUE = {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env"}
FOLDER_TRIES = 5  # answers to a folder question before it counts as no
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
        self.broken = {}  # files a change of this turn left unparsable: path -> bytes before it

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
        args = self.tools.bind(call)
        done = getattr(self.tools, call.name)(**args)
        if isinstance(done, (effects.Change, effects.Command)):
            return self.effect(done)
        return effects.Outcome(str(done), "ok")

    def effect(self, effect: effects.Change | effects.Command) -> effects.Outcome:
        """Ask once (with the diff or the command), record the checkpoint, perform; the result."""
        verdict = self.gate.judge(effect)
        if verdict.decision == "deny":
            return effects.Outcome(f"Error: {verdict.reason}", "denied")
        if verdict.kind == "timeout" and not ui.can_ask():
            return self.capped(effect)
        detail = self.detail(effect)
        if verdict.decision == "allow":
            if detail is not None:
                ui.console.print(detail, overflow="fold")
            return self.escape(effect, self.perform(effect))
        yes, feedback = ask(self.gate, verdict, detail)
        if yes:
            return self.escape(effect, self.perform(effect))
        declined = f"{_declined(effect)} declined by user."
        if not ui.can_ask():
            declined = f"{_declined(effect)} declined (no terminal to ask the user on)."
        if verdict.reason:  # a place outside the project
            declined = f"Error: {verdict.reason} was declined by the user"
        if verdict.reason and not ui.can_ask():
            declined = f"Error: {verdict.reason} was declined: no terminal to ask the user on"
        if feedback:
            declined += f" They said: {feedback}"
        return effects.Outcome(declined, "declined")

    def capped(self, command: effects.Command) -> effects.Outcome:
        """A command given more time than shell_timeout where no one can allow it: run within
        shell_timeout (judged as any command), the model told why (a small model asks for 60 s by
        habit, and a refusal cost it a turn)."""
        ceiling = self.config["shell_timeout"]
        done = self.effect(dataclasses.replace(command, timeout=ceiling))
        said = f"[run within shell_timeout's {ceiling:g} s, not the {command.timeout:g} s asked: "
        said += "only the user can allow longer, in a terminal]"
        return effects.Outcome(f"{done.text}\n{said}", done.status)

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
        """A command the box stopped is offered once more with one capability more (the network,
        the repository writable, a folder writable), asked in amas's words; what the box refused
        is read from its own mounts (sandbox.refused), the answer is never remembered, and without
        a terminal it is no."""
        text, boxed = done
        if not boxed or not isinstance(effect, effects.Command):
            return effects.Outcome(text, "ok")
        offers, refusal = self.refusal(effect.line, text)
        if not offers and refusal:  # a place no grant opens (/run/user): the model is told
            return effects.Outcome(f"{text}\n[{_stopped(offers, refusal)}]", "ok")
        if not offers:
            return effects.Outcome(text, "ok")
        grant = self.grant(effect.line, offers, _printed(text), refusal)
        if not grant:
            return effects.Outcome(f"{text}\n[{_not_granted(offers, refusal)}]", "declined")
        again, _ = self.perform(effect, grant)
        said = f"a writable {grant}"
        if not grant.startswith("/"):
            said = policy.GRANTS[grant]
        allowed = f"{text}\n[run again once with {said}, as the user allowed]\n{again}"
        return effects.Outcome(allowed, "ok")

    def refusal(self, line: str, text: str):
        """What the box refused a command that failed: the grants that could let it run once
        more, and the place it tried (sandbox.Refusal, or None)."""
        box = self.tools.box
        programs = _programs(line)
        read = _as_read(text, line)
        return sandbox.refused(read, self.root, box, programs), sandbox.tried(
            read, self.root, box, programs
        )

    def grant(
        self, line: str, offers: list[str], printed: str, refusal: sandbox.Refusal | None
    ) -> str:
        """The capability the person grants for one more run ("" for none), each offer asked in
        turn: the network or the repository yes or no, a folder the one they give (see folder)."""
        for offer in offers:
            if offer != "folder":
                if ask(self.gate, self.gate.judge_grant(line, offer), printed).yes:
                    return offer
            elif refusal:
                folder = self.folder(line, refusal)
                if folder:
                    return folder
        return ""

    def folder(self, line: str, refusal: sandbox.Refusal) -> str:
        """The folder the person opens for one more run: proposed from what the box refused, checked
        (sandbox.grantable) and asked again after a wrong one, its one reason said; confirmed when
        it is not what they typed (links followed), made when it does not exist yet; "" for none."""
        question = self.gate.judge_grant(line, "folder").question
        question = question.replace(line, ui.command_summary(line, policy.programs(line)))
        printed = f"The command printed: {ui.one_line(refusal.said)[:200]}"
        detail = "\n".join([printed, _proposed(refusal)])
        proposed = sandbox.tilde(refusal.folder)
        for _ in range(FOLDER_TRIES):
            typed = ui.folder(question, proposed, detail or None)
            detail = ""  # said once
            if not typed:
                return ""
            path, reason = sandbox.grantable(typed, self.root)
            if reason:
                ui.warning(f"{typed} ({sandbox.tilde(path)}): {reason}")
            elif path == refusal.folder or self.confirmed(line, typed, path):
                return _made(path)
        return ""

    def confirmed(self, line: str, typed: str, path: str) -> bool:
        """Whether the person confirms a folder they typed that resolves elsewhere (links followed)
        or does not exist yet (amas makes it);
        yes at once for one that is exactly what they typed."""
        literal = os.path.normpath(
            os.path.join(os.path.realpath(self.root), os.path.expanduser(typed))
        )
        notes = []
        if literal != path:
            notes.append(f"{typed} is {sandbox.tilde(path)} (links followed)")
        if not os.path.isdir(path):
            notes.append(f"{sandbox.tilde(path)} does not exist: amas makes it")
        if not notes:
            return True
        question = f"{'; '.join(notes)}. Run `{line}` again once with it writable?"
        return ask(self.gate, effects.Verdict("ask", "grant", question, key=line)).yes

    def perform(
        self, effect: effects.Change | effects.Command, grant: str = ""
    ) -> tuple[str, bool]:
        """Do it inside its checkpoint (a command in the box, with the one capability granted, if
        any); the result with the checkpoint's note, and whether a command ran in the box."""
        boxed = isinstance(effect, effects.Command) and bool(self.tools.box)
        with self.recording(effect, grant) as record:
            if isinstance(effect, effects.Command):
                done = self.run_command(effect, grant)
            else:
                done = self.write(effect)
        if record is None:
            return done, boxed
        self.report_checkpoint(record)
        if record.note and isinstance(effect, effects.Command):
            done += f"\n{record.note}"
        elif record.note:
            done += f" {record.note}"
        return done, boxed

    def report_checkpoint(self, record: Record) -> None:
        """The checkpoint the action made, if it made one, for scripts."""
        if record.id:
            self.report.checkpoint(record.id, record.files)

    def run_command(self, command: effects.Command, grant: str = "") -> str:
        """The command, its output shown live while it runs."""
        box = self.tools.box
        if box:  # plan mode: the project read-only too
            box = dataclasses.replace(box, grant=grant, plan=self.tools.planning)
        env = redact.child_env(self.config)
        title = ui.command_summary(command.line, policy.programs(command.line))
        with ui.Tail(title, command.timeout) as tail:  # its limit beside its time
            return sandbox.run(dataclasses.replace(command, env=env), self.root, box, tail.feed)

    def recording(self, effect: effects.Change | effects.Command, grant: str = ""):
        """The checkpoint around the effect; it gives the Record of what it made (None: off)."""
        if self.checkpoint is None or self.tools.planning:  # plan mode changes nothing
            return contextlib.nullcontext()
        limit = self.config.get("checkpoint_max_mb") or 200
        if isinstance(effect, effects.Command) and self.copies_too_much(effect.line, limit):
            return contextlib.nullcontext(Record(NOT_COPIED))
        if isinstance(effect, effects.Command):
            # the box keeps the repository read-only but for its grant: git's state stays put there
            git = not self.tools.box or grant == "repository"
            label = f"[amas] shell: {self.secrets.redact(effect.line)[:200]}"  # kept on disk
            # what it makes past the limit is not copied either, and said
            return self.checkpoint.recording(label, git=git, limit=limit << 20)
        if not effect.path.is_relative_to(self.root):
            return contextlib.nullcontext(Record())
        label = f"[amas] {effect.verb} {project.shown(self.root, effect.path)}"
        return self.checkpoint.recording(label, [effect.path])

    def copies_too_much(self, line: str, limit: int) -> bool:
        """Whether a command runs without a checkpoint because one would copy more than limit MB
        (checkpoint_max_mb) before it: asked first
        (never settled by --yes; no terminal: no copy)."""
        try:
            size = self.checkpoint.copy_size()
        except TROUBLE:  # the checkpoint fails and says so; the command runs all the same
            return False
        if size <= limit << 20:
            return False
        copied = f"would copy {size >> 20} MB into ~/.amas (checkpoint_max_mb: {limit})"
        question = f"The checkpoint before `{line}` {copied}. Copy it?"
        return not ask(self.gate, effects.Verdict("ask", "copy", question, key=line)).yes

    def write(self, change: effects.Change) -> str:
        """The change written where it was approved: no folder on its way may have become a link
        since (the project's, or the filesystem's root for a path outside)."""
        if change.verb in policy.MEMORY:  # the user's memory: private, never the model's file
            home.write_private(change.path, change.new.decode())
            return f"Done: {change.verb} in the memory; later sessions see it."
        beneath = Path("/")  # folders opened one name at a time from here, never through a link
        if change.path.is_relative_to(self.root):
            beneath = self.root
        project.write(change.path, [change.new], beneath)
        name = project.shown(self.root, change.path)
        self.tools.wrote(change)
        if change.verb == "screenshot":
            return str(change.path)
        new = change.new
        lines = new.count(b"\n") + (not new.endswith(b"\n") and bool(new))
        said = f"{change.verb.capitalize()} {name}: {ui.plural(lines, 'line')}"
        return said + self.syntax_note(change)

    def syntax_note(self, change: effects.Change) -> str:
        """A parse error the change brought into a file the map parses, said so the model fixes it
        now; the change itself stays (it was approved and checkpointed)."""
        line = tools.parse_error(self.config, change.path, change.old, change.new)
        if line is None:
            return ""
        self.broken.setdefault(change.path, change.old)
        return (
            f"\nWarning: the file no longer parses: a syntax error at line {line} "
            "(it parsed before this change, which was kept). Fix it before going on."
        )

    def left_broken(self) -> list[str]:
        """The files this turn's changes left unparsable and that still are (a later change may
        have mended them), each with its line; forgotten after."""
        said = []
        for path, before in self.broken.items():
            with contextlib.suppress(OSError):
                line = tools.parse_error(self.config, path, before, path.read_bytes())
                if line is not None:
                    said.append(f"{project.shown(self.root, path)} (a syntax error at line {line})")
        self.broken = {}
        return said

    def result_limit(self) -> int:
        """Characters one tool result may take: a share of the context, at most tools.MAX_RESULT."""
        return min(tools.MAX_RESULT, max(4000, self.limit() * 3 // 2))


def _printed(text: str) -> str:
    """What the command printed last, quoted as its own words (never amas's reason)."""
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("[")]
    if len(lines) < 2:  # only its own `$ command` line
        return ""
    return f"The command printed: {ui.one_line(lines[-1])[:200]}"


def _as_read(result: str, line: str) -> str:
    """A command's result with its command on one line (sandbox.refused reads what follows the
    first line as the command's output)."""
    head = f"$ {line}"
    if not result.startswith(head):
        return result
    return "$ " + " ".join(line.split()) + result[len(head) :]


def _programs(line: str) -> tuple[str, ...]:
    """The programs a line may run, by name (behind env, sh -c or a path too); git only where it
    may write the repository, not for a command git itself lists as one that only reads."""
    found = []
    for words in policy.every_command(line):
        name = os.path.basename(words[0])
        if name != "git" or _git_command(words[1:]) not in _git_readers():
            found.append(name)
    return tuple(dict.fromkeys(found))


def _git_command(args: list[str]) -> str:
    """The git command of git's arguments, past its own options (-C dir, -c name=value, ...)."""
    at = 0
    while at < len(args) and args[at].startswith("-"):
        if args[at] in GIT_OPTIONS_WITH_VALUE:  # its value is the next word
            at += 1
        at += 1
    if at < len(args):
        return args[at]
    return ""


@functools.cache
def _git_readers() -> frozenset[str]:
    """The commands git lists as only reading: its interrogators and its info group (git status,
    diff --quiet, grep: failing there, the read-only repository is not why)."""
    lists = "list-info,list-ancillaryinterrogators,list-plumbinginterrogators"
    try:
        done = project.git(Path("/"), f"--list-cmds={lists}")
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(done.stdout.decode(errors="replace").split())


def _proposed(refusal: sandbox.Refusal) -> str:
    """What amas saw the box refuse, and the folder it proposes (or why none)."""
    if not refusal.folder:
        return f"{refusal.why}; no folder to propose ({refusal.reason})"
    new = ""
    if not os.path.isdir(refusal.folder):
        new = " (it does not exist yet: amas makes it)"
    return f"{refusal.why}: run again with {sandbox.tilde(refusal.folder)} writable{new}?"


def _made(path: str) -> str:
    """A granted folder, made first when it does not exist yet; "" when it cannot be made."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        ui.warning(f"{path} could not be made: {e.strerror}")
        return ""
    return path


def _not_granted(offers: list[str], refusal: sandbox.Refusal | None) -> str:
    """What the model is told when no run with more was granted."""
    more = ""
    if "network" in offers:
        more = NETWORK_HELP
    return f"{_stopped(offers, refusal)}; no run with more was granted. {HELP}{more}"


def _stopped(offers: list[str], refusal: sandbox.Refusal | None) -> str:
    """What the box stopped, in amas's words, for the model."""
    said = []
    if refusal and refusal.reason:
        said.append(f"{refusal.why} (no grant may open it: {refusal.reason})")
    elif refusal:
        said.append(refusal.why)
    if "repository" in offers:
        said.append("the box keeps the repository read-only (git cannot write it there)")
    if "network" in offers:
        said.append("it may need the network, which the box does not have")
    return "; ".join(said)


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
    if effect.verb in policy.MEMORY:
        return "Memory change"
    if effect.verb == "screenshot":
        return "Screenshot"
    return "Edit"


def _checkpoints(config: dict, root: Path) -> Checkpoint | None:
    """The project's checkpoints, if on; never of the home (or / or above it), which the box keeps
    read-only."""
    if config["checkpoint_on_edit"] and sandbox.writable_root(root):
        return Checkpoint(root, config["ignore"])
    return None
