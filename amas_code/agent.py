"""The agent: one conversation, the loop over model calls and tools, the system prompt, compaction, history."""

import contextlib
import itertools
import json
import re
import time
import uuid
from pathlib import Path

from amas_code import config as config_file
from amas_code import providers, repomap, safety, sandbox, skills, toolcalls, tools, ui
from amas_code.checkpoint import Checkpoint
from amas_code.report import Report

PROMPT_BUDGET = 2000  # tokens of system prompt; the project map gets what the rest leaves
RULES_BUDGET = 500  # tokens of rules.md and AGENTS.md, so the map keeps a useful share
WARN_STEPS = 20  # tool rounds in one turn before a soft warning (never a hard cap)
REPEATS = 4  # the same call this many times in a row ends the turn: the model is stuck
SUMMARY_TOKENS = 1500  # cap on a compaction summary
SUMMARIZE = (
    "Summarize this conversation between a user and a coding agent for the agent's own memory: the goals, decisions, "
    "files touched and their state, commands run and results, and open problems. Be concise and concrete; keep paths,"
    " names and numbers exact."
)
TARGETS = ("path", "command", "url", "query", "selector", "pattern")  # the argument a call is about
ALWAYS_MEANS = {  # what an 'always' answer covers, said in the question
    "edit": "the rest of this session's edits",
    "shell": "this exact command in this project, from now on; /permissions lists it",
    "outside": "this exact command outside the sandbox, from now on",
    "read": "reads outside the project, this session",
    "net": "this site, from now on",
}
MANY_CALLS = 50  # more calls than this in one reply are asked about before any runs
CHARS_PER_TOKEN = 3  # a rough, high-side estimate without a tokenizer


def estimate(text: str) -> int:
    """Tokens, roughly and on the high side, without loading a tokenizer."""
    return len(text) // CHARS_PER_TOKEN


