"""The agent: one conversation and its loop over model calls and tool calls, with compaction; it
makes and owns the parts each step uses (the model, the gate, the tools, checkpoints, the context,
the log)."""

import itertools
import json
import re
import time
from pathlib import Path

from amas_code import act, context, effects, history, project, providers, toolcalls, tools, ui
from amas_code.report import CHANGES, Report

WARN_STEPS = 20  # tool rounds in one turn before a soft warning (never a hard cap)
REPEATS = 4  # the same call this many times in a row ends the turn: the model is stuck
STOPPED = {  # why a reply ended before the model finished it
    "cut": "the answer was cut at max_tokens ({cap}); raise it in your config",
    "looped": "the model kept repeating itself; its answer was stopped after the first round",
}
SAME_AGAIN = (
    "this call and its result are the same as your last one: nothing changed in between. Take the "
    "next step instead: read the code the result points to, or change it"
)
SUMMARY_WORDS = 2  # one word ("OK.", "Done.") is not a summary
MANY_CALLS = 50  # more calls than this in one reply are asked about before any runs
# calls of one reply past this are not run nor answered: the model is told in one line
MAX_CALLS = toolcalls.MAX_CALLS
EMPTY = "[Your reply was empty. Go on: make the next tool call, or answer the user.]"
SHOWN = (
    "[You showed code but changed no file, and the user asked for a change: make it now with the "
    "tools, as tool calls, not as code in your answer (read_file, then edit_file or write_file; "
    "shell_command to run the tests).]"
)
ECHOED = (
    "[Your reply only repeated a tool's result. Go on: make the next tool call, or answer the user "
    "in your own words.]"
)


class TurnLimit(Exception):
    """A one-shot reached its --max-turns: the conversation is kept (every call answered), and
    `amas -c` resumes it."""


