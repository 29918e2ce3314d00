"""The command line: `amas "prompt"`, `amas` (REPL), `amas init`, `amas -c`, `amas --trust`."""

import contextlib
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import click

from amas_code import __version__

# --version and --help import no more than they print (click): the rest where it is used
if TYPE_CHECKING:
    from amas_code.report import Report


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("prompt", nargs=-1)
@click.option(
    "-m", "--model", help="litellm model, e.g. ollama_chat/qwen2.5-coder or openai/gpt-4.1"
)
@click.option("--api-base", help="Provider URL, e.g. http://localhost:11434 for Ollama")
@click.option("-y", "--yes", is_flag=True, help="Apply edits and run commands without asking")
@click.option(
    "-c", "--continue", "resume", is_flag=True, help="Resume the latest conversation in the REPL"
)
@click.option(
    "--trust/--untrust",
    default=None,
    help="Trust this folder's config, rules, AGENTS.md and skills (until one changes), or stop",
)
@click.option(
    "--resume", "pick", is_flag=True, help="List recent conversations and open the one you choose"
)
@click.option(
    "--output-format",
    type=click.Choice(["text", "json", "stream-json"]),
    default="text",
    help="For scripts: one JSON result, or one JSON event per line",
)
@click.option("--plan", is_flag=True, help="Plan mode: read, run tests, propose; change nothing")
@click.option(
    "--max-turns",
    type=click.IntRange(min=1),
    help="A one-shot stops after this many model requests (exit code 3; `amas -c` resumes)",
)
@click.version_option(__version__, "--version", prog_name="amas", message="%(prog)s %(version)s")
def cli(prompt, model, api_base, yes, resume, trust, pick, output_format, plan, max_turns):
    """Amas Code: a small AI coding agent. `amas "task"` runs one task; `amas` opens the REPL;
    `amas init` maps the project for the model; `cat log | amas "explain this"` attaches what is
    piped.

    \b
    Exit codes: 0 done, nothing refused; 1 an error (auth, network, config, model);
    2 done, but an edit or command was declined; 3 stopped at --max-turns; 4 done, but every change
    the model attempted failed and nothing changed; 130 interrupted."""
    from amas_code import providers, ui
    from amas_code.report import Report

    root = find_root(Path.cwd())
    report = Report(output_format)
    flags = {"model": model, "api_base": api_base, "auto_accept": yes or None}
    text = " ".join(prompt).strip()
    if trust is None or text:  # before the trust question: whether to go on here at all
        home_root(root)
    config = settings(root, flags, trust, report)
    config = providers.take_keys(config)  # before anything starts a child process
    if trust is not None and not text:
        sys.exit(0)
    if text == "init":
        from amas_code import repomap

        sys.exit(repomap.init(root, config["ignore"]))
    piped = "" if sys.stdin.isatty() else read_piped(sys.stdin.buffer)
    text = f"{text}\n\n```\n{piped}\n```" if text and piped else text or piped
    if not text and not sys.stdin.isatty():
        nothing_to_do(report)
    if pick and not text:
        from amas_code import repl

        resume = repl.choose(root) or False
    fail_fast(config, report, text)
    from amas_code.agent import Agent

    typed = " ".join(prompt)  # @path in what was typed, not in what was piped
    agent = Agent(config, root, resume, report if text else None)
    agent.plan(plan)
    agent.max_requests = max_turns or 0
    if max_turns and not text:
        ui.warning("--max-turns bounds a one-shot; the REPL has no turn limit")
    sys.exit(converse(agent, text, typed))


def fail_fast(config: dict, report: "Report", text: str) -> None:
    """A one-shot (text given) whose model cannot work (no key, unknown provider, malformed
    api_base, a local server not listening) ends here, before a model library loads (seconds for
    litellm; more on a Pi)."""
    from amas_code import providers, ui

    if not text:  # the REPL: /model can still pick another
        return
    try:
        providers.precheck(config)
    except providers.ProviderError as e:
        ui.error(str(e))
        report.error(str(e))
        sys.exit(report.finish("error", "", {}))


