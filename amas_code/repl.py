"""The interactive REPL: prompt_toolkit input and the slash commands
(their docstrings are the help)."""

import glob
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

from rich.text import Text

from amas_code import config as config_file
from amas_code import effects, home, memory, policy, project, providers, redact, sandbox, skills, ui
from amas_code import history as chat_log
from amas_code.checkpoint import CheckpointError

USER_TIMEOUT = 3600  # a command the user typed runs until it ends or they press Ctrl+C


def cmd_help(agent, arg):
    """List the commands."""
    room = max(ui.console.width - HELP_COLUMN, 20)
    for name, fn in COMMANDS.items():
        # each row whole: the docstring's own line breaks are not the screen's, and a row that
        # wraps goes on under its text, not under the names
        said = Text(" ".join(fn.__doc__.split())).wrap(ui.console, room, overflow="fold")
        for n, line in enumerate(said):
            line.rstrip()
            label = ""
            if n == 0:
                label = name
            ui.console.print(Text.assemble((f"  {label:<{HELP_COLUMN - 2}}", "bold"), line))


HELP_COLUMN = 15  # where /help's descriptions start


def cmd_undo(agent, arg):
    """Take back the last n turns (default 1): /undo [n]."""
    count = arg.strip() or "1"
    if not count.isdigit() or count == "0":
        return ui.error(
            f"/undo takes a number of turns (1 or more), not {arg.strip()!r}; nothing changed"
        )
    checkpoint = agent.checkpoint
    if checkpoint is None:
        return _off()
    try:
        chain = checkpoint.turns(int(count))
    except CheckpointError as e:
        return ui.error(str(e))
    ui.info("taking back: " + "; ".join(cp["label"] for cp in chain if not cp["idle"]))
    earlier = [cp for cp in checkpoint.earlier(len(chain)) if cp["files"]]
    if earlier and not _ask(_made_before(earlier)):
        return ui.error("cancelled; nothing changed")
    if _checkpoints(agent, "undone", lambda: checkpoint.undo(len(chain), _ask)):
        _left(agent.root, chain)


def _left(root: Path, chain: list[dict]) -> None:
    """What an undo left in place, said: made by a command, but no checkpoint holds a copy."""
    left = sorted({p for cp in chain for p in cp.get("left", []) if os.path.lexists(root / p)})
    if left:
        ui.info(
            f"left in place: {', '.join(map(ui.clean, left))}: made by a command, but git ignores "
            "it or it is too big, so no checkpoint holds a copy (a .env may hold a key); delete it "
            "yourself if it should go"
        )


def _made_before(chain: list[dict]) -> str:
    """The question before /undo takes back what an earlier amas made: when, what, which files."""
    told = []
    for cp in chain:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(cp.get("time", 0)))
        files = ", ".join(cp.get("files", [])) or "folders only"
        told.append(f"{ui.clean(cp['label'])} ({when}: {ui.clean(files)})")
    return (
        f"made before this session, by a one-shot run or another terminal (not in /diff): "
        f"{'; '.join(told)}. Take it back?"
    )


def cmd_redo(agent, arg):
    """Re-apply what /undo took back."""
    if agent.checkpoint is None:
        return _off()
    _checkpoints(agent, "redone", lambda: agent.checkpoint.redo(_ask))


def cmd_checkpoint(agent, arg):
    """List checkpoints; /checkpoint <id> goes back to that one (undoes those after it)."""
    checkpoint = agent.checkpoint
    if checkpoint is None:
        return _off()
    if arg.strip():
        return _checkpoints(agent, "restored", lambda: checkpoint.restore(arg.strip(), _ask))
    try:
        listed = checkpoint.history(limit=20)
        ahead = checkpoint.redoable()
    except CheckpointError as e:  # the shadow cannot be read
        return ui.error(str(e))
    for cp in listed:
        when = time.strftime("%H:%M:%S", time.localtime(cp.get("time", 0)))
        files = ", ".join(cp.get("files", []))
        ui.row((cp["id"][:8], "yellow"), f" {when} {cp['label']}  ", (files, "dim"))
    if not listed:
        ui.info("no checkpoints: every one was undone" if ahead else "no checkpoints yet")
    if ahead:
        files = ", ".join(ahead.get("files", [])) or "folders only"
        ui.info(f"/redo brings back {ui.clean(ahead['label'])} ({ui.clean(files)})")
    ui.info(f"checkpoints take {checkpoint.size() / 2**20:.1f} MB in ~/.amas")


