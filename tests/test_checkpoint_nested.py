"""A command that removes files of a submodule: what its repository tracks is named as beyond
/undo, what it does not track is kept when small (so /undo brings it back) or named as lost; and
a submodule whose .git a command removed never has its files deleted by /undo."""

import json

import pytest
from conftest import git, toolbox
from test_checkpoint import commit, files, refuse

from amas_code import repl, ui


@pytest.fixture
def with_sub(project):
    """main.c, and a submodule sub (s.c tracked there) holding the user's untracked work: a small
    wip.txt and a 2 MiB data.bin."""
    src = project.parent / "subsrc"
    files(src, {"s.c": "int s;\n"})
    git(src, "init", "-q")
    commit(src, "s")
    files(project, {"main.c": "int main;\n"})
    git(project, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(src), "sub")
    commit(project, "main and sub")
    files(project, {"sub/wip.txt": "the user's only copy\n", "sub/data.bin": b"d" * (2 << 20)})
    return project


def said(capsys) -> str:
    return " ".join(capsys.readouterr().err.split())


def index(project) -> bytes:
    return (project / ".git" / "modules" / "sub" / "index").read_bytes()


def test_rm_rf_of_a_submodule_in_the_box_names_what_undo_cannot_bring_back(
    with_sub, agent, capsys, monkeypatch
):
    """The box keeps sub/.git, so `rm -rf sub` fails on it after removing every file: the note
    said "[checkpoint: 1 file; /undo takes it back]" and /undo "undone: main.c", and the user's
    sub/wip.txt was gone unnamed."""
    before = index(with_sub)
    command = "rm -rf sub; echo more >> main.c"
    result = agent.execute("shell_command", json.dumps({"command": command}))
    assert not (with_sub / "sub" / "wip.txt").exists() and (with_sub / "sub" / ".git").exists()
    note = " ".join(result.split("\n[exit code 0]\n")[-1].split())
    assert note.startswith("[checkpoint: 2 files; /undo takes it back; ")
    assert "it removed sub/data.bin, which /undo cannot bring back" in note  # over 1 MiB: lost
    assert "it removed sub/s.c, tracked by a repository of its own (a submodule): /undo" in note
    assert "wip.txt" not in note  # kept: /undo brings it back
    said(capsys)
    monkeypatch.setattr(ui, "ask", lambda question, *a: "y")
    repl.command(agent, "/undo")
    shown = said(capsys)
    assert "undone: main.c, sub/wip.txt" in shown
    assert "it removed sub/data.bin" in shown and "it removed sub/s.c, tracked by" in shown
    assert (with_sub / "sub" / "wip.txt").read_text() == "the user's only copy\n"
    assert (with_sub / "main.c").read_text() == "int main;\n"
    assert index(with_sub) == before  # amas read the submodule's index, never wrote it
    repl.command(agent, "/redo")
    assert "redone: main.c, sub/wip.txt" in said(capsys)
    assert not (with_sub / "sub" / "wip.txt").exists()


def test_a_submodule_removed_whole_is_named_and_its_small_untracked_files_come_back(with_sub):
    box = toolbox(with_sub, checkpoint=True, auto_accept=True, sandbox="off")
    result = box.execute("shell_command", json.dumps({"command": "rm -rf sub"}))
    assert not (with_sub / "sub").exists()
    note = " ".join(result.split())
    assert "[checkpoint: 1 file; /undo takes it back; it removed sub, sub/data.bin, which" in note
    assert box.checkpoint.undo(1, refuse) == ["sub/wip.txt"]
    assert (with_sub / "sub" / "wip.txt").read_text() == "the user's only copy\n"


def test_undo_never_deletes_the_files_of_a_submodule_whose_git_a_command_removed(with_sub):
    """Once sub/.git was gone its files looked new, made by the command: /undo deleted them all,
    the user's untracked wip.txt included, and asked nothing."""
    box = toolbox(with_sub, checkpoint=True, auto_accept=True, sandbox="off")
    command = "rm -rf sub/.git; echo more >> main.c"
    result = box.execute("shell_command", json.dumps({"command": command}))
    note = " ".join(result.split())
    assert "[checkpoint: 1 file; /undo takes it back; it removed sub/.git, which /undo" in note
    assert box.checkpoint.undo(1, refuse) == ["main.c"]
    assert (with_sub / "sub" / "wip.txt").read_text() == "the user's only copy\n"
    assert (with_sub / "sub" / "s.c").read_text() == "int s;\n"