def home_root(root: Path) -> None:
    """Started in the home, /, or a folder above the home (no project found): the box keeps it
    read-only and no checkpoint copies it;
    in a terminal the person may rather start in a project."""
    from amas_code import sandbox, ui

    if sandbox.writable_root(root):
        return
    ui.warning(
        f"{root} is your home or above it, not a project folder: commands see it read-only in the "
        "box and no checkpoints are kept; to work on a project, start amas in its folder"
    )
    if ui.can_ask() and ui.ask("Go on here, with the home read-only?", "yn") != "y":
        sys.exit(0)


def nothing_to_do(report: "Report") -> None:
    """No prompt, and no terminal for the REPL:
    said, and as the result a script reading JSON gets."""
    from amas_code import ui

    said = 'nothing to do: give a prompt (amas "...") or pipe one in; the REPL needs a terminal'
    ui.error(said)
    report.error(said)
    sys.exit(report.finish("error", "", {}))


def read_piped(stream, keep: int = 30_000) -> str:
    """What was piped in, in bounded memory:
    if long, its head and its end (where a log's errors are)."""
    from amas_code import effects, ui

    piped = effects.Capped(keep, keep, "characters of piped input")
    while chunk := stream.read(1 << 20):
        piped.add(chunk)
    if piped.cut:  # said, not only to the model
        ui.warning(
            f"piped input is {piped.size():,} bytes: only its first {keep // 1000} KB and last "
            f"{keep // 1000} KB are sent"
        )
    return piped.text().replace("\r\n", "\n").strip()


def find_root(here: Path) -> Path:
    """The nearest folder up with .amas/ or .git
    (your home's .amas/ is your own settings, not a project)."""
    for folder in [here, *here.parents]:
        if (folder / ".git").exists() or ((folder / ".amas").is_dir() and folder != Path.home()):
            return folder
    return here


def settings(root: Path, flags: dict, trust: bool, report: "Report") -> dict:
    """The merged config; a folder used for the first time is asked about once (in a terminal), and
    until it is trusted its loosening settings are ignored with a warning."""
    from amas_code import config as config_file
    from amas_code import home, ui

    try:
        _trust(root, trust)
        config, warnings, ignored = config_file.load(root, flags)
    except home.ConfigError as e:
        ui.error(str(e))
        report.error(str(e))
        sys.exit(report.finish("error", "", {}))
    for warning in warnings:
        ui.warning(warning)
    if ignored:
        ui.warning(
            f"ignored {', '.join(ignored)} from .amas/config.yaml: this folder is not trusted "
            "(`amas --trust` trusts it)"
        )
    return config


def _trust(root: Path, trust: bool | None) -> None:
    """--trust or --untrust as asked; else a folder whose steering files changed, or new, is asked
    about (in a terminal)."""
    from amas_code import home, ui

    if trust is not None:
        home.set_trust(root, trust)
        said = f"trusted {root} (until what steers amas there changes)"
        ui.success(said if trust else f"{root} is no longer trusted")
    elif home.answered(root) is None:
        _changed(root)


def _changed(root: Path) -> None:
    """Say which steering file changed since the folder was trusted; ask again where there is a
    terminal (without one the folder is untrusted until then)."""
    from amas_code import home, ui

    changed = home.changed_since_trusted(root)
    if changed:
        ui.warning(f"{', '.join(changed)} changed since you trusted this folder: not trusted now")
    if ui.can_ask():
        ask_trust(root)


def ask_trust(root: Path) -> None:
    """Ask once whether to trust a folder, saying what trusting turns on there (or that it turns
    on only your own allow rules); the answer is kept in your home."""
    from rich.text import Text

    from amas_code import home, ui

    detail = shipped(root)
    question = (
        f"Trust {root}? Its settings, rules and skills are then used, and your allow rules apply"
    )
    if not detail.plain:
        detail = Text(
            f"{root} has no amas settings, rules, AGENTS.md or skills: trusting it only lets your "
            "own allow rules run matching commands here unasked.\n"
        )
        question = f"Trust {root}?"
    answer = ui.ask(question, "yn", detail)
    home.set_trust(root, answer == "y")