def _ask(question: str) -> bool:
    return ui.ask(question, "yn") == "y"


def _off() -> None:
    ui.warning("checkpoints are off (checkpoint_on_edit: false)")


def _checkpoints(agent, verb: str, action) -> bool | None:
    """Undo, redo or restore, said; True when it was done."""
    try:
        files = action()
    except (CheckpointError, home.ConfigError) as e:
        return ui.error(str(e))
    except OSError as e:  # the shadow itself: read-only, full, its lock not made
        where = e.filename or "~/.amas/checkpoints"
        return ui.error(f"the checkpoints cannot be used ({e.strerror}: {where}); nothing changed")
    ui.success(f"{verb}: {', '.join(files) or 'nothing'}")
    if files:  # the model must not build on a change that is gone
        did = _DID[verb].format(files=", ".join(files))
        agent.note(f"[Note: {did}; read them again before relying on their content]")
    return True


_DID = {  # what the model is told after the user moved files back or forth
    "undone": "with /undo the user took back your changes to {files}",
    "redone": "with /redo the user re-applied your changes to {files}",
    "restored": "with /checkpoint the user restored an earlier state of {files}",
}


def cmd_diff(agent, arg):
    """Show what the agent changed in this session."""
    if agent.checkpoint is None:
        return _off()
    try:
        changes = agent.checkpoint.changes()
    except CheckpointError as e:  # the shadow cannot be read
        return ui.error(str(e))
    for path, (old_mode, old), (new_mode, new) in changes:
        if old_mode and new_mode and old_mode != new_mode:
            ui.info(f"{path}: mode {old_mode} → {new_mode}")
        if project.looks_binary(old) or project.looks_binary(new):
            ui.info(f"{path}: binary file, {len(old):,} → {len(new):,} bytes")
        elif old != new or old_mode == new_mode:
            before = None  # a file the agent made
            if old_mode:
                before = old.decode(errors="replace")
            ui.console.print(ui.diff(before, new.decode(errors="replace"), path))
    if not changes:
        ui.info("the agent changed nothing in this session")
    if others := agent.checkpoint.earlier(200):
        which = ui.plural(len(others), "checkpoint")
        ui.info(
            f"not shown: {which} from before this session, which /undo asks about (see /checkpoint)"
        )


def cmd_attach(agent, arg):
    """Add files to your next message: /attach <path or glob>..."""
    if not arg.strip():
        return ui.error("/attach needs a file, e.g. /attach src/app.py or /attach 'docs/*.md'")
    try:
        patterns = shlex.split(arg)  # 'docs/*.md' and "my file.txt" as a shell would take them
    except ValueError:
        patterns = arg.split()
    for pattern in patterns:
        full = str(agent.context.cwd / os.path.expanduser(pattern))  # from where the user is
        for path in sorted(glob.glob(full, recursive=True)) or [full]:
            try:
                _attach(agent, Path(path))
            except (OSError, PermissionError, ValueError) as e:
                ui.error(f"cannot attach {pattern}: {e}")


def _attach(agent, path: Path) -> None:
    ui.success(f"attached {agent.attach(path)}")


def shell(agent, line: str) -> None:
    """`!command`: run as the user typed it (no question), shown,
    and put before the next message."""
    if not line:
        return ui.error("! runs a shell command, e.g. !git status")
    # as the user: no box
    command = effects.Command(line, USER_TIMEOUT, redact.child_env(agent.config))
    title = ui.command_summary(line, policy.programs(line))
    with ui.Tail(title, excerpt=False) as tail:  # its whole output follows
        result = sandbox.run(command, agent.context.cwd, watch=tail.feed)
    ui.show_output(result.split("\n", 1)[-1])
    agent.ran(result)