class Agent:
    """One conversation with the model in one project. Its parts, made here or by the orchestrator
    (act.Act: the sandbox, gate, tools and checkpoints), are attributes the REPL may read; what a
    session does is a verb: turn, note, attach, clear, compact, switch_model, close."""

    def __init__(
        self, config: dict, root: Path, resume: bool | str = False, report: Report | None = None
    ):
        self.config = config
        self.root = Path(root).resolve()
        self.history = history.Log(self.root)
        self.session, self.messages = self.history.opened(resume)
        self.attachments = []
        self.asked = ""  # the user's own words in the turn under way
        self.ok = True  # the last turn ended by itself (not Ctrl+C, not an error)
        self.notes = []  # what the user did since the last turn (/undo, !command)
        self.max_requests = 0  # a one-shot's --max-turns: model requests in its turn (0: no end)
        self.report = report or Report()
        self.model = providers.Model(config)
        self.context = context.Context(self.root, config, self.model, self.warn)
        self.act = act.Act(config, self.root, self.report, self.context.limit)
        self.sandbox = self.act.sandbox
        self.gate = self.act.gate
        self.tools = self.act.tools
        self.secrets = self.tools.secrets
        self.checkpoint = self.act.checkpoint
        self.bind_session()
        self.repair()

    # -- what the person does between turns --------------------------------------------------------
    def redact(self, text: str) -> str:
        """Text with the secrets amas knows replaced by [REDACTED]."""
        return self.secrets.redact(text)

    def note(self, text: str) -> None:
        """Something the user did (/undo, !command), told the model before their next message."""
        self.notes.append(text)

    def ran(self, output: str) -> None:
        """A command the user ran themselves (!command): its output told the model before their
        next message, as a tool's would be (secrets hidden, then capped)."""
        self.note(f"The user ran a command themselves:\n```\n{self.act.said(output)}\n```")

    def attach(self, path: Path) -> str:
        """A file added to the next message (redacted with it, capped); its name as shown.
        ValueError or OSError when it cannot be."""
        path = self.tools.path(str(path))
        text = tools.attachment(path)
        self.tools.saw(path)
        self.attachments.append((project.shown(self.root, path), text))
        return project.shown(self.root, path)

    def attach_mentioned(self, line: str) -> None:
        """The files a message names with @path attached, each said; an @word that names no file
        stays plain text (@functools.cache), and a file that cannot be attached is said: the
        message goes all the same (a one-shot's too)."""
        for name, path in project.mentioned(line, self.context.cwd):
            try:
                ui.success(f"attached {self.attach(path)}")
            except (OSError, ValueError) as e:
                self.warn(f"not attached @{name}: {e}; the message goes without it")

    def plan(self, on: bool) -> None:
        """Plan mode on or off: reading tools only, commands with the project read-only, no
        checkpoints; the answer is the plan (it stays in the conversation when plan mode ends)."""
        self.tools.planning = on

    def clear(self) -> None:
        """A new conversation (/clear)."""
        self.messages.clear()
        self.new_session()

    def switch_model(self, name: str) -> None:
        """/model NAME: another model from the next request on; the configured server and key only
        for the same provider (ProviderError for a model string no provider takes)."""
        providers.check_model(name)
        config = {**self.config, "api_base": None, "api_key": None, "model": name}
        if name.split("/")[0] == self.config["model"].split("/")[0]:
            config.update(api_base=self.config["api_base"], api_key=self.config["api_key"])
        self.use_model(providers.Model(config, self.model.usage, self.model.known))

    def use_model(self, model: providers.Model) -> None:
        """Talk to this model from the next request on (its text variant, another one)."""
        self.model = model
        self.context.model = model

    # -- history ----------------------------------------------------------------------------------
    def flush(self, marker: bool = False) -> None:
        """Append what the history lacks (or a session marker);
        a folder that cannot hold it warns once."""
        problem = self.history.flush(self.session, self.messages, marker)
        if problem:
            self.warn(f"the conversation is not saved (no --continue): {problem}")

    def new_session(self) -> None:
        """A fresh session in the history (after /clear or /compact),
        so --continue resumes what comes next."""
        self.session = history.new_session()
        self.bind_session()
        self.flush(marker=True)
        self.history.logged = 0
        self.flush()

    def bind_session(self) -> None:
        """The checkpoints made from now on belong to this session (/diff shows them; /undo asks
        about those of other sessions)."""
        if self.checkpoint:
            self.checkpoint.session = self.session

    # -- the loop ----------------------------------------------------------------------------------
    def turn(self, text: str) -> bool:
        """Run the model until it answers without tools; False if the user cancelled (the
        conversation is kept)."""
        with ui.hiding(self.redact):  # all the turn shows, its secrets hidden
            return self.run_turn(text)

    def add(self, message: dict) -> None:
        """A message into the conversation, which the model reads and the history keeps: a copy,
        its text and its calls' arguments with the secrets amas knows hidden (the calls run as the
        model wrote them)."""
        kept = {k: message[k] for k in history.KEYS if k in message}
        if isinstance(kept.get("content"), str):
            kept["content"] = self.redact(kept["content"])
        if message.get("calls"):
            kept["tool_calls"] = [_hidden_call(c, self.secrets) for c in message["calls"]]
        self.messages.append(kept)

    def run_turn(self, text: str) -> bool:
        start = len(self.messages)
        self.asked = text
        # hidden as it is added (piped in too: a log with a token in it)
        self.add({"role": "user", "content": self.preamble() + text})
        self.attachments = []
        self.notes = []
        self.mark_turn(text)
        self.ok = False
        try:
            self.loop()
            self.ok = True
        except KeyboardInterrupt as e:
            self.repair(getattr(e, "output", ""))  # a Stopped command's output, for the model
            ui.console.print()
            self.warn("cancelled; the conversation is kept")
            return False
        except providers.ProviderError:
            # nothing happened: the next request does not repeat it
            if len(self.messages) == start + 1:
                del self.messages[start:]
            raise
        finally:
            self.end_turn()
        return True

    def end_turn(self) -> None:
        """The turn kept in the history; a browser unused for a whole turn gives its memory back;
        a file the agent's edits left unparsable is said (the model may have answered in prose
        after the warning its tool result carried)."""
        self.flush()
        self.tools.close_browser(idle_only=True)
        broken = self.act.left_broken()
        if broken:
            self.warn(
                f"the agent's edits left {', '.join(broken)}: the file no longer parses "
                "(/undo takes the turn back)"
            )

    def mark_turn(self, text: str) -> None:
        """A new turn: its checkpoints carry it (/undo takes back a turn) and its request."""
        if self.checkpoint:
            self.checkpoint.request = self.redact(text)[:300]  # on disk, with its checkpoints
            self.checkpoint.turn = history.new_session()

    def preamble(self) -> str:
        """What goes before the user's words:
        notes of what they did (/undo, !command), attached files."""
        notes = "".join(f"{note}\n\n" for note in self.notes)
        files = "".join(f"Attached file {p}:\n```\n{c}\n```\n\n" for p, c in self.attachments)
        return notes + files

    def warn(self, message: str) -> None:
        """A warning on the screen and, for scripts, in the report."""
        ui.warning(message)
        self.report.warning(message)

    def loop(self) -> None:
        calls = []
        asked = False  # the model was asked again once: a second time the turn ends
        for step in itertools.count(1):
            if self.max_requests and step > self.max_requests:
                raise TurnLimit(ui.plural(self.max_requests, "model request"))
            if step == WARN_STEPS + 1:
                self.warn(f"{WARN_STEPS} tool rounds in this turn; Ctrl+C stops it")
            reply = self.reply()
            if not reply.get("tool_calls"):
                if not asked and self.asked_again(reply, calls):
                    asked = True
                    continue
                self.ended_unread(reply)
                return
            asked = False
            self.act_on(reply, calls)
            if self.stuck(calls):
                return

    def asked_again(self, reply: dict, calls: list) -> bool:
        """A reply without calls that is no answer, and the model asked once more: call markup the
        reader could not read, an echo of a tool's result, nothing at all, or code shown for a
        change the user asked for while no tool was called (a small model's usual slip)."""
        if self.unread(reply) or self.echoed(reply):
            return True
        said = reply["content"].strip()
        if not said and not reply.get("tool_calls"):
            if self.messages[-1]["role"] == "user":  # two in a row: some templates refuse them
                self.add({"role": "assistant", "content": "(no answer)"})
            self.add({"role": "user", "content": EMPTY})
            return True
        changed = any(call.name in CHANGES for call in calls)
        if not changed and not self.tools.planning and context.shown_not_made(said, self.asked):
            self.add({"role": "user", "content": SHOWN})
            return True
        return False

    def echoed(self, reply: dict) -> bool:
        """A reply that only repeats a tool's result (a small model echoing amas's own
        `<tool_response> Error: …`) is no answer: the model is asked to go on."""
        said = reply["content"].strip()
        if not said or not _echoes(said, self.messages[-12:]):
            return False
        self.add({"role": "user", "content": ECHOED})
        return True

    def act_on(self, reply: dict, made: list[toolcalls.Call]) -> None:
        """Answer each call of a reply in turn (cut to MAX_CALLS; many asked about first); made:
        the turn's calls so far."""
        calls = reply["calls"]
        cut = reply.pop("over", "")
        go_on = len(calls) <= MANY_CALLS or self.many_calls(len(calls))
        for call in calls:
            made.append(call)
            self.add(self.tool_message(call, _repeats(made), go_on))
        if cut:
            self.add({"role": "user", "content": cut})

    def stuck(self, calls: list[toolcalls.Call]) -> bool:
        """The same call REPEATS times in a row: the turn ends, said."""
        if _repeats(calls) < REPEATS:
            return False
        name = calls[-1].name
        self.warn(f"the model made the same {name} call {REPEATS} times in a row; turn ended")
        return True

    def bounded(self, reply: dict) -> str:
        """The reply's calls cut to MAX_CALLS (the reply keeps only those, each gets its answer);
        the line that tells the model so ("" when none was cut)."""
        sent = len(reply.get("tool_calls", []))
        if sent <= MAX_CALLS:
            return ""
        held = str(sent)
        if sent == MAX_CALLS + 1:  # a stream stops there: there were more
            held = f"more than {MAX_CALLS}"
        self.warn(f"the model sent {held} tool calls in one reply; at most {MAX_CALLS} are run")
        reply["tool_calls"] = reply["tool_calls"][:MAX_CALLS]
        said = f"your reply held {held} tool calls: only the first {MAX_CALLS} were considered"
        return f"[{said}; the rest were not run. Make fewer calls at a time.]"

    def many_calls(self, count: int) -> bool:
        """More calls in one reply than a person would expect: asked before any runs."""
        question = f"The model asks for {count} tool calls in one reply. Run them?"
        verdict = self.gate.settled(effects.Verdict("ask", "many", question))
        return verdict.decision == "allow" or act.ask(self.gate, verdict).yes

    def reply(self) -> dict:
        """One model call; switches to the model's text variant, or compacts, once when the provider
        needs it."""
        # said once text tool calls worked: an empty stream may be the server failing
        switched = None
        for attempt in itertools.count():
            try:
                reply = self.stream_reply()
                if switched:
                    self.warn(f"{switched}; using text tool calls for this session")
                return reply
            except providers.NoNativeTools as e:
                if self.model.text_tools:
                    raise
                self.use_model(self.model.as_text())
                switched = e
            except providers.ProviderError as e:
                overflowed = e.kind == "context" and not attempt
                if overflowed and (self.compact() or self.context.shrink(self.messages)):
                    continue  # compacted, or its long tool results cut: sent once more
                if switched:  # the text variant did not help: native tools again next time
                    self.use_model(self.model.as_text(False))
                raise

    def stream_reply(self) -> dict:
        """The model's next reply, streamed to the screen and added to the conversation."""
        self.wait_for_preload()
        messages = self.request()
        with ui.Stream(self.config["stream"], visible=toolcalls.visible) as stream:
            try:
                reply = self.model.complete(messages, self.context.offered(self.tools), stream)
            except KeyboardInterrupt:
                self.keep_partial(stream.text)
                raise
            self.report.reply(reply["content"])
            if self.report.fmt == "text":
                stream.show(reply["content"])  # the answer, rendered once
        return self.keep_reply(reply)

    def keep_reply(self, reply: dict) -> dict:
        """The reply added to the conversation, with what went wrong said (lost, cut, empty)."""
        lost = reply.pop("lost", None)
        if lost:  # the partial answer is kept, and the model told where it stopped
            said = f"{reply['content']}\n\n[connection lost mid-answer: {lost}]"
            self.add(reply | {"content": said})
            raise lost
        stopped = reply.pop("stopped", "")
        if stopped:
            self.warn(STOPPED[stopped].format(cap=self.config["max_tokens"]))
        empty = not reply["content"].strip() and not reply.get("tool_calls")
        if empty and not reply.get("unreadable"):
            self.warn("the model sent an empty reply")
            return reply
        # cut before it is added: the conversation keeps only the calls that get an answer
        reply["over"] = self.bounded(reply)
        reply["calls"] = [toolcalls.Call.of(c) for c in reply.get("tool_calls", [])]
        self.add(reply)
        return reply

    def unread(self, reply: dict) -> bool:
        """Call markup the reader could not read (already cut from the text): the user is told in
        one line, the model how to write a call."""
        line = reply.pop("unreadable", None)
        if line:
            self.warn(line)
            named = tools.named_in(self.tools, toolcalls.made_up(line))
            said = toolcalls.error(list(self.model.names), line, named)
            self.add({"role": "user", "content": said})
        return bool(line)

    def ended_unread(self, reply: dict) -> None:
        """Call markup left in the reply that ends the turn (the model was asked again once
        already) is said, not passed off as the answer."""
        line = reply.pop("unreadable", None)
        if line:
            self.warn(f"{line.split('; ')[0]}; the turn ended there")

    def keep_partial(self, text: str) -> None:
        """An answer cut by Ctrl+C stays in the conversation, marked so."""
        if text.strip():
            said = f"{text}\n\n[interrupted by the user]"
            self.add({"role": "assistant", "content": said})

    def wait_for_preload(self) -> None:
        """The spinner from the first Enter while a preloading litellm finishes (Ctrl+C here is
        clean; inside an import it is not)."""
        with ui.Stream(self.config["stream"]):
            # polled: Thread.join, interrupted, may take a running thread for finished (3.11)
            while not providers.preloaded():
                time.sleep(0.05)

    # -- tools: each call goes through the orchestrator (act.py) -----------------------------------
    def tool_message(self, call: toolcalls.Call, repeats: int, go_on: bool = True) -> dict:
        """The tool message answering one call, with a note when the same call repeats."""
        message = self.act.answer(call, go_on)
        note = _repeated(repeats, message["content"], context.last_result(self.messages))
        if note:
            message["content"] += f"\n[note: {note}]"
        return message

    def execute(self, name: str, raw) -> str:
        """One call from the model: its result as the model reads it."""
        return self.act.outcome(toolcalls.Call.of(toolcalls.native(name, raw))).text

    def close(self) -> None:
        """Free what the tools hold (the browser) and the session's /tmp."""
        self.tools.close()

    def repair(self, stopped: str = "") -> None:
        """After Ctrl+C or a kill: every tool call gets a result, so the next request is valid; the
        first one not answered, the output of the command Ctrl+C `stopped`, if it was one."""
        at = max((i for i, m in enumerate(self.messages) if m.get("tool_calls")), default=None)
        if at is None:
            return
        done = {m.get("tool_call_id") for m in self.messages[at:]}
        said = ""
        if stopped:
            said = self.act.said(stopped)
        for call in self.messages[at]["tool_calls"]:
            if call["id"] not in done:
                content = said or "Cancelled by the user."
                self.add({"role": "tool", "tool_call_id": call["id"], "content": content})
                said = ""

    # -- the request -------------------------------------------------------------------------------
    def prompted(self) -> list[dict]:
        """The system prompt and the conversation, as they would be sent now."""
        system = self.context.system_prompt(self.tools, self.last_user())
        # rules and map come from files
        system = self.redact(system)
        return [{"role": "system", "content": system}, *self.messages]

    def request(self) -> list[dict]:
        """The system prompt and the conversation, compacted first when it passed the limit."""
        messages = self.prompted()
        limit = self.context.limit()
        if self.context.tokens(messages, limit) > limit and (
            self.compact() or self.context.shrink(self.messages)
        ):
            return self.prompted()
        return messages

    def last_user(self) -> str:
        return context.last_user(self.messages)

    # -- compaction --------------------------------------------------------------------------------
    def compact(self) -> int:
        """Replace everything before the latest turn with a shorter model-written summary;
        tokens freed."""
        # the latest turn
        start = max((i for i, m in enumerate(self.messages) if m["role"] == "user"), default=0)
        if start == 0:
            return ui.info("nothing before the latest turn to compact") or 0
        old = self.messages[:start]
        new = self.context.summary(old)
        freed = self.context.tokens(old) - self.context.tokens(new)
        said = new[0]["content"].split("\n", 1)[-1]
        if len(said.split()) < SUMMARY_WORDS:
            self.warn(
                f"the model's summary ({said.strip()[:80]!r}) is not a summary; nothing changed"
            )
            return 0
        if freed <= 0:
            self.warn("the summary was not shorter than what it would replace; nothing changed")
            return 0
        self.messages[:start] = new
        self.new_session()
        ui.success(f"compacted {ui.plural(start, 'message')}: {freed} tokens freed")
        return freed


