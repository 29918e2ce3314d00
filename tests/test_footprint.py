"""Import laziness as a fact: which heavy modules a start of the REPL loads (timings live in bench/)."""

import json
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
    "sys.argv = ['amas']\nrunpy.run_module('amas_code', run_name='__main__')\n"
)


# preloading also imports the reply's spinner and Markdown
WARMED = ["litellm", "markdown_it", "rich.live", "rich.markdown"]


@pytest.mark.parametrize("preload, expected", [("false", []), ("true", WARMED)])
def test_idle_repl_imports(project, tmp_path, preload, expected):
    (project / ".amas").mkdir()
    (project / ".amas/config.yaml").write_text(f"preload: {preload}\n")
    amas_home.set_trust(project, True)  # no first-use question before the prompt
    out = tmp_path / "modules.json"
    child = pexpect.spawn(
        sys.executable,
        ["-c", PROBE.format(heavy=HEAVY), str(out)],
        cwd=str(project),
        env=amas_env(PROMPT_TOOLKIT_NO_CPR="1", TERM="xterm"),
        encoding="utf-8",
        timeout=30,
    )
    child.expect("›")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    imported = json.loads(out.read_text())
    # preloading starts litellm's import in the background (which pulls in httpx and openai itself)
    assert [m for m in imported if not (expected and m in ("httpx", "openai"))] == expected