def cmd_clear(agent, arg):
    """Start a new conversation."""
    agent.clear()
    ui.success("new conversation")


def cmd_model(agent, arg):
    """Show the model, or switch: /model <provider/name>."""
    if arg.strip():
        agent.switch_model(arg.strip())
    base = agent.model.config.get("api_base")
    at = ""
    if base:
        at = f" at {base}"
    ui.info(f"model: {agent.model.name}{at}")
    # what can be known wrong now (no key for its provider) is said now, not at the next message
    try:
        providers.precheck(agent.model.config)
    except providers.ProviderError as e:
        ui.warning(f"{in_repl_words(str(e))}; until then a message to it fails")


def in_repl_words(message: str) -> str:
    """A provider's message as the REPL says it: /model picks another model here, not -m."""
    return message.replace("another model with -m", "another model with /model")


def cmd_tokens(agent, arg):
    """Tokens used and cost so far."""
    usage = agent.model.usage
    cost = f"${usage['cost']:.4f}"
    if not usage["cost_known"]:
        cost += " (some calls had no known price)"
    now = agent.context.tokens(agent.prompted(), 10**9)  # counted, never compacted
    counts = f"prompt {usage['prompt_tokens']} + completion {usage['completion_tokens']} tokens"
    if usage.get("estimated"):  # a server that sends no counts (llama-cpp-python): amas's guesses
        counts = counts.replace("prompt ", "prompt ~").replace("+ completion ", "+ completion ~")
        counts += " (estimated: the server sends no counts)"
    limit = agent.context.limit()
    kept = agent.model.context_limit() - limit
    room = f"{limit} (the context is {limit + kept}; {kept} are kept for the answer)"
    ui.info(f"{counts}; cost {cost}; conversation now ~{now} tokens of {room}")


def cmd_compact(agent, arg):
    """Summarize everything before your latest message, to free context."""
    agent.compact()


def cmd_init(agent, arg):
    """Map the project for the model (.amas/project_map.md)."""
    from amas_code import repomap

    repomap.init(agent.root, agent.config["ignore"])


def cmd_remember(agent, arg):
    """Keep a note for later sessions: /remember [--user] [--days N] <text> (or a line that starts
    with `# `); --user: for every project, --days: it expires."""
    words = arg.split()
    scope = "project"
    days = 0
    while words and words[0] in ("--user", "--days"):
        if words.pop(0) == "--user":
            scope = "user"
            continue
        if not (words and words[0].isdigit()):
            return ui.error("--days takes a number, e.g. /remember --days 3 the demo is on Friday")
        days = int(words.pop(0))
    if not words:
        return ui.error("/remember needs the note, e.g. /remember the tests run with `make test`")
    text = agent.secrets.redact(" ".join(words))  # secrets are never kept
    path, kept = memory.added(agent.root, text, days, scope)
    home.write_private(path, kept)
    ui.success(f"remembered {memory.shown(memory.read(path, scope)[-1])[2:]} ({path})")


def cmd_memory(agent, arg):
    """List your notes; /memory forget <number|words|all>; /memory edit [--user] opens the file."""
    words = arg.split()
    if words[:1] == ["forget"]:
        return _forget_notes(agent, " ".join(words[1:]))
    if words[:1] == ["edit"]:
        scope = "project"
        if "--user" in words:
            scope = "user"
        return _edit(memory.places(agent.root)[scope])
    if words:
        return ui.error("/memory lists your notes; /memory forget <number|words|all>; /memory edit")
    found = memory.notes(agent.root)
    for n, note in enumerate(found, 1):
        ui.row(f"  {n:2}. ", memory.shown(note)[2:])
    if not found:
        ui.info("no notes yet: /remember <text> keeps one for later sessions")
    ui.info("forget one with /memory forget <number or words>; edit them with /memory edit")


