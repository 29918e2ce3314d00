"""Input at the edges: odd names, huge and sparse files, slow regexes; each answered, none a crash."""

import json
import os

import pytest
from conftest import toolbox


@pytest.fixture
def run(project):
    box = toolbox(project, checkpoint=True, auto_accept=True, shell_timeout=10)
    return lambda name, **args: box.execute(name, json.dumps(args))


def test_a_command_naming_a_file_called_like_a_glob_runs_and_is_checkpointed(run, project):
    (project / "x*").write_text("starred\n")
    out = run("shell_command", command="cat 'x*' > copy.txt")
    assert "[exit code 0]" in out and "checkpoint: 1 file" in out
    assert (project / "copy.txt").read_text() == "starred\n"


def test_a_command_naming_a_symlink_loop_runs_and_is_checkpointed(run, project):
    os.symlink("loop2", project / "loop")
    os.symlink("loop", project / "loop2")
    out = run("shell_command", command="cat loop; echo done > done.txt")
    assert "Too many levels of symbolic links" in out and "checkpoint: 1 file" in out
    assert (project / "done.txt").read_text() == "done\n"
