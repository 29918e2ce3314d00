"""Checkpoints under concurrency and kill -9: two amas processes at once, the user committing
meanwhile, and a process killed at each step (AMAS_TEST_PAUSE holds it there); no checkpoint is
lost, no lock is left behind, every file is its before or its after, and the next amas can undo."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import amas_env, git, toolbox
from test_checkpoint import refuse, user_state

from amas_code.checkpoint import Checkpoint

DRIVER = """
import json, sys
sys.path.insert(0, {tests!r})
from pathlib import Path
from conftest import toolbox
box = toolbox(Path(sys.argv[1]), checkpoint=True, auto_accept=True)
for call in json.loads(sys.argv[2]):
    if call[0] == "undo":
        print(box.checkpoint.undo(call[1], lambda q: True), flush=True)
    else:
        print(box.execute(call[0], json.dumps(call[1])), flush=True)
"""


def amas_process(root: Path, calls: list, pause: str = "") -> subprocess.Popen:
    """An amas process making tool calls (or ["undo", n]) in root, held at the pause point
    if one is named."""
    script = DRIVER.format(tests=str(Path(__file__).parent))
    env = amas_env(AMAS_TEST_PAUSE=pause) if pause else amas_env()
    return subprocess.Popen(
        [sys.executable, "-c", script, str(root), json.dumps(calls)],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def kill_when_paused(proc: subprocess.Popen, point: str) -> None:
    for line in proc.stderr:
        if f"paused at {point}" in line:
            break
    else:
        pytest.fail(f"never paused at {point}: {proc.stdout.read()}")
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def edit(path: str, old: str, new: str) -> list:
    return ["edit_file", {"path": path, "old_str": old, "new_str": new}]


def shell(command: str) -> list:
    return ["shell_command", {"command": command}]


@pytest.fixture
def work(project):
    """The project with two committed files and the user's own uncommitted work."""
    (project / "a.txt").write_text("a\n")
    (project / "b.txt").write_text("b\n")
    git(project, "add", ".")
    git(project, "commit", "-qm", "files")
    (project / "notes.txt").write_text("user's notes\n")
    return project


@pytest.mark.parametrize(
    "calls, point, changed",
    [
        ([edit("a.txt", "a", "agent")], "before", False),
        ([edit("a.txt", "a", "agent")], "after", True),
        ([edit("a.txt", "a", "agent")], "commit", True),
        ([shell("echo agent > a.txt && rm b.txt && mkdir -p d/e")], "before", False),
        ([shell("echo agent > a.txt && rm b.txt && mkdir -p d/e")], "after", True),
        ([shell("echo agent > a.txt && rm b.txt && mkdir -p d/e")], "commit", True),
    ],
)
def test_kill_while_recording(work, calls, point, changed):
    before = user_state(work)
    kill_when_paused(amas_process(work, calls, point), point)
    assert (user_state(work)["files"] != before["files"]) == changed
    assert user_state(work)["dotgit"] == before["dotgit"]
    # the next amas, with no lock in its way
    cp = Checkpoint(work, toolbox(work).config["ignore"], "next")
    box = toolbox(work, checkpoint=True, auto_accept=True)
    box.execute("create_file", json.dumps({"path": "later.txt", "content": "later\n"}))
    history = cp.history()
    assert len(history) == 1 + changed and history[0]["label"] == "[amas] create later.txt"
    assert not changed or history[1]["label"].endswith(" (interrupted)")
    asked = []  # what changed while no amas watched may be the user's: its undo asks
    cp.undo(len(history), lambda q: asked.append(q) or True)
    assert user_state(work) == before and len(asked) == changed


