"""The interactive REPL: prompt_toolkit input and the slash commands (their docstrings are the help)."""

import glob
import os
import threading
from pathlib import Path

from amas_code import providers, safety, tools, ui
from amas_code.checkpoint import CheckpointError


def cmd_help(agent, arg):
    """List the commands."""
    for name, fn in COMMANDS.items():
        ui.console.print(f"  [bold]{name:<13}[/] {fn.__doc__}")


def _ask(question: str) -> bool:
    return ui.confirm(question) in ("y", "a")


def cmd_undo(agent, arg):
    """Undo the last N checkpoints (default 1): /undo [n]."""
    n = int(arg) if arg.strip().isdigit() else 1
    _report("undone", lambda cp: cp.undo(n, _ask))


def cmd_redo(agent, arg):
    """Re-apply what /undo took back."""
    _report("redone", lambda cp: cp.redo(_ask))


def cmd_checkpoint(agent, arg):
    """List checkpoints; /checkpoint <id> restores that one (undoes those after it)."""
    if arg.strip():
        return _report("restored", lambda cp: cp.restore(arg.strip(), _ask))
    listed = tools.STATE["checkpoint"].list() if tools.STATE["checkpoint"] else []
    for sha, subject in listed:
        ui.console.print(f"  [yellow]{sha}[/] {subject}", highlight=False)
    if not listed:
        ui.info("no checkpoints yet")


def _report(verb: str, action) -> None:
    cp = tools.STATE["checkpoint"]
    if cp is None:
        return ui.warning("checkpoints are off (checkpoint_on_edit: false)")
    try:
        ui.success(f"{verb}: {', '.join(action(cp))}")
    except CheckpointError as e:
        ui.error(str(e))


def cmd_attach(agent, arg):
    """Add files to your next message: /attach <path or glob>..."""
    for pattern in arg.split():
        for path in sorted(glob.glob(str(agent.root / pattern), recursive=True)) or [str(agent.root / pattern)]:
            data = Path(path).read_bytes() if Path(path).is_file() else None
            if data is None or b"\0" in data[:8192]:
                ui.error(f"cannot attach {pattern}: {'no such file' if data is None else 'binary file'}")
                continue
            agent.attachments.append((os.path.relpath(path, agent.root), data.decode(errors="replace")))
            ui.success(f"attached {os.path.relpath(path, agent.root)}")


def cmd_clear(agent, arg):
    """Start a new conversation."""
    agent.messages.clear()
    ui.success("new conversation")


def cmd_model(agent, arg):
    """Show the model, or switch: /model <name>."""
    if arg.strip():
        agent.config.update(model=arg.strip(), text_tools=False)
    ui.info(f"model: {agent.config['model']}")


def cmd_tokens(agent, arg):
    """Tokens used and cost so far."""
    u = providers.USAGE
    cost = f"${u['cost']:.4f}" + ("" if u["cost_known"] else " (some calls had no known price)")
    ui.info(f"prompt {u['prompt_tokens']} + completion {u['completion_tokens']} tokens; cost {cost}; "
            f"conversation now ~{providers.token_count(agent.config['model'], agent.prompted())} tokens")


def cmd_compact(agent, arg):
    """Summarize older messages to free context."""
    agent.compact()


def cmd_init(agent, arg):
    """Scan the project and write .amas/project_map.md."""
    from amas_code import repomap

    repomap.run(agent.root, agent.config)


def cmd_skills(agent, arg):
    """List skills; those matching your last message are active."""
    from amas_code import skills

    found = skills.load(agent.root)
    for s in found:
        active = skills.matches(s, agent.last_user())
        ui.console.print(f"  {'[green]active[/]' if active else '      '} [bold]{s['name']}[/]: {s['description']}")
    if not found:
        ui.info("no skills in .amas/skills/ or ~/.amas/skills/")


