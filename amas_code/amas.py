"""The command line: `amas "prompt"`, `amas` (REPL), `amas init`, `amas -c`."""

import sys
from pathlib import Path

import click

from amas_code import __version__, ui


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("prompt", nargs=-1)
@click.option("-m", "--model", help="litellm model, e.g. ollama_chat/qwen2.5-coder or openai/gpt-4o")
@click.option("--api-base", help="Provider URL, e.g. http://localhost:11434 for Ollama")
@click.option("-y", "--yes", is_flag=True, help="Apply edits and run commands without asking")
@click.option("-c", "--continue", "resume", is_flag=True, help="Resume the latest session in the REPL")
@click.version_option(__version__, "--version", prog_name="amas", message="%(prog)s %(version)s")
def cli(prompt, model, api_base, yes, resume):
    """Amas Code: a small AI coding agent. `amas "task"` runs one task; `amas` opens the REPL;
    `amas init` maps the project for the model."""
    from amas_code import config as config_file

    root = Path.cwd()
    try:
        config, warnings = config_file.load(root, {"model": model, "api_base": api_base, "auto_accept": yes or None})
    except config_file.ConfigError as e:
        ui.error(str(e))
        sys.exit(1)
    for warning in warnings:
        ui.warning(warning)
    text = " ".join(prompt).strip()
    if text == "init":
        from amas_code import repomap

        sys.exit(repomap.run(root, config))
    if not text and not resume and not sys.stdin.isatty():
        text = sys.stdin.read().strip()
    sys.exit(run(root, config, text, resume))


def run(root: Path, config: dict, text: str, resume: bool) -> int:
    from amas_code import history, providers, repl, tools
    from amas_code.agent import Agent
    from amas_code.checkpoint import Checkpoint

    checkpoint = Checkpoint(root, ignore=config["ignore"]) if config["checkpoint_on_edit"] else None
    tools.setup(root, config, checkpoint)
    session, messages = history.latest(root / ".amas" / "history.jsonl") if resume else (None, [])
    if resume:
        ui.info(f"resuming session {session} ({len(messages)} messages)" if session else "no earlier session")
    agent = Agent(config, root, session, messages)
    agent.repair()  # a session killed mid-tool resumes with every tool call answered
    try:
        if not text:
            repl.run(agent)
            return 0
        return 0 if agent.turn(text) else 130
    except providers.ProviderError as e:
        ui.error(str(e))
        return 1
    finally:
        tools.close()


def main() -> None:
    try:
        cli()
        code = 0
    except KeyboardInterrupt:
        ui.warning("interrupted")
        code = 130
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else int(e.code is not None)
    except Exception as e:  # never a traceback on the user's screen
        ui.error(f"unexpected {type(e).__name__}: {e}")
        code = 1
    if "litellm" in sys.modules:  # tearing down its ~1,100 modules takes a second: skip it
        import atexit
        import os

        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