def _forget_notes(agent, which: str) -> None:
    """The notes named by number (as /memory lists them), by words they hold, or all, forgotten."""
    found = memory.notes(agent.root)
    if which.isdigit() and 1 <= int(which) <= len(found):
        gone = [found[int(which) - 1]]
    else:
        gone = memory.matching(agent.root, which)
    if not which or not gone:
        return ui.error(f"no note is {which!r}: /memory lists them with their numbers")
    for path, text in memory.without(agent.root, gone).items():
        home.write_private(path, text)
    ui.success("forgotten: " + "; ".join(ui.clean(note.text) for note in gone))


def _edit(path: Path) -> None:
    """The memory file in the person's editor ($VISUAL, $EDITOR, else nano or vi)."""
    if not path.exists():
        home.write_private(path, memory.HEADER)
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or project.program("nano") or "vi"
    try:
        subprocess.run([*shlex.split(editor), str(path)], check=False)
    except (OSError, ValueError) as e:  # no such program, or a $EDITOR shlex cannot split
        why = getattr(e, "strerror", None) or str(e)
        return ui.error(f"cannot start the editor {editor!r} ({why}): set $EDITOR, or edit {path}")
    ui.success(f"{path} saved; the next request reads it")


def cmd_plan(agent, arg):
    """Plan mode on or off: the agent reads and proposes, changes nothing (`go` carries it out)."""
    agent.plan(not agent.tools.planning)
    if agent.tools.planning:
        return ui.info(
            "plan mode: reading tools only, commands with the project read-only, no edits; /plan "
            "again or `go` to carry out the plan"
        )
    ui.info("plan mode off: the agent may change files again (the plan stays in the conversation)")


def cmd_skills(agent, arg):
    """List skills (as read at the start); those matching your last message are active."""
    found = skills.load(agent.root, agent.context.trusted, agent.context.steering)
    latest = agent.last_user()
    for s in found:
        mark = ("       ", "")
        if skills.matches(s, latest):
            mark = ("active ", "green")
        ui.row("  ", mark, (s["name"], "bold"), f": {s['description']}")
    if not found:
        ui.info("no skills in .amas/skills/ or ~/.amas/skills/")


def cmd_permissions(agent, arg):
    """Show the shell rules, what you allowed, and which rule decided last: /permissions, or
    /permissions forget <command|host|all>."""
    said = arg.strip()
    if said.split(" ", 1)[0] == "forget":
        return _forget_answers(agent, said.removeprefix("forget").strip())
    if said:
        return ui.error(f"/permissions takes forget <command|host|all>, not {said!r}")
    rules = agent.config["permissions"]
    gate = agent.gate
    listed = [("deny", rules.get("deny") or []), ("allow", rules.get("allow") or [])]
    listed += [("allowed", gate.commands), ("this session", gate.for_session)]
    listed += [("hosts", sorted(gate.hosts))]
    for kind, rows in listed:
        ui.row(f"  {kind}: {', '.join(rows) or '(none)'}")
    if gate.commands or gate.for_session or gate.hosts:
        ui.info(FORGET)
    _sandbox_line(agent)
    if gate.last:
        command, verdict, by = gate.last
        ui.info(f"last: {command!r} -> {verdict} {by}".rstrip())


FORGET = (
    "/permissions forget <command|host> forgets one as listed; /permissions forget all, every one"
)


def _forget_answers(agent, what: str) -> None:
    """/permissions forget: what was named forgotten, and said."""
    if not what:
        return ui.info(FORGET)
    gone = agent.gate.forget(what)
    if gone:
        return ui.success(f"forgotten: {', '.join(gone)}")
    ui.info(f"nothing remembered as {what!r}; /permissions lists what is")


