"""Shared fixtures: a scripted model server, a temp git project, and ways to run amas."""

import os
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest
from click.testing import CliRunner

from amas_code import home as amas_home

sys.path.insert(0, str(Path(__file__).parent))
from forkserver import Forkserver  # noqa: E402
from llm_server import ScriptedLLM  # noqa: E402

START_ENV = dict(os.environ)  # as the worker started, before any test's changes
FORKSERVERS = {}  # this worker's, by model library, once a test needs one

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before any test imports litellm
API_KEY = "sk-test-secret-key-12345"


@pytest.fixture(autouse=True)
def no_tty(monkeypatch):
    """Questions never reach the terminal the tests run in:
    without a pty, amas has no one to ask."""
    from amas_code import ui

    monkeypatch.setattr(ui, "TTY", "/nonexistent/tty", raising=False)


def count_tokens(text: str) -> int:
    """Real tokens
    (amas turns litellm's counter off for its replies' bookkeeping; here it is on)."""
    import litellm

    litellm.disable_token_counter = False
    return litellm.token_counter(model="gpt-4o", text=text)


def answered(call, *args):
    """What the model reads of a tool's call: its result, or `Error: ` and what it raised, as the
    agent words a ValueError or PermissionError (the tools' one convention for a failure)."""
    try:
        return call(*args)
    except (ValueError, PermissionError) as e:
        return f"Error: {e}"


def make_config(**overrides) -> dict:
    """A complete config as config.load returns it, with overrides."""
    from amas_code.config import DEFAULT_CONFIG

    return {
        **DEFAULT_CONFIG,
        "permissions": {"allow": [], "deny": [], "env": []},
        "secrets": [],
        **overrides,
    }


def toolbox(root, checkpoint: bool = False, **overrides):
    """An agent on a project, for its tools: `execute(name, json)` runs a call as the model's would
    (asked, checkpointed and performed by the agent); no model is called."""
    from amas_code.agent import Agent

    config = make_config(checkpoint_on_edit=checkpoint, **overrides)
    return Agent(config, root)


def history_file(root, name: str = "history.jsonl") -> Path:
    """Where amas keeps a project's history or input history:
    in the user's home (its folder made)."""

    path = amas_home.state_file(root, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def llm():
    server = ScriptedLLM()
    yield server
    server.close()


def git(cwd, *args) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in list(os.environ):
        if var.startswith("AMAS_") or var.endswith("_API_KEY") or var.endswith("_API_BASE"):
            monkeypatch.delenv(var)
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Test User")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "user@example.com")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Test User")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "user@example.com")
    return home


@pytest.fixture
def bare(tmp_path, home, monkeypatch):
    """An empty project folder (no git), as the current directory."""
    root = tmp_path / "proj"
    root.mkdir()
    monkeypatch.chdir(root)
    return root


@pytest.fixture
def project(bare):
    """A git repository with one commit, as the current directory."""
    (bare / "README.md").write_text("# demo\n")
    git(bare, "init", "-q", "-b", "main")
    git(bare, "add", ".")
    git(bare, "commit", "-qm", "initial")
    return bare


@pytest.fixture
def amas(llm, monkeypatch):
    """Run amas in-process (click's CliRunner) against the scripted model;
    stdin is not a terminal."""
    monkeypatch.setenv("AMAS_MODEL", "openai/test-model")
    monkeypatch.setenv("AMAS_API_BASE", llm.url)
    monkeypatch.setenv("AMAS_API_KEY", API_KEY)
    monkeypatch.setenv("COLUMNS", "100")

    def run(*args, input=None):
        from amas_code.amas import cli

        saved = dict(os.environ)  # amas takes its keys out of its environment: give them back
        try:
            return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=True)
        # and keep what imports set: litellm's TIKTOKEN_CACHE_DIR (else tiktoken downloads)
        finally:
            os.environ.update(saved)

    return run


def amas_env(llm=None, **extra) -> dict:
    """Environment for amas in a subprocess."""
    env = {**os.environ, "COLUMNS": "100", "PYTHONPATH": str(Path(__file__).parents[1]), **extra}
    if llm:
        env.update(AMAS_MODEL="openai/test-model", AMAS_API_BASE=llm.url, AMAS_API_KEY=API_KEY)
    return env


def fork_server(library: str = "direct") -> Forkserver:
    """This worker's fork server (see forkserver.py) for runs on a model library's path, started on
    first use."""
    server = FORKSERVERS.get(library)
    if server is None or server.proc.poll() is not None:
        server = FORKSERVERS[library] = Forkserver(amas_env(None, **START_ENV), library)
    return server


def library(args, env: dict) -> str:
    """The library a run with these arguments and environment reaches its model through (a model
    named in a config file is not seen here: the run then imports litellm itself)."""
    from amas_code import providers

    given = dict(zip(args, args[1:], strict=False))
    model = given.get("-m") or given.get("--model") or env.get("AMAS_MODEL") or ""
    base = given.get("--api-base") or env.get("AMAS_API_BASE")
    if not model or providers.is_direct(model, base):
        return "direct"
    return "litellm"


FRESH = [sys.executable, "-m", "amas_code"]  # for pexpect, where the test is about litellm's import


def amas_argv(*args, env: dict | None = None) -> list[str]:
    """`python -m amas_code ARGS` for pexpect, forked onto its terminal from the fork server of the
    model library these arguments and environment reach."""
    return fork_server(library(args, env or {})).argv(args)


def run_amas(*args, llm=None, input=None, env=None, timeout=120):
    """Run `python -m amas_code` as a user would, in the current directory: its own process and
    session (no controlling terminal: amas asks no one), stdin a pipe (input: text or bytes),
    stdout and stderr captured as text."""
    env = {**amas_env(llm), **(env or {})}
    return fork_server(library(args, env)).run(args, "" if input is None else input, env, timeout)


@pytest.fixture(scope="session", autouse=True)
def stop_fork_server():
    """This worker's fork server, started before any test: amas ends every child of its process
    that appeared while a command ran, and in-process tests run commands in this one."""
    fork_server()
    yield
    for server in FORKSERVERS.values():
        server.close()


@pytest.fixture
def agent(project, llm):
    """An in-process Agent on the user's own (trusted) project, talking to the scripted model, edits
    auto-accepted."""
    from amas_code.agent import Agent

    amas_home.set_trust(project, True)
    config = make_config(
        model="openai/test-model",
        api_base=llm.url,
        api_key=API_KEY,
        auto_accept=True,
        secrets=[API_KEY],
    )
    return Agent(config, project)


@pytest.fixture
def repl(project, llm):
    """Start `amas [args]` in a pseudo-terminal and wait for its prompt."""
    children = []

    def start(*args, wait=True, trusted=True):
        """trusted: the folder was trusted before
        (else amas asks first, as in a folder new to it)."""
        if trusted:
            amas_home.set_trust(project, True)
        env = amas_env(
            llm, PROMPT_TOOLKIT_NO_CPR="1", TERM="xterm", NO_COLOR="1", COLUMNS="120", LINES="40"
        )
        argv = amas_argv(*args, env=env)
        child = pexpect.spawn(
            argv[0],
            argv[1:],
            cwd=str(project),
            env=env,
            encoding="utf-8",
            timeout=30,
            dimensions=(40, 120),
        )
        children.append(child)
        if wait:
            child.expect("›")
        return child

    yield start
    for child in children:
        child.close(force=True)