def test_kill_while_undoing_leaves_each_file_before_or_after(work):
    before = user_state(work)
    box = toolbox(work, checkpoint=True, auto_accept=True)
    box.execute(
        "shell_command",
        json.dumps({"command": "echo agent > a.txt && echo agent > b.txt && echo n > n.txt"}),
    )
    after = user_state(work)
    kill_when_paused(amas_process(work, [["undo", 1]], "undo"), "undo")
    now = user_state(work)["files"]
    for name in ["a.txt", "b.txt", "n.txt"]:
        assert now.get(name) in (before["files"].get(name), after["files"].get(name))
    assert set(now) <= set(before["files"]) | set(after["files"])  # no temporary file left behind
    Checkpoint(work, box.config["ignore"], "next").undo(1, refuse)  # finishes without asking
    assert user_state(work) == before


def test_stale_git_locks_in_the_shadow_do_not_block(work):
    box = toolbox(work, checkpoint=True, auto_accept=True)
    box.execute("shell_command", json.dumps({"command": "echo 1 > a.txt"}))
    for name in ["index.lock", "refs/heads/main.lock", "HEAD.lock"]:
        (box.checkpoint.dir / name).write_text("left by a killed git\n")
    result = box.execute("shell_command", json.dumps({"command": "echo 2 > a.txt"}))
    assert "[checkpoint: 1 file" in result
    box.checkpoint.undo(2, refuse)
    assert (work / "a.txt").read_text() == "a\n"


def test_two_amas_processes_at_once_lose_no_checkpoint(work):
    before = user_state(work)
    rounds = 12
    procs = [
        amas_process(
            work,
            [["create_file", {"path": f"p{n}.txt", "content": "0\n"}]]
            + [
                edit(f"p{n}.txt", f"{i}\n", f"{i + 1}\n")
                if i % 2
                else shell(f"echo {i + 1} > p{n}.txt")
                for i in range(rounds)
            ],
        )
        for n in (1, 2)
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0 and out.count("[checkpoint:") == rounds + 1, err
    cp = Checkpoint(work, toolbox(work).config["ignore"], "next")
    history = cp.history()
    assert len(history) == 2 * (rounds + 1) and len({c["id"] for c in history}) == len(history)
    assert (work / "p1.txt").read_text() == f"{rounds}\n" == (work / "p2.txt").read_text()
    cp.undo(len(history), refuse)
    assert user_state(work) == before


def test_the_user_committing_meanwhile_moves_nothing_of_the_agents(work):
    rounds = 15
    agent = amas_process(
        work, [edit("a.txt", f"{i}" if i else "a", f"{i + 1}") for i in range(rounds)]
    )
    script = (
        "for i in $(seq 20); do echo $i >> u.txt; git add u.txt; git commit -qm u$i -- u.txt; done"
    )
    user = subprocess.run(
        ["sh", "-c", script], cwd=work, capture_output=True, text=True, env=amas_env()
    )
    out, err = agent.communicate(timeout=120)
    assert user.returncode == 0, user.stderr
    assert agent.returncode == 0 and out.count("[checkpoint:") == rounds, err
    # only the user's file
    assert set(git(work, "log", "--format=", "--name-only", "-20").split()) == {"u.txt"}
    head = git(work, "rev-parse", "HEAD")
    cp = Checkpoint(work, toolbox(work).config["ignore"], "next")
    assert len(cp.history()) == rounds
    cp.undo(rounds, refuse)
    assert (work / "a.txt").read_text() == "a\n" and git(work, "rev-parse", "HEAD") == head
    assert git(work, "status", "--porcelain") == "?? notes.txt\n"


def test_a_second_amas_waits_and_says_so(work):
    holder = amas_process(work, [edit("a.txt", "a", "agent")], "after")
    for line in holder.stderr:
        if "paused at after" in line:
            break
    waiting = amas_process(work, [edit("b.txt", "b", "second")])
    for line in waiting.stderr:
        if "waiting for another amas" in line:
            break
    else:
        pytest.fail("the second amas did not say it waits")
    assert (work / "b.txt").read_text() == "b\n"  # it waits; nothing done yet
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    out, _ = waiting.communicate(timeout=60)
    assert "[checkpoint:" in out and (work / "b.txt").read_text() == "second\n"
    assert len(Checkpoint(work, toolbox(work).config["ignore"], "next").history()) == 2
