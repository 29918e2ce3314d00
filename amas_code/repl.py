"""The interactive REPL: prompt_toolkit input and the slash commands (their docstrings are the help)."""

import glob
import os
import re
import shlex
import threading
import time
from pathlib import Path

from rich.text import Text

from amas_code import config as config_file
from amas_code import effects, home, project, providers, redact, sandbox, tools, ui
from amas_code.checkpoint import CheckpointError


def cmd_help(agent, arg):
    """List the commands."""
    for name, fn in COMMANDS.items():
        ui.console.print(Text.assemble((f"  {name:<13}", "bold"), fn.__doc__))


def cmd_undo(agent, arg):
    """Take back the last n checkpoints (default 1): /undo [n]."""
    if not arg.strip().isdigit() and arg.strip() or arg.strip() == "0":
        return ui.error(
            f"/undo takes a number of checkpoints (1 or more), not {arg.strip()!r}; nothing changed"
        )
    n = int(arg.strip() or 1)
    if (
        agent.checkpoint
        and len(labels := [cp["label"] for cp in agent.checkpoint.history(limit=n)]) == n
    ):
        ui.info("taking back: " + "; ".join(labels))
        if (earlier := agent.checkpoint.earlier(n)) and not _ask(_made_before(earlier)):
            return ui.error("cancelled; nothing changed")
    _checkpoints(agent, "undone", lambda cp: cp.undo(n, _ask))


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
    _checkpoints(agent, "redone", lambda cp: cp.redo(_ask))


def cmd_checkpoint(agent, arg):
    """List checkpoints; /checkpoint <id> goes back to that one (undoes those after it)."""
    if arg.strip():
        return _checkpoints(agent, "restored", lambda cp: cp.restore(arg.strip(), _ask))
    listed = agent.checkpoint.history(limit=20) if agent.checkpoint else []
    for cp in listed:
        when = time.strftime("%H:%M:%S", time.localtime(cp.get("time", 0)))
        files = ", ".join(cp.get("files", []))
        ui.row((cp["id"][:8], "yellow"), f" {when} {cp['label']}  ", (files, "dim"))
    ahead = agent.checkpoint.redoable() if agent.checkpoint else None
    if not listed:
        ui.info("no checkpoints: every one was undone" if ahead else "no checkpoints yet")
    if ahead:
        files = ", ".join(ahead.get("files", [])) or "folders only"
        ui.info(f"/redo brings back {ui.clean(ahead['label'])} ({ui.clean(files)})")
    if agent.checkpoint:
        ui.info(f"checkpoints take {agent.checkpoint.size() / 2**20:.1f} MB in ~/.amas")


def _ask(question: str) -> bool:
    return ui.ask(question, "yn") == "y"


def _checkpoints(agent, verb: str, action) -> None:
    if agent.checkpoint is None:
        return ui.warning("checkpoints are off (checkpoint_on_edit: false)")
    try:
        files = action(agent.checkpoint)
    except (CheckpointError, home.ConfigError, OSError) as e:
        return ui.error(str(e))
    ui.success(f"{verb}: {', '.join(files) or 'nothing'}")
    if files:  # the model must not build on a change that is gone
        did = _DID[verb].format(files=", ".join(files))
        agent.notes.append(f"[Note: {did}; read them again before relying on their content]")


_DID = {  # what the model is told after the user moved files back or forth
    "undone": "with /undo the user took back your changes to {files}",
    "redone": "with /redo the user re-applied your changes to {files}",
    "restored": "with /checkpoint the user restored an earlier state of {files}",
}