class Agent:
    """One conversation with the model in one project; it makes and owns its model, gate, tools and checkpoints."""

    def __init__(
        self, config: dict, root: Path, resume: bool | str = False, report: Report | None = None
    ):
        self.config, self.root = config, Path(root).resolve()
        self.log: Path | None = config_file.state_file(self.root, "history.jsonl")
        chosen = resume if isinstance(resume, str) else None  # --resume picked one; -c the latest
        self.session, self.messages = self.resume(chosen) if resume else (uuid.uuid4().hex[:12], [])
        self.logged, self.attachments, self.warned = len(self.messages), [], set()
        self.preloading = None  # set once the REPL's thread importing litellm meanwhile is done
        self.sandbox = sandbox.status(config)  # the mode in force, and the line saying so
        self.box = sandbox.session(config)  # the box commands run in, with the session's /tmp
        self.model = providers.Model(config)
        self.gate = safety.Gate(config, self.root, self.sandbox[0])
        self.report = report or Report()
        self.cwd, self.notes = Path.cwd().resolve(), []  # where the user is; what they did since
        self.trusted = config_file.trusted(self.root)  # its rules and skills may steer the model
        self.checkpoint = None
        if config["checkpoint_on_edit"]:
            self.checkpoint = Checkpoint(self.root, config["ignore"], self.session)
        self.tools = tools.Tools(self.root, config, self.gate, self.answer)
        prompt = (Path(__file__).parent / "prompt.md").read_text(encoding="utf-8")
        self.prompt = re.split(r"<!-- \w+ -->\n", prompt)  # its core, browsing and rules parts
        self.repair()

    # -- history ----------------------------------------------------------------------------------
    def entries(self) -> list[dict]:
        """Every well-formed line of the history."""
        try:
            lines = config_file.read_private(self.log).splitlines() if self.log.is_file() else []
        except (OSError, config_file.ConfigError) as e:
            ui.warning(f"cannot read the history: {e}")
            lines = []
        return [e for e in map(_entry, lines) if e]

    def conversations(self) -> list[dict]:
        """The conversations in the history, newest first: session, time, first message, count."""
        found = {}
        for e in self.entries():
            if "content" not in e:
                continue
            seen = found.setdefault(
                e["session"], {"session": e["session"], "first": "", "count": 0}
            )
            seen["time"], seen["count"] = e["time"], seen["count"] + 1
            if e["role"] == "user" and not seen["first"]:
                seen["first"] = " ".join(str(e["content"]).split())[:80]
        return sorted(found.values(), key=lambda c: c["time"], reverse=True)

    def resume(self, chosen: str | None = None) -> tuple[str, list[dict]]:
        """A session's id and messages: the chosen one, or the latest (after /clear or /compact, the new
        conversation)."""
        entries = self.entries() or [{"session": uuid.uuid4().hex[:12], "time": 0}]
        session = chosen or entries[-1]["session"]
        keep = ("role", "content", "tool_calls", "tool_call_id")
        mine = [e for e in entries if e["session"] == session]
        found = [{k: e[k] for k in keep if k in e} for e in mine if "content" in e]
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime((mine or entries)[-1]["time"]))
        ui.info(
            f"resuming the conversation of {when} ({ui.plural(len(found), 'message')})"
            if found
            else "no earlier conversation"
        )
        return session, found

    def flush(self, marker: bool = False) -> None:
        """Append what .amas/history.jsonl lacks (or a session marker); a folder that cannot hold it warns once."""
        new = [{"role": "session"}] if marker else self.messages[self.logged :]
        self.logged = len(self.messages)
        stamp = {"session": self.session, "time": time.time()}
        try:
            if self.log and new:
                config_file.append_private(
                    self.log, "".join(json.dumps({**stamp, **m}) + "\n" for m in new)
                )
        except (OSError, config_file.ConfigError) as e:
            self.warn(f"the conversation is not saved (no --continue): {e}")
            self.log = None

    def new_session(self) -> None:
        """A fresh session in the history (after /clear or /compact), so --continue resumes what comes next."""
        self.session = uuid.uuid4().hex[:12]
        if self.checkpoint:
            self.checkpoint.session = self.session
        self.flush(marker=True)
        self.logged = 0
        self.flush()

    # -- the loop -----------------------------------------------------------------------------------
    def turn(self, text: str) -> bool:
        """Run the model until it answers without tools; False if the user cancelled (the conversation is kept)."""
        start = len(self.messages)
        text = self.gate.secrets.redact(text)  # piped in too: a log with a token in it
        self.messages.append({"role": "user", "content": self.context() + text})
        self.attachments, self.notes = [], []
        if self.checkpoint:
            self.checkpoint.request = text[:300]
        try:
            self.loop()
        except KeyboardInterrupt:
            self.repair()
            ui.console.print()
            self.warn("cancelled; the conversation is kept")
            return False
        except providers.ProviderError:
            # nothing happened: the next request does not repeat it
            if len(self.messages) == start + 1:
                del self.messages[start:]
            raise
        finally:
            self.flush()
            # a browser unused for a whole turn gives its memory back
            self.tools.close(idle_only=True)
        return True

    def context(self) -> str:
        """What goes before the user's words: notes of what they did (/undo, !command), attached files."""
        notes = "".join(f"{note}\n\n" for note in self.notes)
        files = "".join(f"Attached file {p}:\n```\n{c}\n```\n\n" for p, c in self.attachments)
        return notes + files

    def warn(self, message: str) -> None:
        """A warning on the screen and, for scripts, in the report."""
        ui.warning(message)
        self.report.warning(message)

    def loop(self) -> None:
        calls, unread = [], False
        for step in itertools.count(1):
            if step == WARN_STEPS + 1:
                self.warn(f"{WARN_STEPS} tool rounds in this turn; Ctrl+C stops it")
            reply = self.reply()
            wanted = reply.get("tool_calls", [])
            if not wanted and self.unread(reply) and not unread:
                unread = True  # asked once to write its call again; a second time ends the turn
                continue
            if not wanted:
                return
            unread = False
            go_on = len(wanted) <= MANY_CALLS or self.many_calls(len(wanted))
            for call in wanted:
                calls.append(call["function"])
                self.messages.append(self.tool_message(call, _repeats(calls), go_on))
            if _repeats(calls) >= REPEATS:
                name = calls[-1]["name"]
                self.warn(
                    f"the model made the same {name} call {REPEATS} times in a row; turn ended"
                )
                return

    def many_calls(self, count: int) -> bool:
        """More calls in one reply than a person would expect: asked before any runs."""
        question = f"The model asks for {count} tool calls in one reply. Run them?"
        verdict = self.gate.settled(safety.Verdict("ask", "many", question))
        return verdict.decision == "allow" or self.answer(verdict)[0]

    def reply(self) -> dict:
        """One model call; switches to text tool calls, or compacts, once when the provider needs it."""
        switched = (
            None  # said once text tool calls worked: an empty stream may be the server failing
        )
        for attempt in range(3):
            try:
                reply = self.stream_reply()
                if switched:
                    self.warn(f"{switched}; using text tool calls for this session")
                return reply
            except providers.NoNativeTools as e:
                if self.model.text_tools:
                    raise
                self.model.text_tools, switched = True, e
            except providers.ProviderError as e:
                if e.kind != "context" or attempt or not (self.compact() or self.shrink()):
                    # they did not help: native tools again next time
                    self.model.text_tools &= switched is None
                    raise
        raise providers.ProviderError("the model call kept failing")

    def stream_reply(self) -> dict:
        """The model's next reply, streamed to the screen and added to the conversation."""
        self.wait_for_preload()
        messages = self.request()
        with ui.Stream(self.config["stream"], visible=toolcalls.visible) as stream:
            try:
                reply = self.model.complete(messages, self.tools.schemas(), stream)
            except KeyboardInterrupt:
                self.keep_partial(stream.text)
                raise
            self.report.reply(self.gate.secrets.redact(reply["content"]))
            if self.report.fmt == "text":
                stream.show(reply["content"])  # the answer, rendered once
        return self.keep_reply(reply)

    def keep_reply(self, reply: dict) -> dict:
        """The reply added to the conversation, with what went wrong said (lost, cut, empty)."""
        lost = reply.pop("lost", None)
        if lost:  # the partial answer is kept, and the model told where it stopped
            said = f"{reply['content']}\n\n[connection lost mid-answer: {lost}]"
            self.messages.append(reply | {"content": said})
            raise lost
        if reply.pop("cut", False):
            cap = self.config["max_tokens"]
            self.warn(f"the answer was cut at max_tokens ({cap}); raise it in your config")
        empty = not reply["content"].strip() and not reply.get("tool_calls")
        if empty and not reply.get("unreadable"):
            self.warn("the model sent an empty reply")
            return reply
        self.messages.append(reply)
        return reply

    def unread(self, reply: dict) -> bool:
        """Call markup the reader could not read (already cut from the text): the user is told in one
        line, the model how to write a call."""
        line = reply.pop("unreadable", None)
        if line:
            self.warn(line)
            self.messages.append({"role": "user", "content": toolcalls.error(self.tools.names)})
        return bool(line)

    def keep_partial(self, text: str) -> None:
        """An answer cut by Ctrl+C stays in the conversation, marked so."""
        if text.strip():
            said = f"{text}\n\n[interrupted by the user]"
            self.messages.append({"role": "assistant", "content": said})

    def wait_for_preload(self) -> None:
        """The spinner from the first Enter while a preloading litellm finishes (Ctrl+C here is clean;
        inside an import it is not)."""
        with ui.Stream(self.config["stream"]):
            # polled: Thread.join, interrupted, may take a running thread for finished (3.11)
            while self.preloading and not self.preloading.is_set():
                time.sleep(0.05)

    # -- tools: the one place an action is asked about, recorded and performed ---------------------
    def tool_message(self, call: dict, repeats: int, go_on: bool = True) -> dict:
        """The tool message answering one call: shown, run, capped, with a note when it repeats."""
        name, raw = call["function"]["name"], call["function"]["arguments"]
        target = self.gate.secrets.redact(_target(raw))
        ui.show_call(name, target)
        shown = raw if isinstance(raw, str) else json.dumps(raw)
        self.report.call(call["id"], name, _arguments(self.gate.secrets.redact(shown)))
        outcome = (
            self.outcome(name, raw) if go_on else ("Cancelled: too many calls at once.", "declined")
        )
        self.report.result(call["id"], name, target, outcome)
        result, shell = outcome[0], name == "shell_command"
        ui.show_result(result.split("\n", 1)[-1] if shell else result, 3 * shell)
        if repeats == REPEATS - 1:
            result += f"\n[note: you have made this same call {repeats} times in a row; change your approach]"
        return {"role": "tool", "tool_call_id": call["id"], "content": result}

    def execute(self, name: str, raw) -> str:
        """One call from the model: its result as the model reads it."""
        return self.outcome(name, raw)[0]

    def outcome(self, name: str, raw) -> tuple[str, str]:
        """One call from the model: its result or error as text, secrets redacted, then capped once;
        and how it went: ok, failed, declined or denied."""
        try:
            args = self.tools.check(name, raw)
            done = getattr(self.tools, name)(**args)
            if isinstance(done, (safety.Change, safety.Command)):
                done = self.act(done)
            status = "failed" if str(done).startswith("Error:") else "ok"
            text, status = done if isinstance(done, tuple) else (str(done), status)
        except safety.Declined as e:
            text, status = f"Error: {e}", "declined"
        except (ValueError, PermissionError) as e:
            text, status = f"Error: {e}", "failed"
        except Exception as e:  # the model reads this and tries again
            text, status = f"Error: {type(e).__name__}: {e}", "failed"
        text = text or "Tool executed successfully (no output)"
        return tools.cap(self.gate.secrets.redact(text), self.result_limit()), status

    def act(self, effect: safety.Change | safety.Command) -> tuple[str, str]:
        """Ask once (with the diff or the command), record the checkpoint, perform; the result."""
        verdict = self.gate.judge(effect)
        if verdict.decision == "deny":
            return f"Error: {verdict.reason}", "denied"
        detail = self.detail(effect)
        if verdict.decision == "allow":
            if detail is not None:
                ui.console.print(detail, overflow="fold")
            return self.escape(effect, self.perform(effect, verdict.boxed))
        yes, feedback = self.answer(verdict, detail)
        if yes:
            return self.escape(effect, self.perform(effect, verdict.boxed))
        declined = f"{_declined(effect)} declined by user."
        if verdict.reason:  # a place outside the project
            declined = f"Error: {verdict.reason} was declined by the user"
        said = f"{declined} They said: {feedback}" if feedback else declined
        return said, "declined"

    def detail(self, effect: safety.Change | safety.Command):
        """What the person sees before deciding: a change's diff (a picture's size)."""
        if isinstance(effect, safety.Command):
            return None
        name, old = self.tools.show(effect.path), effect.old or b""
        if tools.looks_binary(effect.new) or tools.looks_binary(old):
            return f"{name}: binary file, {len(old):,} → {len(effect.new):,} bytes"
        old_text, new_text = old.decode(errors="replace"), effect.new.decode(errors="replace")
        return ui.diff(old_text, new_text, name, self.gate.secrets.redact)

    def answer(self, verdict: safety.Verdict, detail=None) -> tuple[bool, str]:
        """The one question to the person: yes or no, and what they typed instead of an answer."""
        choices = "yna" if verdict.kind in safety.ALWAYS else "yn"
        question = verdict.question
        if verdict.kind in (
            "shell",
            "unboxed",
            "outside",
        ):  # a command cannot hide in blank characters
            question = question.replace(verdict.key, ui.command_summary(verdict.key))
        choice, feedback = ui.question(
            question, choices, detail, ALWAYS_MEANS.get(verdict.kind, "")
        )
        if choice in ("y", "a"):
            note = self.gate.granted(verdict, always=choice == "a")
            if note:
                ui.info(note)
        return choice in ("y", "a"), feedback

    def escape(
        self, effect: safety.Change | safety.Command, done: tuple[str, bool]
    ) -> tuple[str, str]:
        """A command the sandbox stopped is asked about once more, to run outside it."""
        text, boxed = done
        why = sandbox.blocked(text) if boxed and isinstance(effect, safety.Command) else None
        if not why:
            return text, "ok"
        verdict = self.gate.judge_escape(effect.line, why)
        if verdict.decision != "allow" and not self.answer(verdict)[0]:
            return (
                f"{text}\n[the sandbox stopped it ({why}); the user declined to run it outside]",
                "declined",
            )
        again, _ = self.perform(effect, boxed=False)
        return f"{text}\n[run again outside the sandbox, as the user allowed]\n{again}", "ok"

    def perform(
        self, effect: safety.Change | safety.Command, boxed: bool = True
    ) -> tuple[str, bool]:
        """Do it inside its checkpoint; the result with the checkpoint's note, and whether a command
        ran in the sandbox."""
        boxed = boxed and isinstance(effect, safety.Command) and bool(self.box)
        before = self.checkpoint.latest() if self.checkpoint else None
        with self.recording(effect) as record:
            if isinstance(effect, safety.Command):
                done = self.run_command(effect, boxed)
            else:
                done = self.write(effect)
        self.report_checkpoint(before)
        note = record.note if record else ""
        if note:
            done += f"\n{note}" if isinstance(effect, safety.Command) else f" {note}"
        return done, boxed

    def report_checkpoint(self, before: str | None) -> None:
        """A checkpoint the last action made, for scripts."""
        latest = self.checkpoint.latest() if self.checkpoint else None
        if latest and latest != before:
            files = self.checkpoint.history(limit=1)[0].get("files", [])
            self.report.checkpoint(latest, files)

    def run_command(self, command: safety.Command, boxed: bool) -> str:
        """The command, its output shown live while it runs."""
        box = self.box if boxed else None
        env = safety.child_env(self.config)
        hide = self.gate.secrets.redact
        with ui.Tail(ui.command_summary(hide(command.line)), hide) as tail:
            return sandbox.run(command, self.root, env, box, watch=tail.feed)

    def recording(self, effect: safety.Change | safety.Command):
        if self.checkpoint is None:
            return contextlib.nullcontext()
        if isinstance(effect, safety.Command):
            return self.checkpoint.recording(f"[amas] shell: {effect.line[:200]}")
        if not effect.path.is_relative_to(self.root):
            return contextlib.nullcontext()
        label = f"[amas] {effect.verb} {self.tools.show(effect.path)}"
        return self.checkpoint.recording(label, [effect.path])

    def write(self, change: safety.Change) -> str:
        tools.write(change.path, change.new)
        name = self.tools.show(change.path)
        self.tools.touched.add(name)
        if change.verb == "screenshot":
            return str(change.path)
        new = change.new
        lines = new.count(b"\n") + (not new.endswith(b"\n") and bool(new))
        return f"{change.verb.capitalize()} {name}: {ui.plural(lines, 'line')}"

    def result_limit(self) -> int:
        """Characters one tool result may take: a share of the context, at most tools.MAX_RESULT."""
        return min(tools.MAX_RESULT, max(4000, self.limit() * CHARS_PER_TOKEN // 2))

    def close(self) -> None:
        """Free what the tools hold (the browser) and the session's /tmp."""
        self.tools.close()
        if self.box:
            self.box.close()

    def repair(self) -> None:
        """After Ctrl+C or a kill: every tool call gets a result, so the next request is valid."""
        at = max((i for i, m in enumerate(self.messages) if m.get("tool_calls")), default=None)
        done = {m.get("tool_call_id") for m in self.messages[at:]} if at is not None else set()
        for call in self.messages[at]["tool_calls"] if at is not None else []:
            if call["id"] not in done:
                self.messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": call["id"],
                        "content": "Cancelled by the user.",
                    }
                )

    # -- the request --------------------------------------------------------------------------------
    def tokens(self, messages: list[dict], near: int = 0) -> int:
        """Tokens in messages: estimated, and counted exactly (litellm, tiktoken) only when the estimate is near."""
        guess = estimate(json.dumps(messages))
        if guess < near * 0.6:
            return guess
        counted = providers.token_count(self.model.name, messages)
        return guess if counted is None else counted

    def limit(self) -> int:
        context = self.model.context_limit()
        # room for the answer
        return context - min(self.config.get("max_tokens") or 0, context // 4)

    def prompted(self) -> list[dict]:
        """The system prompt and the conversation, as they would be sent now."""
        system = self.gate.secrets.redact(self.system_prompt())  # rules and map come from files
        return [{"role": "system", "content": system}, *self.messages]

    def request(self) -> list[dict]:
        """The system prompt and the conversation, compacted first when it passed the limit."""
        messages = self.prompted()
        if self.tokens(messages, self.limit()) > self.limit() and (self.compact() or self.shrink()):
            return self.prompted()
        return messages

    def last_user(self) -> str:
        said = [
            m["content"]
            for m in self.messages
            if m["role"] == "user" and isinstance(m.get("content"), str)
        ]
        return next(
            (s for s in reversed(said) if not s.startswith(("<tool_response", "[Summary"))), ""
        )

    def system_prompt(self) -> str:
        """The notes' template, text-tool instructions when needed, rules, skills, then the ranked project map."""
        core, browsing, rules = self.prompt
        head = core + ("\n" + browsing if "navigate" in self.tools.names else "") + "\n" + rules
        head += self.model.tool_prompt(self.tools.schemas())
        tail = f"\n## Context & Rules\nProject root: {self.root}\n{self.where()}"
        tail += self.rules() + self.skills()
        room = PROMPT_BUDGET - estimate(head + tail)
        for _ in range(3):
            found = (
                repomap.prompt_map(self.root, self.last_user(), self.tools.touched, room)
                if room > 50
                else ""
            )
            prompt = head + tail + (f"\n### Project map\n{found}\n" if found else "")
            over = (
                self.tokens([{"role": "system", "content": prompt}], PROMPT_BUDGET) - PROMPT_BUDGET
            )
            if over <= 0:
                return prompt
            room -= over + 20
        return head + tail

    def where(self) -> str:
        """The folder the user is in, when it is not the root: the paths they type start there."""
        if self.cwd == self.root or not self.cwd.is_relative_to(self.root):
            return ""
        here = self.cwd.relative_to(self.root).as_posix()
        return f"The user is in {here}/ (paths they mention are relative to it)\n"

    def rules(self) -> str:
        text = skills.rules(self.root, self.trusted)
        if estimate(text) > RULES_BUDGET:
            text = (
                text[: RULES_BUDGET * 3] + "\n[cut here: the rest did not fit in the system prompt]"
            )
            self.warn_once(
                f"AGENTS.md and .amas/rules.md are too long: the model sees the first ~{RULES_BUDGET} "
                "tokens (keep them short, or move detail into skills)"
            )
        return f"\n### Project rules\n{text}\n" if text else ""

    def skills(self) -> str:
        found, latest = skills.load(self.root, self.trusted), self.last_user()
        matched = [s for s in found if skills.matches(s, latest)]
        others = "\n".join(f"- {s['name']}: {s['description']}" for s in found if s not in matched)
        text = "".join(f"\n### Skill: {s['name']}\n{s['body']}\n" for s in matched)
        return text + (
            f"\n### Other skills (mention one by name to load it)\n{others}\n" if others else ""
        )

    def warn_once(self, message: str) -> None:
        if message not in self.warned:
            self.warned.add(message)
            self.warn(message)

    # -- compaction ---------------------------------------------------------------------------------
    def compact(self) -> int:
        """Replace everything before the latest turn with a shorter model-written summary; tokens freed."""
        # the latest turn
        start = max((i for i, m in enumerate(self.messages) if m["role"] == "user"), default=0)
        if start == 0:
            return ui.info("nothing before the latest turn to compact") or 0
        old = self.messages[:start]
        new = self.summary(old)
        freed = self.tokens(old) - self.tokens(new)
        if freed <= 0:
            self.warn("the summary was not shorter than what it would replace; nothing changed")
            return 0
        self.messages[:start] = new
        self.new_session()
        ui.success(f"compacted {ui.plural(start, 'message')}: {freed} tokens freed")
        return freed

    def summary(self, old: list[dict]) -> list[dict]:
        """The messages that stand for `old`: the model's summary of them, and a reply that takes it."""
        transcript = "\n\n".join(
            f"{m['role']}: {m.get('content') or ''} {m.get('tool_calls', '')}"[:4000] for m in old
        )
        summarizer = providers.Model(
            {**self.config, "max_tokens": SUMMARY_TOKENS}, self.model.usage
        )
        with ui.Stream(self.config["stream"]):
            said = summarizer.complete(
                [{"role": "system", "content": SUMMARIZE}, {"role": "user", "content": transcript}]
            )
        return [
            {
                "role": "user",
                "content": f"[Summary of the earlier conversation]\n{said['content']}",
            },
            {"role": "assistant", "content": "Understood. I will continue from that summary."},
        ]

    def shrink(self) -> int:
        """When the latest turn alone is too long: its longest tool results cut to a share of the context."""
        share, long = (
            max(2000, self.limit() // 4) * 3,
            [m for m in self.messages if m["role"] == "tool"],
        )
        long = [m for m in long if len(m["content"]) > share]
        for m in long:
            m["content"] = tools.cap(m["content"], share)
        if long:
            self.warn(
                f"cut {ui.plural(len(long), 'long tool result')} so the conversation fits the context"
            )
        return len(long)


def _entry(line: str) -> dict | None:
    """One line of the history, if it has the shape amas writes (a hand-edited or damaged one is skipped)."""
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
    return entry if all(map(_whole_call, entry.get("tool_calls", []))) else None


def _whole_call(c) -> bool:
    return (
        isinstance(c, dict) and isinstance(c.get("id"), str) and isinstance(c.get("function"), dict)
    )


def _target(raw) -> str:
    """What a call is about (its path, command, url...), for the line that shows it."""
    args = toolcalls.arguments(raw)
    if isinstance(args, dict):
        found = [str(args[k]) for k in TARGETS if k in args]
        if found:
            return found[0]
    return str(raw)[:80]


def _arguments(raw):
    """A call's arguments for the scripting events: the object, or the text when it is not one."""
    args = toolcalls.arguments(raw)
    return args if isinstance(args, dict) else str(raw)


def _declined(effect: safety.Change | safety.Command) -> str:
    if isinstance(effect, safety.Command):
        return "Command"
    return "Screenshot" if effect.verb == "screenshot" else "Edit"


def _repeats(calls: list[dict]) -> int:
    """How many times in a row the last call was made, with the same arguments up to case, spaces and `./`."""
    same = [c["name"] + ":" + re.sub(r"\s+|\./", "", str(c["arguments"])).lower() for c in calls]
    return next((n for n in range(1, len(same)) if same[-1 - n] != same[-1]), len(same))
