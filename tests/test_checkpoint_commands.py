"""The checkpoint commands as the user types them (/undo, /redo, /checkpoint, /diff), and
checkpoints across amas processes: what each says, and that a refused command changes nothing."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from conftest import toolbox
from test_checkpoint import refuse, user_state

from amas_code import repl, ui
from amas_code.checkpoint import Checkpoint


def edit(box, path: str, old: str, new: str) -> str:
    return box.execute("edit_file", json.dumps({"path": path, "old_str": old, "new_str": new}))


def said(capsys) -> str:
    return " ".join(capsys.readouterr().err.split())


def test_undo_arguments_are_checked_and_a_refusal_changes_nothing(agent, project, capsys):
    repl.command(agent, "/undo")
    assert "nothing to undo" in said(capsys)
    assert "[checkpoint: 1 file; /undo takes it back]" in edit(agent, "README.md", "demo", "agent")
    before = user_state(project)
    for arg, message in [
        ("abc", "not 'abc'; nothing changed"),
        ("0", "not '0'; nothing changed"),
        ("-1", "not '-1'; nothing changed"),
        ("2 3", "not '2 3'; nothing changed"),
        ("999", "only 1 turn to undo; nothing changed"),
    ]:
        repl.command(agent, f"/undo {arg}")
        shown = said(capsys)
        # what is not taken back is not announced
        assert message in shown and "taking back" not in shown
        assert user_state(project) == before
    repl.command(agent, "/redo")
    assert "nothing to redo" in said(capsys)
    repl.command(agent, "/undo")
    assert "undone: README.md" in said(capsys) and (project / "README.md").read_text() == "# demo\n"
    repl.command(agent, "/undo")
    assert "nothing to undo" in said(capsys)
    repl.command(agent, "/redo")
    assert "redone: README.md" in said(capsys) and user_state(project) == before
    repl.command(agent, "/redo")
    assert "nothing to redo" in said(capsys)


def test_checkpoint_lists_and_restores(agent, project, capsys):
    repl.command(agent, "/checkpoint")
    assert "no checkpoints yet" in said(capsys)
    agent.checkpoint.request = "make it shout"
    for word in ["one", "two", "three"]:
        agent.execute("shell_command", json.dumps({"command": f"echo {word} >> README.md"}))
    listed = agent.checkpoint.history()
    assert [cp["label"] for cp in listed] == [
        f"[amas] shell: echo {w} >> README.md" for w in ["three", "two", "one"]
    ]
    assert listed[0]["request"] == "make it shout" and list(listed[0]["files"]) == ["README.md"]
    assert listed[0]["session"] == agent.session and abs(listed[0]["time"] - time.time()) < 60
    repl.command(agent, "/checkpoint")
    shown = said(capsys)
    assert (
        all(cp["id"][:8] in shown for cp in listed)
        and "[amas] shell: echo two >> README.md" in shown
    )
    for arg, message in [
        ("zzzz", "zzzz is not one of the checkpoints"),
        (listed[0]["id"][:8], "already the latest"),
    ]:
        repl.command(agent, f"/checkpoint {arg}")
        assert message in said(capsys)
    assert (project / "README.md").read_text() == "# demo\none\ntwo\nthree\n"
    repl.command(agent, f"/checkpoint {listed[2]['id'][:10]}")
    assert "restored: README.md" in said(capsys)
    assert (project / "README.md").read_text() == "# demo\none\n"


def test_diff_shows_what_the_agent_changed_this_session(agent, project, capsys):
    repl.command(agent, "/diff")
    assert "the agent changed nothing in this session" in said(capsys)
    # another session's change is not shown
    other = toolbox(project, checkpoint=True, auto_accept=True)
    other.execute("create_file", json.dumps({"path": "theirs.txt", "content": "other session\n"}))
    edit(agent, "README.md", "demo", "first")
    edit(agent, "README.md", "first", "second")
    agent.execute("create_file", json.dumps({"path": "new.txt", "content": "brand new\n"}))
    said(capsys)  # the tools' own diffs
    repl.command(agent, "/diff")
    shown = said(capsys)
    assert "# demo" in shown and "# second" in shown and "brand new" in shown
    assert "first" not in shown and "other session" not in shown


def test_undo_redo_and_restore_across_restarts(project):
    box = toolbox(project, checkpoint=True, auto_accept=True)
    states = [user_state(project)]
    for word in ["one", "two", "three", "four"]:
        edit(box, "README.md", "demo", f"demo {word}")
        states.append(user_state(project))

    def fresh():  # every step by a new amas process
        return Checkpoint(project, box.config["ignore"], "later")

    assert fresh().undo(2, refuse) == ["README.md"] and user_state(project) == states[2]
    fresh().redo(refuse)
    assert user_state(project) == states[3]
    fresh().undo(1, refuse)
    assert user_state(project) == states[2]
    first = fresh().history()[-1]["id"]
    fresh().restore(first[:7], refuse)
    assert user_state(project) == states[1]
    fresh().redo(refuse)
    fresh().redo(refuse)
    assert user_state(project) == states[3]
    # a new change: what was undone can no longer be redone
    edit(box, "README.md", "demo", "demo five")
    assert len(fresh().history()) == 4
    fresh().undo(4, refuse)
    assert user_state(project) == states[0]


def test_undo_asks_before_taking_back_what_another_running_amas_made(
    agent, project, capsys, monkeypatch
):
    edit(agent, "README.md", "demo", "mine")
    other = (  # a second amas window in the same project: it makes a change and keeps running
        "import json, sys, time; sys.path.insert(0, sys.argv[2]); from pathlib import Path\n"
        "from conftest import toolbox\n"
        "box = toolbox(Path(sys.argv[1]), checkpoint=True, auto_accept=True)\n"
        "print(box.execute('create_file', "
        "json.dumps({'path': 'theirs.txt', 'content': 'theirs'})), flush=True)\n"
        "time.sleep(30)"
    )
    window = subprocess.Popen(
        [sys.executable, "-c", other, str(project), str(Path(__file__).parent)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert "[checkpoint:" in window.stdout.readline()
        asked = []
        monkeypatch.setattr(ui, "ask", lambda question, *a: asked.append(question) or "n")
        repl.command(agent, "/undo")
        assert (
            "another amas still running in this project made [amas] create theirs.txt" in asked[0]
        )
        assert "cancelled; nothing changed" in said(capsys)
        assert (project / "theirs.txt").read_text() == "theirs" and "mine" in (
            project / "README.md"
        ).read_text()
    finally:
        window.kill()
        window.wait()
    asked.clear()  # once it has ended, its change is one made before this session: asked about
    monkeypatch.setattr(ui, "ask", lambda question, *a: asked.append(question) or "y")
    repl.command(agent, "/undo")
    assert len(asked) == 1 and "made before this session" in asked[0]
    assert not (project / "theirs.txt").exists() and "undone: theirs.txt" in said(capsys)


def test_diff_names_mode_changes_and_binary_files(agent, project, capsys):
    (project / "run.sh").write_text("echo hi\n")
    (project / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")
    for command in ["chmod +x run.sh", "printf 'a\\0b' >> logo.png"]:
        assert "[checkpoint:" in agent.execute("shell_command", json.dumps({"command": command}))
    said(capsys)
    repl.command(agent, "/diff")
    shown = said(capsys)
    assert "run.sh: mode 100644 → 100755" in shown and "no changes" not in shown
    assert (
        "logo.png: binary file, 16 → 19 bytes" in shown
        and "PNG" not in shown
        and "IHDR" not in shown
    )


def test_a_command_with_blank_lines_and_separators_is_listed_and_undone(agent, project, capsys):
    command = "cat > f.py <<'EOF'\nimport os\n\n\nprint(1)\x1e\x1f\nEOF"
    assert "[checkpoint: 1 file" in agent.execute("shell_command", json.dumps({"command": command}))
    said(capsys)
    repl.command(agent, "/checkpoint")
    assert "[amas] shell: cat > f.py <<'EOF'\\nimport os\\n\\n\\nprint(1)\\x1e\\x1f\\nEOF" in said(
        capsys
    )
    repl.command(agent, "/undo")
    assert "undone: f.py" in said(capsys) and not (project / "f.py").exists()


def test_checkpoint_goes_back_past_the_latest_two_hundred(agent, project, capsys):
    for n in range(205):
        agent.execute("write_file", json.dumps({"path": "count.txt", "content": f"{n + 1}\n"}))
    first = agent.checkpoint.history(limit=1000)[-1]["id"]
    said(capsys)
    repl.command(agent, f"/checkpoint {first[:10]}")
    assert "restored: count.txt" in said(capsys) and (project / "count.txt").read_text() == "1\n"


def test_undo_shows_and_asks_before_taking_back_a_change_made_before_this_session(
    agent, project, capsys, monkeypatch
):
    earlier = toolbox(project, checkpoint=True, auto_accept=True)  # a one-shot run before this one
    earlier.execute("create_file", json.dumps({"path": "old.txt", "content": "old content\n"}))
    edit(agent, "README.md", "demo", "mine")
    said(capsys)
    repl.command(agent, "/diff")
    shown = said(capsys)
    assert (
        "old content" not in shown and "not shown: 1 checkpoint from before this session" in shown
    )
    answers, asked = iter("ny"), []
    monkeypatch.setattr(ui, "ask", lambda question, *a: asked.append(question) or next(answers))
    repl.command(agent, "/undo 2")
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(earlier.checkpoint.history()[1]["time"]))
    assert asked == [
        "made before this session, by a one-shot run or another terminal (not in /diff): "
        f"[amas] create old.txt ({when}: old.txt). Take it back?"
    ]
    assert "cancelled; nothing changed" in said(capsys) and (project / "old.txt").exists()
    repl.command(agent, "/undo 2")
    assert not (project / "old.txt").exists() and (project / "README.md").read_text() == "# demo\n"


def test_checkpoint_after_undoing_everything_says_what_redo_brings_back(agent, project, capsys):
    edit(agent, "README.md", "demo", "mine")
    repl.command(agent, "/undo")
    said(capsys)
    repl.command(agent, "/checkpoint")
    shown = said(capsys)
    assert shown.startswith(
        "ℹ no checkpoints: every one was undone "
        "ℹ /redo brings back [amas] edit README.md (README.md) ℹ checkpoints take "
    ) and shown.endswith(" MB in ~/.amas")
    repl.command(agent, "/redo")
    repl.command(agent, "/checkpoint")
    assert "/redo" not in said(capsys)


def test_one_undo_takes_back_one_turn_and_skips_what_changes_nothing(agent, project, llm, capsys):
    """Edit, then run the tests, in one turn: the test run left only a cache folder /undo leaves
    anyway (no checkpoint); one /undo takes back the edit, /undo 2 two turns, /checkpoint lists
    single ones."""
    # as pytest makes its cache: folders, and files its own .gitignore hides
    tests = "mkdir -p .pytest_cache/v/cache && echo '*' > .pytest_cache/.gitignore"
    tests += " && echo tag > .pytest_cache/CACHEDIR.TAG"
    llm.reply(tool="write_file", path="a.txt", content="first\n").reply(text="Made a.")
    llm.reply(tool="edit_file", path="README.md", old_str="demo", new_str="shouting")
    llm.reply(tool="shell_command", command=tests).reply(text="Edited; tests pass.")
    agent.turn("make a")
    agent.turn("edit, then run the tests")
    assert (project / "README.md").read_text() == "# shouting\n"
    capsys.readouterr()
    repl.command(agent, "/checkpoint")
    listed = said(capsys)  # single checkpoints; the test run changed nothing /undo takes back
    assert "edit README.md" in listed and "write a.txt" in listed and "mkdir" not in listed
    repl.command(agent, "/undo")
    shown = said(capsys)
    assert (project / "README.md").read_text() == "# demo\n" and (project / "a.txt").exists()
    assert "taking back: [amas] edit README.md" in shown and "mkdir" not in shown
    repl.command(agent, "/redo")  # the whole turn again
    assert (project / "README.md").read_text() == "# shouting\n"
    capsys.readouterr()
    repl.command(agent, "/redo")
    assert "nothing to redo" in said(capsys)
    repl.command(agent, "/undo 2")
    assert (project / "README.md").read_text() == "# demo\n" and not (project / "a.txt").exists()


def test_undo_names_the_ignored_file_it_leaves(agent, project, llm, capsys):
    (project / ".gitignore").write_text(".env\n")
    subprocess.run(["git", "add", "."], cwd=project, check=True)
    subprocess.run(["git", "commit", "-qm", "ignore .env"], cwd=project, check=True)
    command = "echo KEY=x > .env && echo KEY= > .env.example"
    llm.reply(tool="shell_command", command=command).reply(text="Set up.")
    agent.turn("set up the env")
    capsys.readouterr()
    repl.command(agent, "/undo")
    shown = said(capsys)
    assert "undone: .env.example" in shown and not (project / ".env.example").exists()
    assert "left in place: .env: made by a command, but git ignores it" in shown
    assert (project / ".env").exists()


def test_a_second_amas_waiting_for_the_checkpoint_lock_says_so(project, llm):
    import fcntl
    import threading

    from conftest import run_amas

    from amas_code import home

    lock = home.private_dir(Checkpoint(project, []).dir) / "amas.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another amas is running a command
    threading.Thread(target=release_once_waited_for, args=[fd], daemon=True).start()
    llm.reply(tool="write_file", path="w.txt", content="x\n").reply(text="Written.")
    result = run_amas("-y", "write it", llm=llm)
    assert result.returncode == 0 and (project / "w.txt").exists()
    assert "waiting for another amas working in this project" in result.stderr


def release_once_waited_for(fd: int) -> None:
    """The lock on fd released once a process waits for it (the kernel lists a waiter in /proc/locks
    with "->", by the file's inode), or after 30 s."""
    waiter = re.compile(rf"->.*:{os.fstat(fd).st_ino} ")
    for _ in range(300):
        if waiter.search(Path("/proc/locks").read_text()):
            break
        time.sleep(0.1)
    os.close(fd)


def test_a_cache_a_command_makes_is_one_short_note_and_no_checkpoint(agent, project, llm):
    """pytest's first run makes .pytest_cache/ (its own .gitignore hides the files): /undo would
    change nothing, so there is no checkpoint to count, and the note names the folder, not each
    file of the cache."""
    tests = "mkdir -p .pytest_cache/v/cache && echo '*' > .pytest_cache/.gitignore"
    tests += " && echo tag > .pytest_cache/CACHEDIR.TAG && echo [] > .pytest_cache/v/cache/nodeids"
    llm.reply(tool="shell_command", command=tests).reply(text="Tests pass.")
    agent.turn("run the tests")
    result = llm.requests[1]["messages"][-1]["content"]
    assert result.endswith("[exit code 0]\n[/undo leaves .pytest_cache/ (git ignores it)]"), result
    assert agent.checkpoint.history(limit=10) == []