def cmd_browser(agent, arg):
    """Close the browser to free its memory: /browser close."""
    if arg.strip() not in ("", "close"):  # the agent opens it when it needs it
        return ui.error(f"/browser takes only close, not {arg.strip()!r}; the browser is as it was")
    agent.tools.close_browser()
    ui.success("browser closed")


def cmd_quit(agent, arg):
    """Leave the REPL."""
    raise EOFError


# in the order they are written above
COMMANDS = {"/" + name[4:]: fn for name, fn in list(globals().items()) if name.startswith("cmd_")}
COMMANDS |= {"/exit": cmd_quit}


def command(agent, line: str) -> None:
    """Run a slash command; a unique prefix selects it."""
    name, _, arg = line.partition(" ")
    found = [c for c in COMMANDS if c == name] or [c for c in COMMANDS if c.startswith(name)]
    if len(found) != 1:
        return ui.error(
            f"unknown command {name}, /help lists them"
            if not found
            else f"{name} is ambiguous: {', '.join(found)}"
        )
    COMMANDS[found[0]](agent, arg)


def preload(agent, app) -> None:
    """Import what the configured model needs in the background once the prompt is drawn (SPEC §9):
    the openai SDK for a server that speaks OpenAI's API (~20 MB: always), else litellm (~150 MB:
    where memory allows)."""
    want = agent.config.get("preload")
    direct = providers.is_direct(agent.config["model"], agent.config.get("api_base"))
    if want in (None, "auto"):
        want = direct or os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") >= 2 << 30
    if want is not True:
        return

    def start(_):  # after the first render, so the import does not slow the prompt's appearance
        app.after_render.remove_handler(start)
        providers.preload(direct)

    app.after_render.add_handler(start)


def completer():
    """Slash commands at the start of the line, file paths anywhere."""
    from prompt_toolkit.completion import Completer, Completion, PathCompleter
    from prompt_toolkit.document import Document

    class Complete(Completer):  # slash commands at the start, file paths anywhere
        # .git/ is git's, never a file to attach
        paths = PathCompleter(expanduser=True, file_filter=_not_git)

        def get_completions(self, document, event):
            text = document.text_before_cursor
            if text.startswith("/") and " " not in text:
                yield from (Completion(c, -len(text)) for c in COMMANDS if c.startswith(text))
            elif text and not text.endswith(" "):
                word = text.split()[-1].removeprefix("@")  # @path attaches the file
                yield from self.paths.get_completions(Document(word, len(word)), event)

    return Complete()


def _not_git(name: str) -> bool:
    return ".git" not in Path(name).parts


def history(agent):
    """The up-arrow history in .amas/input_history
    (0600, never written through a symlink), or none."""
    from prompt_toolkit.history import FileHistory, InMemoryHistory

    class PrivateHistory(FileHistory):
        def store_string(self, string: str) -> None:
            string = agent.secrets.redact(string)  # as private as history.jsonl
            lines = "".join(f"+{line}\n" for line in string.split("\n"))
            home.append_private(Path(self.filename), f"\n# {time.ctime()}\n{lines}")

    path = home.state_file(agent.root, "input_history")
    try:
        home.private_dir(path.parent)
        return PrivateHistory(str(path)) if not path.is_symlink() else InMemoryHistory()
    except (OSError, home.ConfigError) as e:
        ui.warning(f"nothing is kept in .amas/ (no input history, no --continue): {e}")
        agent.history.path = None  # the agent will not try to log either
        return InMemoryHistory()


def prompt_session(agent):
    from prompt_toolkit import PromptSession
    from prompt_toolkit.key_binding import KeyBindings

    keys = KeyBindings()

    @keys.add("escape", "enter")  # Esc-Enter or Alt-Enter: a new line instead of sending
    def _(event):
        event.current_buffer.insert_text("\n")

    def mark():  # the prompt says the mode
        if agent.tools.planning:
            return "plan › "
        return "› "

    return PromptSession(
        mark,
        history=history(agent),
        completer=completer(),
        key_bindings=keys,
        complete_while_typing=False,
    )