def cmd_diff(agent, arg):
    """Show what the agent changed in this session."""
    changes = agent.checkpoint.changes() if agent.checkpoint else []
    for path, (old_mode, old), (new_mode, new) in changes:
        if old_mode and new_mode and old_mode != new_mode:
            ui.info(f"{path}: mode {old_mode} → {new_mode}")
        if project.looks_binary(old) or project.looks_binary(new):
            ui.info(f"{path}: binary file, {len(old):,} → {len(new):,} bytes")
        elif old != new or old_mode == new_mode:
            shown = ui.diff(
                old.decode(errors="replace"),
                new.decode(errors="replace"),
                path,
                agent.gate.secrets.redact,
            )
            ui.console.print(shown)
    if not changes:
        ui.info("the agent changed nothing in this session")
    if others := agent.checkpoint.earlier(200) if agent.checkpoint else []:
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
    path = agent.tools.path(str(path))
    if not path.exists():
        raise ValueError("no such file")
    if path.is_dir():
        raise ValueError("it is a folder; attach the files in it, e.g. /attach 'folder/*.py'")
    data = project.regular(path, path.name).read_bytes()
    if project.looks_binary(data):
        raise ValueError("it is a binary file")
    text = agent.gate.secrets.redact(data[: tools.MAX_READ].decode(errors="replace"))
    if len(data) > tools.MAX_READ:
        text += f"\n[cut at {tools.MAX_READ // 1000} KB of {len(data) // 1000} KB; the agent can read_file the rest]"
    agent.attachments.append((agent.tools.show(path), text))
    ui.success(f"attached {agent.tools.show(path)}")


def shell(agent, line: str) -> None:
    """`!command`: run as the user typed it (no question), shown, and put before the next message."""
    if not line:
        return ui.error("! runs a shell command, e.g. !git status")
    env = redact.child_env(agent.config)
    # as the user: no box
    with ui.Tail(ui.command_summary(line), agent.gate.secrets.redact) as tail:
        result = sandbox.run(
            effects.Command(line, USER_TIMEOUT), agent.context.cwd, env, watch=tail.feed
        )
    shown = agent.gate.secrets.redact(result)
    ui.console.print(Text(ui.clean(shown.split("\n", 1)[-1])), overflow="fold")
    capped = tools.cap(shown, agent.act.result_limit())
    agent.notes.append(f"The user ran a command themselves:\n```\n{capped}\n```")


USER_TIMEOUT = 3600  # a command the user typed runs until it ends or they press Ctrl+C


def mentioned(agent, line: str) -> bool:
    """Files named with @path are attached; False (nothing sent) when one that looks like a path is
    missing, so the user can fix it."""
    for word in re.findall(r"(?<!\S)@(\S+)", line):
        name = word.rstrip(".,;:!?)")
        path = agent.context.cwd / os.path.expanduser(name)
        if not path.exists() and not ("/" in name or "." in name):
            continue  # @property, @someone: words, not files
        try:
            _attach(agent, path)
        except (OSError, PermissionError, ValueError) as e:
            ui.error(f"cannot attach @{name}: {e}; your message was not sent (↑ brings it back)")
            agent.attachments = []
            return False
    return True


def cmd_clear(agent, arg):
    """Start a new conversation."""
    agent.messages.clear()
    agent.new_session()
    ui.success("new conversation")


def cmd_model(agent, arg):
    """Show the model, or switch: /model <provider/name>."""
    name = arg.strip()
    if name:
        providers.check(name)
        # another provider than configured: its own
        same = name.split("/")[0] == agent.config["model"].split("/")[0]
        keep = {k: agent.config[k] for k in ("api_base", "api_key") if same}
        config = {**agent.config, "api_base": None, "api_key": None, **keep, "model": name}
        agent.use_model(providers.Model(config, agent.model.usage))
    base = agent.model.config.get("api_base")
    ui.info(
        agent.gate.secrets.redact(f"model: {agent.model.name}" + (f" at {base}" if base else ""))
    )


def cmd_tokens(agent, arg):
    """Tokens used and cost so far."""
    u = agent.model.usage
    cost = f"${u['cost']:.4f}" + ("" if u["cost_known"] else " (some calls had no known price)")
    now = agent.context.tokens(agent.prompted(), 10**9)  # counted, never compacted
    # a server that sends no counts (llama-cpp-python) leaves amas's estimates, marked ~
    guess = "~" if u.get("estimated") else ""
    said = f"prompt {guess}{u['prompt_tokens']} + completion {guess}{u['completion_tokens']} tokens"
    said += " (estimated: the server sends no counts)" if guess else ""
    ui.info(f"{said}; cost {cost}; conversation now ~{now} tokens of {agent.context.limit()}")


