"""Import laziness as a fact: which heavy modules a start of the REPL loads, and what --version and
--help import (timings live in bench/)."""

import json
import subprocess
import sys

import pexpect
import pytest
from conftest import amas_env

from amas_code import home as amas_home

HEAVY = (
    "litellm",
    "playwright",
    "tree_sitter",
    "git",
    "httpx",
    "html2text",
    "googlesearch",
    "openai",
    "openai.resources",  # the SDK's every endpoint and type: the direct path enters it without them
    "openai.types.chat",
    "rich.markdown",  # an answer's rendering loads when an answer comes
    "markdown_it",
    "rich.live",
)
# The modules amas imported, written at its exit once the preload thread is done. That thread is
# made to start late, so that the /quit comes first: its imports then ran in the interpreter's
# shutdown, where litellm's failed ("can't register atexit after shutdown", a traceback).
PROBE = (
    "import atexit, json, sys, runpy, threading, time\nout = sys.argv[1]\n"
    "def done():\n"
    "    for t in threading.enumerate():\n"
    "        t is threading.current_thread() or t.join(20)\n"
    "    open(out, 'w').write(json.dumps(sorted(m for m in {heavy} if m in sys.modules)))\n"
    "atexit.register(done)\n"
    "from amas_code import ui\nwarm = ui.warm\n"
    "ui.warm = lambda: time.sleep(1) or warm()\n"
    "import os\nsysconf = os.sysconf\n"  # a machine of {gigabytes} GB, for preload: auto
    "os.sysconf = lambda n: 4096 if n == 'SC_PAGE_SIZE' else {gigabytes} << 18\n"
    "sys.argv = ['amas']\nrunpy.run_module('amas_code', run_name='__main__')\n"
)

# preloading also imports the reply's spinner and Markdown; litellm pulls in httpx and openai whole
LITELLM = ["httpx", "litellm", "markdown_it", "openai", "openai.types.chat", "rich.live"]
LITELLM += ["rich.markdown"]
# a server of your own: the openai SDK's client only (no litellm, not the SDK's every type)
DIRECT = ["httpx", "markdown_it", "openai", "rich.live", "rich.markdown"]
MODELS = {
    "litellm": {},  # the default model, gemini
    "direct": {"AMAS_MODEL": "openai/local", "AMAS_API_BASE": "http://127.0.0.1:9/v1"},
}
CASES = [  # preload, the model's path, the machine's memory, what the idle REPL imported
    ("false", "litellm", 8, []),
    ("true", "litellm", 8, LITELLM),
    ("false", "direct", 8, []),
    ("true", "direct", 8, DIRECT),
    ("auto", "litellm", 1, []),  # litellm's ~150 MB only where memory allows
    ("auto", "direct", 1, DIRECT),  # the direct path's ~20 MB even on a 1 GB machine
    ("auto", "litellm", 2, LITELLM),
]


@pytest.mark.parametrize("preload, path, gigabytes, expected", CASES)
def test_idle_repl_imports(project, tmp_path, preload, path, gigabytes, expected):
    (project / ".amas").mkdir()
    (project / ".amas/config.yaml").write_text(f"preload: {preload}\n")
    amas_home.set_trust(project, True)  # no first-use question before the prompt
    out = tmp_path / "modules.json"
    child = pexpect.spawn(
        sys.executable,
        ["-c", PROBE.format(heavy=HEAVY, gigabytes=gigabytes), str(out)],
        cwd=str(project),
        env=amas_env(PROMPT_TOOLKIT_NO_CPR="1", TERM="xterm", **MODELS[path]),
        encoding="utf-8",
        timeout=30,
    )
    child.expect("›")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    assert json.loads(out.read_text()) == expected


def test_a_repl_turn_with_a_local_model_never_imports_litellm(project, tmp_path, llm):
    """A person's session with a server of their own: a question, a tool call, an answer, /quit."""
    (project / ".amas").mkdir()
    (project / ".amas/config.yaml").write_text("preload: auto\n")
    amas_home.set_trust(project, True)
    llm.reply(tool="read_file", path="README.md").reply(text="It is a demo.")
    out = tmp_path / "modules.json"
    env = amas_env(llm, PROMPT_TOOLKIT_NO_CPR="1", TERM="xterm")
    code = PROBE.format(heavy=HEAVY, gigabytes=1)
    argv = ["-c", code, str(out)]
    child = pexpect.spawn(sys.executable, argv, cwd=str(project), env=env, encoding="utf-8")
    child.expect("›")
    child.sendline("what is this?")
    child.expect("It is a demo.")
    child.expect("›")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    imported = json.loads(out.read_text())
    assert "litellm" not in imported and "openai.types.chat" not in imported
    assert "openai" in imported and len(llm.requests) == 2


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_version_and_help_import_only_what_they_print(bare, flag):
    """click and the CLI's own module: not the screen's rich, not the model's providers."""
    code = (
        f"import sys, runpy; sys.argv = ['amas', '{flag}']\n"
        "try: runpy.run_module('amas_code', run_name='__main__')\n"
        "except SystemExit: pass\n"
        "mine = [m for m in sys.modules if m.split('.')[0] in ('amas_code', 'rich')]\n"
        "sys.stderr.write(repr(sorted(mine)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=amas_env()
    )
    assert done.stderr == "['amas_code', 'amas_code.amas']"
    assert done.stdout.startswith("amas ") or "Usage: amas" in done.stdout