def interact(agent) -> None:
    """Read, run, repeat until /quit or Ctrl+D; Ctrl+C clears the line or cancels a turn (Esc
    too, while a turn runs)."""
    # a REPL started from a script's background job inherits SIGINT ignored: Ctrl+C is taken back
    signal.signal(signal.SIGINT, signal.default_int_handler)
    prompt = prompt_session(agent)
    preload(agent, prompt.app)
    banner(agent)
    ahead = Ahead()
    while True:
        # a Ctrl+C at the prompt is a key; one just after Enter, while the prompt closes, or
        # just as a turn ends, is Python's KeyboardInterrupt (prompt_toolkit's own handler would
        # run after it closed and print a traceback)
        try:
            go_on = ahead.handled(agent, ahead.next(prompt).strip())
        except KeyboardInterrupt:
            continue
        except EOFError:
            go_on = False
        if not go_on:
            return goodbye()


class Ahead:
    """What the person typed while a turn ran. Lines handled next, in order, each as what it is: a
    slash command or !command runs, text goes to the model (text lines in a row as one message).
    Lines back in the prompt, one at a time, to send, edit or drop with Ctrl+C: all of them after
    a turn that stopped, and a line that is only an answer word (y, ok): typed ahead, it answered
    no question, and it is not sent as a message unless the person sends it."""

    def __init__(self):
        self.queued = []
        self.held = []  # (line, what to say when it comes back in the prompt)

    def next(self, prompt) -> str:
        """The next line: one typed during a turn, shown as the prompt shows a line, else what the
        person types now (starting from a line held back, said why)."""
        if self.queued:
            line = self.queued.pop(0)
            _echo(line)
            return line
        start = ""
        if self.held:
            start, why = self.held.pop(0)
            _held(why, len(self.held))
        return prompt.prompt(default=start, handle_sigint=False)  # its mark says the mode

    def handled(self, agent, line: str) -> bool:
        """One line handled, and what was typed meanwhile kept; False to leave. A turn reads what
        is typed while it runs; after a command the prompt reads it (Tab and arrows work there)."""
        lines, typing = [], ""
        if line and _text(line):
            with ui.typed_meanwhile() as got:
                went = step(agent, line)
            lines, typing = got
        else:
            went = step(agent, line)
        if went == "stopped":  # nothing runs by itself
            self.held += [(line, "") for line in [*self.queued, *lines, typing] if line]
            self.queued = []
        else:
            self.take(lines, typing)
        left = [*self.queued, *(line for line, _ in self.held)]
        if went == "quit" and left:  # said, not lost without a word
            ui.warning(f"left as you quit: {'; '.join(ui.one_line(line) for line in left)}")
        return went != "quit"

    def take(self, lines: list[str], typing: str) -> None:
        """Lines typed during a turn that ended: queued as what they are, answer words held."""
        batch = []
        for line in lines:
            if ui.answer_of(line):
                self.held.append((line, ANSWERED.format(line=line)))
            elif batch and _text(line) and _text(batch[-1]):
                batch[-1] += "\n" + line
            else:
                batch.append(line)
        self.queued += batch
        if typing:
            self.held.append((typing, ""))


ANSWERED = (
    "{line!r} was typed during the turn and answers no question (a line typed ahead never does): "
    "Enter sends it as a message, Ctrl+C drops it"
)


def _held(why: str, more: int) -> None:
    """Why a line typed meanwhile is back in the prompt, and how many more wait after it."""
    if why:
        ui.info(why)
    elif more:
        ui.info(
            f"{more + 1} lines typed meanwhile come back in the prompt one at a time: Enter "
            "sends one, Ctrl+C drops it"
        )


def _text(line: str) -> bool:
    """A line for the model, not a slash command or a !command."""
    return not line.startswith(("/", "!"))


def _echo(line: str) -> None:
    """A line typed during a turn, shown as the prompt shows one, when it is handled."""
    shown = ui.clean(line).replace("\n", "\n  ")
    ui.console.print(Text.assemble(("› ", "bold"), shown), overflow="fold")
    lines = line.count("\n") + 1
    if lines > 1:
        ui.info(f"the {lines} lines typed during the turn go as one message")