def cmd_compact(agent, arg):
    """Summarize everything before your latest message, to free context."""
    agent.compact()


def cmd_init(agent, arg):
    """Map the project for the model (.amas/project_map.md)."""
    from amas_code import repomap

    repomap.init(agent.root, agent.config["ignore"])


def cmd_skills(agent, arg):
    """List skills; those matching your last message are active."""
    from amas_code import skills

    found = skills.load(agent.root, agent.context.trusted)
    for s in found:
        mark = ("active ", "green") if skills.matches(s, agent.last_user()) else ("       ", "")
        ui.row("  ", mark, (s["name"], "bold"), f": {s['description']}")
    if not found:
        ui.info("no skills in .amas/skills/ or ~/.amas/skills/")


def cmd_permissions(agent, arg):
    """Show the shell rules, what you allowed, and which rule decided last; `/permissions forget
    <command|host|all>` forgets what you allowed."""
    if arg.strip().startswith("forget"):
        what = arg.strip()[len("forget") :].strip()
        gone = agent.forget(what) if what else []
        return ui.info(
            f"forgotten: {', '.join(gone)}" if gone else f"nothing remembered as {what!r}"
        )
    perms = agent.config["permissions"]
    for kind, rules in (
        ("deny", perms.get("deny")),
        ("allow", perms.get("allow")),
        ("allowed", agent.gate.commands),
        ("hosts", sorted(agent.gate.hosts)),
    ):
        ui.row(f"  {kind}: {', '.join(rules or []) or '(none)'}")
    mode, line = agent.sandbox
    (ui.info if mode == "on" else ui.warning)(line)
    if agent.gate.last:
        command, verdict, rule = agent.gate.last
        ui.info(f"last: {command!r} -> {verdict}" + (f" by {rule!r}" if rule else ""))


def cmd_browser(agent, arg):
    """Close the browser to free its memory: /browser close."""
    if arg.strip() not in ("", "close"):  # the agent opens it when it needs it
        return ui.error(f"/browser takes only close, not {arg.strip()!r}; the browser is as it was")
    agent.tools.close()
    ui.success("browser closed")


def cmd_quit(agent, arg):
    """Leave the REPL."""
    raise EOFError


COMMANDS = {
    "/" + name[4:]: fn for name, fn in list(globals().items()) if name.startswith("cmd_")
}  # in this order
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


def load() -> None:
    """What a turn needs, imported in the background: the reply's spinner and Markdown first (litellm
    imports part of them too, and a turn that started meanwhile imports them itself), then litellm."""
    ui.warm()
    providers.load()


def preload(agent, app) -> None:
    """Import litellm in the background once the prompt is drawn, where memory allows (SPEC §9)."""
    want = agent.config.get("preload", "auto")
    if want == "auto":
        want = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") >= 2 << 30
    if want is not True:
        return

    def start(_):  # after the first render, so the import does not slow the prompt's appearance
        app.after_render.remove_handler(start)
        start_preload(agent)

    app.after_render.add_handler(start)


def start_preload(agent) -> None:
    """The preload thread started; agent.preloading is set once it is done."""
    agent.preloading = threading.Event()

    def run():
        try:
            load()
        finally:
            agent.preloading.set()

    threading.Thread(target=run, daemon=True).start()


def completer():
    """Slash commands at the start of the line, file paths anywhere."""
    from prompt_toolkit.completion import Completer, Completion, PathCompleter
    from prompt_toolkit.document import Document

    class Complete(Completer):  # slash commands at the start, file paths anywhere
        paths = PathCompleter(expanduser=True)

        def get_completions(self, document, event):
            text = document.text_before_cursor
            if text.startswith("/") and " " not in text:
                yield from (Completion(c, -len(text)) for c in COMMANDS if c.startswith(text))
            elif text and not text.endswith(" "):
                word = text.split()[-1].removeprefix("@")  # @path attaches the file
                yield from self.paths.get_completions(Document(word, len(word)), event)

    return Complete()


