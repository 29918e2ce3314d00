"""Checkpoints in real temporary git repositories: the user's work is never lost."""

import json
import subprocess

import pytest
from conftest import git

from amas_code import tools
from amas_code.checkpoint import Checkpoint, CheckpointError
from amas_code.config import DEFAULT_CONFIG


def setup_tools(root, **config):
    cp = Checkpoint(root)
    tools.setup(root, {**DEFAULT_CONFIG, "auto_accept": True, **config}, cp)
    return cp


def edit(path, old, new):
    return tools.execute("edit_file", json.dumps({"path": path, "old_str": old, "new_str": new}))


def test_edit_then_undo_restores_exact_bytes(project):
    (project / "data.bin.txt").write_bytes(b"keep\r\nme\x00?\n")
    git(project, "add", ".")
    git(project, "commit", "-qm", "add data")
    cp = setup_tools(project)
    assert "checkpoint" in edit("data.bin.txt", "me", "you")
    assert git(project, "log", "-1", "--format=%s") == "[amas] edit data.bin.txt\n"
    assert cp.undo(1) == ["data.bin.txt"]
    assert (project / "data.bin.txt").read_bytes() == b"keep\r\nme\x00?\n"
    assert git(project, "log", "-1", "--format=%s") == "add data\n"
    assert git(project, "status", "--porcelain") == ""


def test_unrelated_and_staged_work_survive_undo(project):
    (project / "app.py").write_text("a = 1\n")
    git(project, "add", "app.py")
    git(project, "commit", "-qm", "app")
    (project / "notes.txt").write_text("untracked notes\n")
    (project / "README.md").write_text("# demo\nuser edit, unstaged\n")
    (project / "staged.py").write_text("staged = True\n")
    git(project, "add", "staged.py")
    cp = setup_tools(project)
    edit("app.py", "a = 1", "a = 2")
    assert git(project, "show", "--stat", "--format=", "HEAD").split()[0] == "app.py"  # only the agent's file
    cp.undo()
    assert (project / "app.py").read_text() == "a = 1\n"
    assert (project / "notes.txt").read_text() == "untracked notes\n"
    assert (project / "README.md").read_text() == "# demo\nuser edit, unstaged\n"
    assert (project / "staged.py").read_text() == "staged = True\n"
    assert git(project, "diff", "--cached", "--name-only") == "staged.py\n"  # still staged
    assert git(project, "status", "--porcelain").splitlines() == [" M README.md", "A  staged.py", "?? notes.txt"]


def test_undo_refuses_when_head_is_a_user_commit(project):
    cp = setup_tools(project)
    (project / "a.txt").write_text("1\n")
    edit("README.md", "# demo", "# agent")
    (project / "a.txt").write_text("user\n")
    git(project, "add", "a.txt")
    git(project, "commit", "-qm", "user work")
    before = git(project, "log", "--format=%H")
    with pytest.raises(CheckpointError, match="'user work' is not an amas checkpoint; nothing changed"):
        cp.undo()
    assert git(project, "log", "--format=%H") == before
    assert (project / "README.md").read_text() == "# agent\n"


def test_user_edits_before_agent_edit_come_back(project):
    (project / "README.md").write_text("# demo\nmy uncommitted line\n")
    cp = setup_tools(project)
    edit("README.md", "my uncommitted line", "agent line")
    subjects = git(project, "log", "--format=%s").splitlines()
    assert subjects[:2] == ["[amas] edit README.md", "[amas] save: your uncommitted changes to README.md"]
    cp.undo()
    assert (project / "README.md").read_text() == "# demo\nmy uncommitted line\n"
    assert git(project, "log", "--format=%s") == "initial\n"  # back to where the user was
    assert git(project, "status", "--porcelain") == " M README.md\n"  # uncommitted again, as before


