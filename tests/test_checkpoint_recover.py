"""A killed amas and the next one: with a real kill -9 after a command, between a checkpoint's
commit object and its ref, while a command runs, and a terminal hung up mid-command, a fresh amas
lists the half-made checkpoint (finished first) and takes the whole turn back in one /undo; a
reader never waits for a live amas's command."""

import json
import os
import select
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pexpect
import pytest
from conftest import amas_env, git
from test_checkpoint import user_state

from amas_code import repl, ui
from amas_code.checkpoint import Checkpoint

DRIVER = """
import json, os, sys
sys.path.insert(0, {tests!r})
from pathlib import Path
from conftest import toolbox
box = toolbox(Path(sys.argv[1]), checkpoint=True, auto_accept=True)
box.checkpoint.turn, box.checkpoint.request = "the-killed-turn", "edit a, then make b"
print(box.session, flush=True)
for call in json.loads(sys.argv[2]):
    if call[0] == "pause":  # from here on, held at that point
        os.environ["AMAS_TEST_PAUSE"] = call[1]
    else:
        print(json.dumps(box.execute(call[0], json.dumps(call[1]))), flush=True)
"""
EDIT = ["edit_file", {"path": "a.txt", "old_str": "a", "new_str": "edited"}]
COMMAND = "echo agent > b.txt && rm c.txt && mkdir -p d/e"


def amas_process(root: Path, calls: list) -> subprocess.Popen:
    """An amas process making tool calls in one turn; ["pause", point] holds it at that point."""
    script = DRIVER.format(tests=str(Path(__file__).parent))
    return subprocess.Popen(
        [sys.executable, "-c", script, str(root), json.dumps(calls)],
        cwd=root,
        env=amas_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # what its command started goes with it
    )


def paused(proc: subprocess.Popen, point: str) -> None:
    for line in proc.stderr:
        if f"paused at {point}" in line:
            return
    pytest.fail(f"never paused at {point}: {proc.stdout.read()}")


