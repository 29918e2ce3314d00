"""What a checkpoint stores after a command is bounded by checkpoint_max_mb too: new files past it
are recorded as made (/undo deletes them, asked) but never copied into ~/.amas, and said; and the
checkpoint a change made reaches scripts from its recording, not from reading the history again."""

import json
import os

from conftest import run_amas, toolbox

from amas_code import project as amas_project
from amas_code import repl, ui

DATA = "for n in 1 2 3; do head -c 3145728 /dev/urandom > data$n.bin; done; echo code > small.txt"


def said(capsys) -> str:
    return " ".join(capsys.readouterr().err.split())


def test_new_files_past_the_limit_are_not_copied_and_undo_deletes_them_asked(
    project, capsys, monkeypatch
):
    """A command wrote 3 × 120 MB of random data and its checkpoint copied all of it into ~/.amas
    unasked (the limit was only looked at before the command). Here: 3 × 3 MB past 5 MB."""
    box = toolbox(project, checkpoint=True, auto_accept=True, checkpoint_max_mb=5)
    box.execute("shell_command", json.dumps({"command": "echo warm >> README.md"}))
    shadow = box.checkpoint.size()
    result = " ".join(box.execute("shell_command", json.dumps({"command": DATA})).split())
    assert result.endswith(
        "[checkpoint: 4 files; /undo takes it back; data2.bin, data3.bin not copied (past "
        "checkpoint_max_mb): /undo deletes them, asked; /redo cannot bring them back]"
    )
    grown = box.checkpoint.size() - shadow
    assert 3 << 20 < grown < 4 << 20  # data1.bin, which fits, and small.txt: nothing more
    # the next command is neither asked about them (no terminal: it would have had no checkpoint)
    # nor copies them
    later = box.execute("shell_command", json.dumps({"command": "echo more >> README.md"}))
    assert later.endswith("[checkpoint: 1 file; /undo takes it back]")
    assert box.checkpoint.size() - shadow < 4 << 20
    box.checkpoint.undo(1, lambda q: False)
    said(capsys)
    asked = []
    monkeypatch.setattr(ui, "ask", lambda question, *a: asked.append(question) or "y")
    repl.command(box, "/undo")
    assert "undone: data1.bin, data2.bin, data3.bin, small.txt" in said(capsys)
    assert asked == [
        "data2.bin, data3.bin: made by a command and not copied (past checkpoint_max_mb), so "
        "/redo cannot bring them back. Delete them?"
    ]
    assert not list(project.glob("data*")) and not (project / "small.txt").exists()
    repl.command(box, "/redo")
    shown = said(capsys)
    assert "/redo cannot bring back data2.bin, data3.bin: not copied" in shown
    assert "redone: data1.bin, small.txt" in shown and (project / "data1.bin").exists()


def test_undo_declined_for_uncopied_files_leaves_them_and_says_so(project, capsys):
    box = toolbox(project, checkpoint=True, auto_accept=True, checkpoint_max_mb=5)
    box.execute("shell_command", json.dumps({"command": DATA}))
    assert box.checkpoint.undo(1, lambda q: False) == ["data1.bin", "small.txt"]
    assert "left in place: data2.bin, data3.bin: made by a command and not copied" in said(capsys)
    assert sorted(p.name for p in project.glob("data*")) == ["data2.bin", "data3.bin"]


def test_a_change_reports_its_checkpoint_without_reading_the_history_again(
    project, llm, monkeypatch
):
    """Act asked latest() before and after each change, and history(limit=1) after: one more git
    log per change; and the scripting event's files were the checkpoint's blob ids by path, not the
    list of paths docs/scripting.md promises."""
    box = toolbox(project, checkpoint=True, auto_accept=True)
    box.execute("write_file", json.dumps({"path": "warm.txt", "content": "w\n"}))
    ran = []
    real = amas_project.git
    with monkeypatch.context() as patched:
        patched.setattr(
            amas_project, "git", lambda cwd, *a, **k: ran.append(a) or real(cwd, *a, **k)
        )
        box.execute("write_file", json.dumps({"path": "app.py", "content": "x = 1\n"}))
    assert not [args for args in ran if "log" in args]  # an edit runs no git at all
    llm.reply(tool="edit_file", path="app.py", old_str="x = 1", new_str="x = 2").reply(text="ok")
    done = run_amas("--output-format", "stream-json", "-y", "set x to 2", llm=llm)
    events = [json.loads(line) for line in done.stdout.splitlines()]
    (event,) = [e for e in events if e["type"] == "checkpoint"]
    newest = box.checkpoint.history(limit=1)[0]
    assert event == {"type": "checkpoint", "id": newest["id"], "files": ["app.py"]}
    assert os.path.exists(project / "app.py") and newest["label"] == "[amas] edit app.py"