def history(agent):
    """The up-arrow history in .amas/input_history (0600, never written through a symlink), or none."""
    from prompt_toolkit.history import FileHistory, InMemoryHistory

    class PrivateHistory(FileHistory):
        def store_string(self, string: str) -> None:
            string = agent.gate.secrets.redact(string)  # as private as history.jsonl
            lines = "".join(f"+{line}\n" for line in string.split("\n"))
            home.append_private(Path(self.filename), f"\n# {time.ctime()}\n{lines}")

    path = home.state_file(agent.root, "input_history")
    try:
        home.private_dir(path.parent)
        return PrivateHistory(str(path)) if not path.is_symlink() else InMemoryHistory()
    except (
        OSError,
        home.ConfigError,
    ) as e:  # one warning: the agent will not try to log either
        ui.warning(f"nothing is kept in .amas/ (no input history, no --continue): {e}")
        agent.history.path = None
        return InMemoryHistory()


def prompt_session(agent):
    from prompt_toolkit import PromptSession
    from prompt_toolkit.key_binding import KeyBindings

    keys = KeyBindings()

    @keys.add("escape", "enter")  # Esc-Enter or Alt-Enter: a new line instead of sending
    def _(event):
        event.current_buffer.insert_text("\n")

    return PromptSession(
        history=history(agent),
        completer=completer(),
        key_bindings=keys,
        complete_while_typing=False,
    )


def interact(agent) -> None:
    """Read, run, repeat until /quit or Ctrl+D; Ctrl+C clears the line or cancels a turn."""
    prompt = prompt_session(agent)
    preload(agent, prompt.app)
    ui.info(
        f"amas · {config_file.endpoint(agent.config)} · /help for commands, Esc-Enter for a new line, "
        "Ctrl+D to quit"
    )
    mode, line = agent.sandbox
    (ui.info if mode == "on" else ui.warning)(line)
    last_exchange(agent)
    while True:
        try:
            # Ctrl+C at the prompt is a key; a SIGINT just after Enter, while the prompt closes, is
            # Python's KeyboardInterrupt (prompt_toolkit's own handler would run after it closed and
            # print a traceback)
            line = prompt.prompt("› ", handle_sigint=False).strip()
        except KeyboardInterrupt:
            continue
        except EOFError:
            return
        if not step(agent, line):
            return


def choose(conversations: list[dict]) -> str | None:
    """The conversation the user picks from a numbered list (Enter: the newest; none: a new one)."""
    shown = conversations[:RECENT]
    if not shown:
        ui.info("no earlier conversation in this project; starting a new one")
        return None
    for n, c in enumerate(shown, 1):
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(c["time"]))
        line = f"{n:3}. {when}  {ui.plural(c['count'], 'message'):>13}  {ui.clean(c['first'])}"
        ui.console.print(Text(line), soft_wrap=True)
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
    """After -c or --resume: the user's last message and the answer to it, shortened."""
    said = [m for m in agent.messages if m["role"] in ("user", "assistant") and m.get("content")]
    asked = [i for i, m in enumerate(said) if m["role"] == "user"]
    for m in said[asked[-1] :] if asked else []:
        text = " ".join(m["content"].split())
        short = text if len(text) <= 300 else f"{text[:300]}…"
        ui.console.print(Text.assemble((f"  {m['role']}: ", "dim"), ui.clean(short)))


def step(agent, line: str) -> bool:
    """One line typed at the prompt: a command, a shell line, or a turn; False to leave."""
    try:
        if line.startswith("/"):
            command(agent, line)
        elif line.startswith("!"):
            shell(agent, line[1:].strip())
        elif line and mentioned(agent, line):
            if agent.gate.secrets.redact(line) != line:
                ui.info(
                    "a secret in your message is hidden: the model and the history see [REDACTED]"
                )
            agent.turn(line)
    except EOFError:
        return False
    except KeyboardInterrupt:
        ui.console.print()
        ui.warning("cancelled")
    except providers.ProviderError as e:
        ui.error(agent.gate.secrets.redact(str(e)))
    except Exception as e:  # a bug must not end the session or show a traceback
        ui.error(agent.gate.secrets.redact(f"{type(e).__name__}: {e}"))
    return True