def kill(proc: subprocess.Popen) -> None:
    """kill -9, the command it started too."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@pytest.fixture
def work(project):
    (project / "a.txt").write_text("a\n")
    (project / "c.txt").write_text("c\n")
    git(project, "add", ".")
    git(project, "commit", "-qm", "files")
    (project / "notes.txt").write_text("the user's notes\n")
    (project / ".git" / "info" / "exclude").write_text("started.fifo\n")
    return project


def said(capsys) -> str:
    return " ".join(capsys.readouterr().err.split())


def killed_at(work: Path, point: str) -> str:
    """An amas that made an edit and then, in the same turn, ran a command, killed at the point
    named; its session."""
    if point != "running":
        proc = amas_process(work, [EDIT, ["pause", point], ["shell_command", {"command": COMMAND}]])
        session = proc.stdout.readline().strip()
        paused(proc, point)
        kill(proc)
        return session
    fifo = work / "started.fifo"  # in the project, where the box may write; git ignores it
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    running = f"{COMMAND} && echo started > started.fifo && sleep 60"
    proc = amas_process(work, [EDIT, ["shell_command", {"command": running}]])
    session = proc.stdout.readline().strip()
    try:
        assert select.select([reader], [], [], 60)[0], proc.stderr.read()
        assert os.read(reader, 100) == b"started\n"
    finally:
        kill(proc)
        os.close(reader)
        fifo.unlink()
    return session


@pytest.mark.parametrize("point", ["after", "commit", "running"])
def test_after_a_kill_one_undo_takes_the_killed_turn_back(work, agent, capsys, monkeypatch, point):
    """The next amas's /undo found no turn (the half-made checkpoint was finished only by taking
    the lock, which the turn listing does not), or took back only the command,
    as a turn of its own."""
    before = user_state(work, skip=(".amas",))  # amas's own, in the box
    session = killed_at(work, point)
    assert (work / "a.txt").read_text() == "edited\n" and not (work / "c.txt").exists()
    said(capsys)
    repl.command(agent, "/checkpoint")  # a reader: it sees the killed amas's command, finished
    listed = said(capsys)
    assert f"[amas] shell: {COMMAND}" in listed and "edit a.txt" in listed
    recovered = agent.checkpoint.history()[0]
    assert recovered["label"].endswith(" (interrupted)")
    assert recovered["turn"] == "the-killed-turn" and recovered["session"] == session
    assert recovered["request"] == "edit a, then make b"
    asked = []
    monkeypatch.setattr(ui, "ask", lambda question, *a: asked.append(question) or "y")
    repl.command(agent, "/undo")
    shown = said(capsys)
    assert f"taking back: {recovered['label']}; [amas] edit a.txt" in shown
    assert "undone: a.txt, b.txt, c.txt" in shown and user_state(work, skip=(".amas",)) == before
    # made by an amas that has ended; and what changed while no amas watched may be the user's
    assert "made before this session" in asked[0] and "b.txt, c.txt changed since" in asked[1]
    repl.command(agent, "/undo")
    assert "nothing to undo" in said(capsys)


def test_a_reader_never_waits_for_a_live_amas_and_leaves_its_command_alone(work, agent, capsys):
    holder = amas_process(work, [["pause", "after"], ["shell_command", {"command": COMMAND}]])
    holder.stdout.readline()
    paused(holder, "after")  # alive, its command done, its checkpoint not yet made
    try:
        reading = threading.Thread(target=repl.command, args=(agent, "/checkpoint"))
        reading.start()
        reading.join(30)
        assert not reading.is_alive(), "/checkpoint waited for the other amas's command"
        shown = said(capsys)
        assert "no checkpoints yet" in shown and "waiting for another amas" not in shown
        assert (agent.checkpoint.dir / "pending.json").exists()  # its own, left to it
    finally:
        kill(holder)
    repl.command(agent, "/checkpoint")  # killed now: its lock is free, its checkpoint finished
    assert f"[amas] shell: {COMMAND} (interrupted)" in said(capsys)


def test_redo_and_the_turn_listing_of_a_fresh_amas_see_what_a_killed_one_left(work, capsys):
    """Each reader of the history on its own finishes the killed amas's checkpoint first."""
    killed_at(work, "after")
    fresh = Checkpoint(work, [], "fresh")
    assert [cp["label"] for cp in fresh.turns(1)] == [
        f"[amas] shell: {COMMAND} (interrupted)",
        "[amas] edit a.txt",
    ]
    proc = amas_process(
        work, [["pause", "commit"], ["shell_command", {"command": "echo 2 > b.txt"}]]
    )
    paused(proc, "commit")
    kill(proc)  # a second kill, on top
    assert fresh.redoable() is None  # the redo reader finished it: nothing to redo after it
    assert fresh.history(limit=1)[0]["label"] == "[amas] shell: echo 2 > b.txt (interrupted)"


def test_a_terminal_hung_up_while_a_command_runs_leaves_one_turn_to_undo(repl, project, llm):
    """A real turn in the REPL (an edit, then a command), and the terminal closed mid-command: the
    next amas's one /undo takes back both."""
    (project / "a.txt").write_text("a\n")
    git(project, "add", ".")
    git(project, "commit", "-qm", "a")
    before = user_state(project, skip=(".amas",))  # the REPL's own
    llm.reply(tool="edit_file", path="a.txt", old_str="a", new_str="edited")
    llm.reply(tool="shell_command", command="echo agent > b.txt; echo cmd-$((1+1)); sleep 60")
    child = repl("-y")
    child.sendline("edit a, then make b")
    child.expect("cmd-2")  # its output, shown live
    assert (project / "b.txt").read_text() == "agent\n"
    child.close(force=True)  # the terminal is gone: a hang-up
    lock = Checkpoint(project, []).dir / "amas.lock"
    ended = subprocess.run(["flock", "-w", "30", str(lock), "true"])  # the amas it killed is gone
    assert ended.returncode == 0
    child = repl()
    child.sendline("/undo")
    child.expect(
        r"taking back: \[amas\] shell: echo agent > b\.txt; echo cmd-\$\(\(1\+1\)\); sleep"
    )
    child.expect(r"\(interrupted\); \[amas\] edit a\.txt")
    for question in ["made before this session", r"b\.txt changed since the checkpoint"]:
        child.expect(question)
        child.expect(r"\[y\]es/\[n\]o")
        child.sendline("y")
    child.expect(r"undone: a\.txt, b\.txt")
    child.expect("›")
    assert user_state(project, skip=(".amas",)) == before
    child.sendline("/quit")
    child.expect(pexpect.EOF)