def _echoes(said: str, recent: list[dict]) -> bool:
    """Whether a reply is amas's own words: a tool result's markup, a recent tool result, or a
    sentence of what amas told the model (a small model answered "To change it, read_file
    report.py, then edit_file.")."""
    if said.startswith("<tool_response"):
        return True
    ours = [m["content"] for m in recent if m["role"] == "tool"]
    ours += [m["content"] for m in recent if m["role"] == "user" and _told(m["content"])]
    return any(said == text.strip() or len(said) > 20 and said in text for text in ours)


def _told(content) -> bool:
    """Whether a user-role message is amas's own words to the model (an error, a bracketed note)."""
    return isinstance(content, str) and content.startswith(("Error: ", "["))


def _hidden_call(call: toolcalls.Call, secrets) -> dict:
    """A tool call as the conversation keeps it: the secrets in its arguments hidden; as the
    model wrote it when it holds none (a server's cache of the conversation stays valid)."""
    shown = call.raw
    if call.args is None and isinstance(call.raw, str):  # not an object: its text
        shown = secrets.redact(call.raw)
    elif call.args is not None and secrets.hidden(call.args) != call.args:
        shown = json.dumps(secrets.hidden(call.args), ensure_ascii=False)
    return toolcalls.native(call.name, shown, call.id)


def _repeated(repeats: int, result: str, last: str | None) -> str:
    """The note for a call made `repeats` times in a row: at once when it gave the same result
    again, numbers aside (nothing changed in between: a small model re-ran the failing tests
    instead of reading the code they named), else at the third."""
    if repeats == REPEATS - 1:
        return f"you have made this same call {repeats} times in a row; change your approach"
    if repeats == 2 and last is not None and _unnumbered(result) == _unnumbered(last):
        return SAME_AGAIN
    return ""


def _unnumbered(text: str) -> str:
    """Text with its numbers blanked: a test run's timings, a listing's sizes."""
    return re.sub(r"\d+", "#", text)


def _repeats(calls: list[dict]) -> int:
    """How many times in a row the last call was made, with the same arguments up to case,
    spaces and `./`."""
    calls = calls[-REPEATS:]  # the last few are enough, however long the turn
    same = [c.name + ":" + re.sub(r"\s+|\./", "", str(c.raw)).lower() for c in calls]
    return next((n for n in range(1, len(same)) if same[-1 - n] != same[-1]), len(same))
