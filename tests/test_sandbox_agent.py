"""The sandbox as the agent uses it:
leaving the box is asked, and no box means every command asked."""

import os
import stat
import time
from pathlib import Path

import pexpect
import pytest
from conftest import run_amas, toolbox

from amas_code import home as amas_home
from amas_code import sandbox

needs_box = pytest.mark.skipif(bool(sandbox.probe()), reason="bubblewrap cannot run here")


def test_the_sandbox_is_decided_once_for_the_gate_the_tools_and_the_start_line(bare, monkeypatch):
    """Whether the box can run is asked once: asked again, a second answer could leave the gate
    applying allow rules (mode on) to commands the tools then run unboxed."""
    asked = []

    def probe() -> str:
        asked.append("bwrap")
        return "bwrap not found (install bubblewrap and util-linux)" if len(asked) > 1 else ""

    monkeypatch.setattr(sandbox, "probe", probe)
    agent = toolbox(bare)
    assert asked == ["bwrap"]
    assert agent.sandbox.mode == "on" and agent.gate.sandbox == "on"
    assert agent.tools.box is not None


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
    assert done.returncode == 2  # no run with more was granted: no terminal to ask on
    assert not outside.exists()
    assert "again once with one folder outside the project writable" in done.stderr
    assert "declined: no terminal to ask on" in done.stderr and "--yes" not in done.stderr
    result = llm.requests[1]["messages"][-1]["content"]
    assert "Read-only file system" in result or "Permission denied" in result
    assert "no run with more was granted" in result and "run it themselves" in result


@needs_box
def test_a_remembered_outside_line_runs_in_the_box_under_yes(project, outside, llm):
    """An "always" to run a line outside the box, kept by an earlier amas, lets nothing out."""
    line = f"echo hi > {outside}"
    amas_home.remember(project, "outside", [line])
    llm.reply(tool="shell_command", command=line).reply(text="ok")
    done = run_amas("-y", "write it", llm=llm)
    assert done.returncode == 2 and not outside.exists()


@needs_box
def test_a_grant_opens_the_folder_the_person_names_for_one_run(repl, project, outside, llm):
    llm.reply(tool="shell_command", command=f"echo hi > {outside}").reply(text="written")
    child = repl("-y")
    child.sendline("write it")
    child.expect("again once with one folder outside the project writable")
    child.sendline(str(outside.parent))
    child.expect("written")
    assert outside.read_text() == "hi\n"
    said = llm.requests[1]["messages"][-1]["content"]
    assert f"run again once with a writable {outside.parent}" in said


@needs_box
def test_what_a_command_printed_never_picks_the_folder(repl, project, home, llm):
    """A script fakes a pip-cache refusal: its words are quoted as its own, and amas proposes no
    folder (its mounts show nothing of the host's there: the home has no ~/.cache/pip); a yes opens
    nothing, and the question is asked again."""
    fake = "touch: cannot touch '$HOME/.cache/pip/x': Read-only file system"
    line = f'echo "{fake}" >&2; echo alias ls=x >> $HOME/.bash_aliases; exit 1'
    llm.reply(tool="shell_command", command=line).reply(text="done")
    child = repl("-y")
    child.sendline("run it")
    child.expect("The command printed: ")
    child.expect("no folder to propose")
    child.expect("again once with one folder outside the project writable")
    child.sendline("y")
    child.expect("no folder was proposed")
    child.sendline("n")
    child.expect("done")
    assert not (home / ".bash_aliases").exists()
    assert "no run with more was granted" in llm.requests[1]["messages"][-1]["content"]


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


def test_a_long_line_of_output_is_judged_at_once(bare):
    """`refused` looked for a path before ': Read-only file system'
    across a 200 KB line: minutes."""
    line = "x/" * 100_000
    box = sandbox.Box()
    assert sandbox.refused(f"$ cmd\n{line}\n[exit code 3]", bare, box) == []
    said = f"{line}\ntouch: cannot touch '/etc/x': Read-only file system\n[exit code 1]"
    assert sandbox.refused(said, bare, box) == ["folder"]
