"""No failure of the checkpoint machinery stops an approved command or edit: a read-only
~/.amas/checkpoints (a real read-only mount), a full disk (a small tmpfs), a file where its folder
should be, a lock that cannot be made, and a shadow an ordinary user cannot read. Each change is
made, and says plainly that /undo cannot take it back; /checkpoint and /undo say what is wrong."""

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import amas_env, git

from amas_code import home as amas_home

DRIVER = """
import json, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from conftest import toolbox
from amas_code import repl
box = toolbox(Path(sys.argv[2]), checkpoint=True, auto_accept=True)
calls = [("shell_command", {"command": "head -c 300000 /dev/urandom > made.bin; echo ran"}),
         ("write_file", {"path": "w.txt", "content": "written\\n"})]
print(json.dumps([box.execute(name, json.dumps(args)) for name, args in calls]), flush=True)
for line in sys.argv[3:]:
    repl.command(box, line)
"""
FAILED = "checkpoint failed: /undo cannot take this change back ("


def amas(root: Path, home: Path, *lines: str, wrap: list[str] = (), user: list[str] = ()):
    """A command and an edit by an amas (run through wrap, a shell line's prefix, as user), then
    the REPL commands named; what the model read of each, and the screen."""
    script = [sys.executable, "-c", DRIVER, str(Path(__file__).parent), str(root), *lines]
    argv = [*user, *script]
    if wrap:
        argv = ["unshare", "-m", "sh", "-c", f"{' && '.join(wrap)} && exec {shlex.join(argv)}"]
    env = amas_env(HOME=str(home), GIT_CONFIG_GLOBAL=os.devnull)
    done = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1]), " ".join(done.stderr.split())


def made_anyway(root: Path, said: list[str], reason: str) -> None:
    """The command ran and the edit was written; each result says why /undo cannot take it back."""
    assert said[0].startswith("$ head -c") and "\nran\n" in said[0] and "[exit code 0]" in said[0]
    assert (root / "made.bin").stat().st_size == 300000
    assert said[1].startswith("Write w.txt: 1 line [")
    assert (root / "w.txt").read_text() == "written\n"
    for result in said:
        assert FAILED in result and reason in result, result


def shadow(project: Path, home: Path) -> Path:
    """The project's shadow repository in that home."""
    return home / ".amas" / "checkpoints" / amas_home.project_id(project, history=False)


def test_a_read_only_checkpoints_folder_costs_the_checkpoint_not_the_command(project, home):
    """The size check before a command took the lock outside the checkpoint's own error handling:
    the result was "Error: OSError: [Errno 30] Read-only file system" and the command never ran."""
    said, _ = amas(project, home, "/checkpoint")  # an earlier checkpoint, made as usual
    assert "[checkpoint: 1 file" in said[0]
    (project / "made.bin").unlink()
    (project / "w.txt").unlink()
    folder = shlex.quote(str(home / ".amas" / "checkpoints"))
    read_only = [f"mount --bind {folder} {folder}", f"mount -o remount,bind,ro {folder}"]
    said, screen = amas(project, home, "/checkpoint", "/diff", wrap=read_only)
    made_anyway(project, said, "Read-only file system")
    assert "[amas] shell: head -c 300000" in screen  # the earlier ones are still listed


def test_an_undo_the_shadow_cannot_take_says_so_plainly(agent, capsys):
    """/undo on a read-only shadow printed Python's "[Errno 30] Read-only file system: '…'"."""
    import errno

    from amas_code import repl

    def read_only():
        raise OSError(
            errno.EROFS, "Read-only file system", "/home/me/.amas/checkpoints/x/amas.lock"
        )

    repl._checkpoints(agent, "undone", read_only)
    err = capsys.readouterr().err
    assert "✗ the checkpoints cannot be used (Read-only file system: /home/me/.amas/" in err
    assert "nothing changed" in err and "Errno" not in err


def test_a_full_disk_costs_the_checkpoint_not_the_command(project, home):
    folder = shlex.quote(str(home / ".amas" / "checkpoints"))
    full = [
        f"mkdir -p {folder}",
        f"mount -t tmpfs -o size=256k tmpfs {folder}",
        f"(head -c 300k /dev/zero > {folder}/filler 2>/dev/null || true)",
    ]
    said, screen = amas(project, home, "/checkpoint", wrap=full)
    made_anyway(project, said, "No space left on device")
    assert "no checkpoints yet" in screen


@pytest.mark.parametrize("where", ["folder", "lock"])
def test_a_file_where_the_shadow_or_its_lock_should_be_costs_only_the_checkpoint(
    project, home, where
):
    """~/.amas/checkpoints a file, and amas.lock a folder (neither can be opened as they should)."""
    if where == "folder":
        (home / ".amas").mkdir()
        (home / ".amas" / "checkpoints").write_text("not a folder\n")
    else:
        (shadow(project, home) / "amas.lock").mkdir(parents=True)
    said, screen = amas(project, home, "/undo")
    reason = "Not a directory" if where == "folder" else "Is a directory"
    made_anyway(project, said, reason)
    assert "nothing to undo" in screen or "cannot be read" in screen


def test_a_shadow_the_user_cannot_read_is_said_by_checkpoint_and_undo():
    """As an ordinary user (root reads anything): the shadow a root amas made, unreadable. The
    listing said "PermissionError: [Errno 13]…", a Python error, not what was wrong."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to become an ordinary user")
    base = Path(tempfile.mkdtemp(prefix="amas-unread-"))  # tmp_path's parents are private
    root, home = base / "proj", base / "home"
    try:
        for folder in (root, home):
            folder.mkdir()
        (root / "README.md").write_text("# demo\n")
        git(root, "init", "-q", "-b", "main")
        git(root, "add", ".")
        git(root, "-c", "user.name=u", "-c", "user.email=u@u", "commit", "-qm", "one")
        amas(root, home)  # root's amas: its checkpoints, root's own
        (root / "made.bin").unlink()
        (root / "w.txt").unlink()
        subprocess.run(["chown", "-R", "65534:65534", str(base)], check=True)
        subprocess.run(["chmod", "755", str(base)], check=True)
        unread = shadow(root, home)
        subprocess.run(["chown", "-R", "0:0", str(unread)], check=True)
        os.chmod(unread, 0o700)
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        said, screen = amas(root, home, "/checkpoint", "/undo", user=nobody)
        made_anyway(root, said, "Permission denied")
        cannot = f"the checkpoints in {unread} cannot be read; nothing changed (Permission denied)"
        assert screen.count(cannot) == 2 and "Error:" not in screen, screen
    finally:
        shutil.rmtree(base, ignore_errors=True)