def goodbye() -> None:
    ui.info("bye; resume this conversation with `amas -c`")


def banner(agent) -> None:
    """Where prompts go, how to leave, the sandbox, and after -c the last exchanges."""
    where = config_file.endpoint(agent.config)
    ui.info(f"amas · {where} · /help for commands, Esc-Enter for a new line, Ctrl+D to quit")
    _sandbox_line(agent)
    last_exchange(agent)


def _sandbox_line(agent) -> None:
    """The sandbox in force, in one line: a warning unless commands are boxed."""
    if agent.sandbox.mode == "on":
        ui.info(agent.sandbox.line)
    else:
        ui.warning(agent.sandbox.line)


def choose(root: Path) -> str | None:
    """--resume: the project's recent conversations, numbered; the one the user picks (Enter: the
    newest; none: a new one)."""
    shown = chat_log.Log(root).conversations()[:RECENT]
    if not shown:
        ui.info("no earlier conversation in this project; starting a new one")
        return None
    for n, c in enumerate(shown, 1):
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(c["time"]))
        line = f"{n:3}. {when}  {ui.plural(c['count'], 'message'):>13}  {ui.clean(c['first'])}"
        ui.console.print(Text(line), overflow="fold")
    picked = _pick(len(shown))
    return shown[picked - 1]["session"] if picked else None


RECENT = 20  # conversations --resume lists


def _pick(count: int) -> int | None:
    from prompt_toolkit import prompt

    while True:
        try:
            said = prompt(f"Open which (1-{count}, Enter for 1)? ").strip() or "1"
        except (EOFError, KeyboardInterrupt):
            return None
        if said.isdigit() and 1 <= int(said) <= count:
            return int(said)
        ui.error(f"type a number from 1 to {count}")


def last_exchange(agent) -> None:
    """After -c or --resume: the last few exchanges as the user typed them, the tools that ran and
    the answers, shortened."""
    for who, text in chat_log.preview(agent.messages):
        text = " ".join(text.split())
        short = text if len(text) <= 300 else f"{text[:300]}…"
        ui.console.print(Text.assemble((f"  {who}: ", "dim"), ui.clean(short)), overflow="fold")


def step(agent, line: str) -> str:
    """One line typed at the prompt: a command, a shell line or a turn; how it went: "done",
    "stopped" (Ctrl+C, Esc or an error: what was typed meanwhile waits) or "quit"."""
    try:
        return _handled(agent, line)
    except EOFError:
        return "quit"
    except KeyboardInterrupt:
        ui.console.print()
        ui.warning("cancelled")
        return "stopped"
    except providers.ProviderError as e:
        ui.error(in_repl_words(str(e)))
        return "stopped"
    except Exception as e:  # a bug must not end the session or show a traceback
        ui.error(f"{type(e).__name__}: {e}")
        return "stopped"


def _handled(agent, line: str) -> str:
    """The line run as what it is: a slash command, !command, `# note`, `go` in plan mode, or a
    message to the model."""
    if line.startswith("/"):
        command(agent, line)
    elif line.startswith("!"):
        shell(agent, line[1:].strip())
    elif line.startswith("# ") and "\n" not in line:  # a note to keep, as /remember
        cmd_remember(agent, line[2:])
    elif agent.tools.planning and line.strip().lower() == "go":  # the plan, carried out
        cmd_plan(agent, "")
        return _turn(agent, "Go ahead: carry out the plan.")
    elif line:
        return _turn(agent, line)
    return "done"


def _turn(agent, line: str) -> str:
    """A message to the model, with the files it names attached; "stopped" when cancelled."""
    agent.attach_mentioned(line)
    if agent.secrets.redact(line) != line:
        ui.info("a secret in your message is hidden: the model and the history see [REDACTED]")
    if agent.turn(line):
        return "done"
    return "stopped"