def shipped(root: Path):
    """What trusting the folder turns on, as amas computes it, for the trust question: each
    loosening of its config on a line of its own (the dangerous first, marked), then the rules,
    AGENTS.md and skills it would give the model. Nothing is cut; empty when it has none."""
    from rich.text import Text

    from amas_code import config as config_file
    from amas_code import home, ui

    path = root / ".amas" / "config.yaml"
    try:
        project = config_file.read_yaml(path) if path.is_file() else {}
        lines = config_file.loosenings(project)
    except home.ConfigError as e:
        lines = [(f".amas/config.yaml cannot be read ({e})", "its settings are ignored", False)]
    lines += _instructions(root)
    text = Text()
    if lines:
        text.append("Trusting this folder turns on:\n")
    for setting, what, dangerous in lines:
        mark = ("  ", "")
        if dangerous:
            mark = ("⚠ ", "bold red")
        text.append_text(Text.assemble(mark, (ui.clean(setting), mark[1]), f" — {what}\n"))
    return text


def _instructions(root: Path) -> list[tuple[str, str, bool]]:
    """The rules, AGENTS.md and skills the folder would give the model, with their sizes."""
    from amas_code import ui

    found = []
    for name in (".amas/rules.md", "AGENTS.md"):
        with contextlib.suppress(OSError, UnicodeDecodeError):
            lines = (root / name).read_text().count("\n") + 1
            found.append((f"{name} ({ui.plural(lines, 'line')})", "the model follows it", False))
    skills = root / ".amas" / "skills"
    names = sorted(p.stem for p in skills.glob("*.md")) if skills.is_dir() else []
    if names:
        listed = f".amas/skills: {ui.plural(len(names), 'skill')} ({', '.join(names)})"
        found.append((listed, "the model follows them when they match", False))
    return found


def converse(agent, text: str, typed: str = "") -> int:
    """The agent on one task (with its report), or the REPL; the exit code."""
    from amas_code import ui

    with ui.hiding(agent.redact):  # the session's secrets, never on the screen
        return interactive(agent) if not text else one_shot(agent, text, typed)


def one_shot(agent, text: str, typed: str) -> int:
    """The agent on one task, with its report (the files its prompt names with @path attached);
    the exit code."""
    from amas_code import ui

    report = agent.report
    if agent.tools.planning:
        report.mode = "plan"
    report.start(agent.session, agent.model.name, agent.secrets.hidden)
    if agent.sandbox.mode != "on":  # said once at start: commands are not boxed
        ui.warning(agent.sandbox.line)
    agent.attach_mentioned(typed)
    try:
        outcome = _outcome(agent, text)
    finally:
        agent.close()
    if outcome == "done" and report.unchanged():
        ui.warning("every change the agent attempted failed: nothing changed (exit code 4)")
    return report.finish(outcome, agent.session, agent.model.usage)


def _outcome(agent, text: str) -> str:
    """How the one-shot's turn ended: done, interrupted, limited (--max-turns) or error."""
    from amas_code import providers, ui
    from amas_code.agent import TurnLimit

    try:
        if agent.turn(text):
            return "done"
        return "interrupted"
    except TurnLimit as e:
        agent.warn(f"stopped after {e}: --max-turns {agent.max_requests}; `amas -c` resumes it")
        return "limited"
    except providers.ProviderError as e:
        # credentials in api_base or a key echoed back: hidden by the screen and the report
        message = str(e).replace("/model another", "run with -m another model")  # no REPL here
        ui.error(message)
        agent.report.error(message)
        return "error"


def interactive(agent) -> int:
    """The REPL, until the person leaves."""
    from amas_code import repl

    try:
        repl.interact(agent)
    finally:
        agent.close()
    return 0


def main() -> None:
    # not standalone: click would print "Aborted!" for a Ctrl+C at a question
    # before the agent starts
    try:
        code = cli.main(standalone_mode=False) or 0
    except (KeyboardInterrupt, click.Abort):
        from amas_code import ui

        ui.warning("interrupted")
        code = 130
    except click.ClickException as e:  # a usage error
        e.show()
        code = e.exit_code
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else int(e.code is not None)
    except Exception as e:  # never a traceback on the user's screen
        from amas_code import ui

        ui.error(f"unexpected {type(e).__name__}: {e}")
        code = 1
    leave(code)


def leave(code: int) -> None:
    """Exit with code. Tearing down the modules a model library brought takes time (0.17 s after the
    openai SDK's, a second after litellm's, which imports openai too): skip it. A preload thread
    still importing would fail in the interpreter's shutdown and print its traceback: leave it
    unfinished."""
    if "openai" in sys.modules or threading.active_count() > 1:
        import atexit
        import os

        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
