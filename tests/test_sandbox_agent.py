"""The sandbox as the agent uses it: leaving the box is asked, and no box means every command asked."""

import os
import stat
import time
from pathlib import Path

import pexpect
import pytest
from conftest import run_amas

from amas_code import sandbox

needs_box = pytest.mark.skipif(bool(sandbox.probe()), reason="bubblewrap cannot run here")


@pytest.fixture
def outside():
    """A file outside the project and outside /tmp (the box has a /tmp of its own)."""
    path = Path("/var/tmp") / f"amas-test-{os.getpid()}-{time.monotonic_ns()}.txt"
    yield path
    path.unlink(missing_ok=True)


@needs_box
def test_a_write_outside_the_project_fails_in_the_box_and_is_not_rerun_unasked(
    project, outside, llm
):
    llm.reply(tool="shell_command", command=f"echo hi > {outside}").reply(text="ok")
    done = run_amas("-y", "write it", llm=llm)
    assert done.returncode == 2  # the run outside the box was declined: no terminal
    assert not outside.exists()
    assert "Run it again outside the sandbox?" in done.stderr
    result = llm.requests[1]["messages"][-1]["content"]
    assert "Read-only file system" in result or "Permission denied" in result


@needs_box
def test_leaving_the_box_is_asked_with_the_reason_and_runs_when_allowed(
    repl, project, outside, llm
):
    llm.reply(tool="shell_command", command=f"echo hi > {outside}").reply(text="written")
    child = repl("-y")
    child.sendline("write it")
    child.expect("it writes outside the project")
    child.expect("Run it again outside the sandbox\\?")
    child.sendline("y")
    child.expect("written")
    assert outside.read_text() == "hi\n"
    assert "run again outside the sandbox" in llm.requests[1]["messages"][-1]["content"]


def test_without_a_box_every_command_is_asked_even_when_allowed(project, tmp_path, llm):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "bwrap").write_text("#!/bin/sh\nexit 1\n")
    (fake / "bwrap").chmod(stat.S_IRWXU)
    (project / ".amas").mkdir(exist_ok=True)
    (project / ".amas" / "config.yaml").write_text("permissions: {allow: ['touch *']}\n")
    llm.reply(tool="shell_command", command="touch made").reply(text="ok")
    path = f"{fake}:{os.environ['PATH']}"
    done = run_amas("--trust", "-y", "touch", llm=llm, env={"PATH": path})
    assert "no sandbox: bwrap cannot run here" in done.stderr
    assert "every command will be asked, allow rules off" in done.stderr
    assert done.returncode == 2 and not (project / "made").exists()


def test_the_repl_says_which_mode_is_in_force(repl, project):
    child = repl(wait=False)
    expected = "commands run in a sandbox" if not sandbox.probe() else "no sandbox"
    child.expect(expected)
    child.expect("›")
    child.sendline("/permissions")
    child.expect(expected)
    child.sendline("/quit")
    child.expect(pexpect.EOF)


def test_a_long_line_of_output_is_judged_at_once():
    """`blocked` looked for a path before ': Read-only file system' across a 200 KB line: minutes."""
    line = "x" * 200_000
    assert sandbox.blocked(f"$ cmd\n{line}\n[exit code 3]") is None
    said = f"{line}\ntouch: cannot touch '/etc/x': Read-only file system\n[exit code 1]"
    assert sandbox.blocked(said) == "it writes outside the project (/etc/x)"


@needs_box
def test_what_a_command_leaves_that_runs_outside_amas_is_named(project, llm):
    """A .pth in the project's virtual environment runs at its next python; a new nested .git's
    config at the next git there: the box cannot stop either, so the result names them."""
    site = ".venv/lib/python3.11/site-packages"
    plant = f"mkdir -p {site}; touch .venv/pyvenv.cfg; echo 'import os' > {site}/evil.pth; "
    plant += "git init -q vendor/x"
    llm.reply(tool="shell_command", command="echo hi").reply(tool="shell_command", command=plant)
    llm.reply(text="ok")
    done = run_amas("-y", "set it up", llm=llm)
    assert done.returncode == 0, done.stderr
    assert "left in the project" not in llm.requests[1]["messages"][-1]["content"]
    result = llm.requests[2]["messages"][-1]["content"]
    assert "left in the project, and run by python or git outside amas" in result
    assert f"{site}/evil.pth, vendor/x/.git;" in result