def test_shell_command_changes_are_checkpointed_and_undone(project):
    (project / "old.txt").write_text("old\n")
    git(project, "add", "old.txt")
    git(project, "commit", "-qm", "old")
    cp = setup_tools(project)
    out = tools.execute("shell_command", json.dumps({"command": "echo made > new.txt && echo changed > old.txt"}))
    assert "[files changed; checkpoint" in out
    assert git(project, "log", "-1", "--format=%s") == "[amas] shell: echo made > new.txt && echo changed > old.txt\n"
    cp.undo()
    assert not (project / "new.txt").exists()
    assert (project / "old.txt").read_text() == "old\n"


def test_redo_after_undo_and_across_restart(project):
    cp = setup_tools(project)
    edit("README.md", "# demo", "# one")
    edit("README.md", "# one", "# two")
    cp.undo(2)
    assert (project / "README.md").read_text() == "# demo\n"
    again = Checkpoint(project)  # a new amas process
    again.redo()
    assert (project / "README.md").read_text() == "# one\n"
    again.redo()
    assert (project / "README.md").read_text() == "# two\n"
    with pytest.raises(CheckpointError, match="nothing to redo"):
        again.redo()
    assert git(project, "log", "--format=%s").splitlines()[0] == "[amas] edit README.md"


def test_undo_asks_before_discarding_later_edits(project):
    cp = setup_tools(project)
    edit("README.md", "# demo", "# agent")
    (project / "README.md").write_text("# agent\nuser typed after\n")
    with pytest.raises(CheckpointError, match="cancelled"):
        cp.undo(1, ask=lambda q: False)
    assert (project / "README.md").read_text() == "# agent\nuser typed after\n"
    questions = []
    cp.undo(1, ask=lambda q: questions.append(q) or True)
    assert questions == ["README.md changed since the checkpoint. Discard those edits?"]
    assert (project / "README.md").read_text() == "# demo\n"


def test_no_git_repo_uses_a_shadow_repository(bare):
    (bare / "f.txt").write_text("v1\n")
    cp = setup_tools(bare)
    edit("f.txt", "v1", "v2")
    tools.execute("create_file", json.dumps({"path": "g.txt", "content": "new\n"}))
    assert not (bare / ".git").exists() and (bare / ".amas/shadow.git").is_dir()
    assert [s for _, s in cp.list()] == ["create g.txt", "edit f.txt"]
    cp.undo(2)
    assert (bare / "f.txt").read_text() == "v1\n" and not (bare / "g.txt").exists()
    cp.redo()
    assert (bare / "f.txt").read_text() == "v2\n"
    assert subprocess.run(["git", "status"], cwd=bare, capture_output=True).returncode != 0  # still no repo


def test_declined_edit_makes_no_commit(project):
    setup_tools(project, auto_accept=False)
    assert edit("README.md", "# demo", "# nope") == "Edit declined by user."
    assert git(project, "log", "--format=%s") == "initial\n"


def test_checkpoints_off(project):
    tools.setup(project, {**DEFAULT_CONFIG, "auto_accept": True}, None)
    edit("README.md", "# demo", "# off")
    assert git(project, "log", "--format=%s") == "initial\n"


def test_restore_undoes_later_checkpoints(project):
    cp = setup_tools(project)
    edit("README.md", "# demo", "# one")
    edit("README.md", "# one", "# two")
    edit("README.md", "# two", "# three")
    first = cp.list()[-1][0]
    cp.restore(first)
    assert (project / "README.md").read_text() == "# one\n"


def test_ignored_files_are_not_committed(project):
    (project / ".gitignore").write_text(".env\n")
    git(project, "add", ".gitignore")
    git(project, "commit", "-qm", "ignore")
    setup_tools(project)
    tools.execute("create_file", json.dumps({"path": ".env", "content": "TOKEN=abc\n"}))
    assert (project / ".env").read_text() == "TOKEN=abc\n"
    assert git(project, "log", "-1", "--format=%s") == "ignore\n"