def cmd_permissions(agent, arg):
    """Show the shell permission rules and which matched last."""
    perms = agent.config.get("permissions") or {}
    for kind in ("deny", "allow"):
        ui.console.print(f"  {kind}: {', '.join(perms.get(kind) or []) or '(none)'}", markup=False, highlight=False)
    last = safety.LAST_RULE
    if last["command"]:
        ui.info(f"last: {last['command']!r} -> {last['verdict']}" + (f" by {last['rule']!r}" if last["rule"] else ""))


def cmd_browser(agent, arg):
    """Close the browser to free its memory: /browser close."""
    tools.close()
    ui.success("browser closed")


def cmd_quit(agent, arg):
    """Leave the REPL."""
    raise EOFError


COMMANDS = {"/help": cmd_help, "/undo": cmd_undo, "/redo": cmd_redo, "/checkpoint": cmd_checkpoint,
            "/attach": cmd_attach, "/clear": cmd_clear, "/model": cmd_model, "/tokens": cmd_tokens,
            "/compact": cmd_compact, "/init": cmd_init, "/skills": cmd_skills, "/permissions": cmd_permissions,
            "/browser": cmd_browser, "/quit": cmd_quit, "/exit": cmd_quit}


def command(agent, line: str) -> None:
    """Run a slash command; a unique prefix selects it."""
    name, _, arg = line.partition(" ")
    found = [c for c in COMMANDS if c == name] or [c for c in COMMANDS if c.startswith(name)]
    if len(found) != 1:
        return ui.error(f"unknown command {name}, /help lists them" if not found
                        else f"{name} is ambiguous: {', '.join(found)}")
    COMMANDS[found[0]](agent, arg)


def preload(config: dict, app) -> None:
    """Import litellm in the background once the prompt is drawn, where memory allows (SPEC §9)."""
    want = config.get("preload", "auto")
    if want == "auto":
        want = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") >= 2 << 30
    if want is not True and want != "true":
        return

    def start(_):  # after the first render, so the import does not slow the prompt's appearance
        app.after_render.remove_handler(start)
        threading.Thread(target=providers._litellm, daemon=True).start()

    app.after_render.add_handler(start)


def session(root: Path):
    from prompt_toolkit import PromptSession
    from prompt_toolkit.completion import Completer, Completion, PathCompleter
    from prompt_toolkit.document import Document
    from prompt_toolkit.history import FileHistory
    from prompt_toolkit.key_binding import KeyBindings

    class Complete(Completer):  # slash commands at the start, file paths anywhere
        paths = PathCompleter(expanduser=True)

        def get_completions(self, document, event):
            text = document.text_before_cursor
            if text.startswith("/") and " " not in text:
                yield from (Completion(c, -len(text)) for c in COMMANDS if c.startswith(text))
            elif text and not text.endswith(" "):
                word = text.split()[-1]
                yield from self.paths.get_completions(Document(word, len(word)), event)

    keys = KeyBindings()

    @keys.add("escape", "enter")  # Esc-Enter or Alt-Enter: a new line instead of sending
    def _(event):
        event.current_buffer.insert_text("\n")

    (root / ".amas").mkdir(exist_ok=True)
    return PromptSession(history=FileHistory(str(root / ".amas" / "input_history")), completer=Complete(),
                         key_bindings=keys, complete_while_typing=False)


def run(agent) -> None:
    """Read, run, repeat until /quit or Ctrl+D; Ctrl+C clears the line or cancels a turn."""
    prompt = session(agent.root)
    preload(agent.config, prompt.app)
    ui.info(f"amas · {agent.config['model']} · /help for commands, Esc-Enter for a new line, Ctrl+D to quit")
    while True:
        try:
            line = prompt.prompt("› ").strip()
        except KeyboardInterrupt:
            continue
        except EOFError:
            return
        try:
            if line.startswith("/"):
                command(agent, line)
            elif line:
                agent.turn(line)
        except EOFError:
            return
        except KeyboardInterrupt:
            ui.warning("cancelled")
        except providers.ProviderError as e:
            ui.error(str(e))
        except Exception as e:  # a bug must not end the session or show a traceback
            ui.error(f"{type(e).__name__}: {e}")
