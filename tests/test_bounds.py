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


def test_read_file_of_a_huge_file_holds_only_what_it_shows(run, project):
    import tracemalloc

    with open(project / "huge.log", "wb") as f:
        f.write(b"first\r\nsecond\nthird\n")
        f.writelines(b"y" * (1 << 20) for _ in range(64))  # then one line of 64 MiB
    tracemalloc.start()
    try:
        out = run("read_file", path="huge.log", limit=2)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out == (
        "     1\tfirst\n     2\tsecond\n"
        "[more lines follow: lines 1-2 of 4 shown; read_file offset=2 reads on]"
    )
    assert peak < 8 << 20
    last = run("read_file", path="huge.log", offset=3)
    assert last.startswith("     4\tyyy") and "[line cut at 50,000 characters]" in last
