"""Input at the edges: odd names, huge and sparse files, slow regexes;
each answered, none a crash."""

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


@pytest.mark.timeout(20)  # before the budget this took hours: a hang, not a slow answer
def test_edit_file_not_found_in_a_big_file_answers_at_once(run, project):
    lines = [f"line {i} " + "x" * 40 for i in range(100_000)]  # 5 MB
    (project / "big.txt").write_text("\n".join(lines) + "\n")
    old = lines[50_000:60_000]
    old[5000] = "a line the file does not hold"
    run("read_file", path="big.txt")
    out = run("edit_file", path="big.txt", old_str="\n".join(old), new_str="")
    assert out.startswith(
        "Error: old_str not found in big.txt. The closest region (lines 50001-60000)"
    )
    assert " 50300\tline 50299 " in out and "[… 9700 more lines]" in out


def test_edit_file_not_found_still_finds_a_near_miss_by_its_characters(run, project):
    (project / "m.py").write_text("def alpha():\n    return 1\n\ndef beta():\n    return 2\n")
    run("read_file", path="m.py")
    out = run("edit_file", path="m.py", old_str="def betta():\n    return 2", new_str="")
    assert "The closest region (lines 4-5)" in out


def test_edit_file_not_found_in_a_big_file_finds_lines_indented_otherwise(run, project):
    lines = [f"    value_{i} = compute({i})" for i in range(30_000)]
    (project / "long.py").write_text("\n".join(lines) + "\n")
    old = "value_20000 = compute(20000)\nvalue_20001 = compute(20001)\nvalue_20002 = oops"
    run("read_file", path="long.py")
    out = run("edit_file", path="long.py", old_str=old, new_str="")
    assert "The closest region (lines 20001-20003)" in out


# git grep finds; or every file
@pytest.mark.parametrize("pattern", ["needle here", r"needle\s+here"])
def test_search_files_searches_a_big_text_file(run, project, pattern):
    with open(project / "big.log", "w") as f:
        f.writelines(f"ordinary line {i}\n" for i in range(120_000))  # 2.4 MB
        f.write("a needle here\n")
    assert run("search_files", pattern=pattern) == "big.log:120001: a needle here"


@pytest.mark.timeout(60)  # before the limit these patterns held amas for ever
def test_a_catastrophic_regex_is_answered_or_stopped_at_the_time_limit(run, project, monkeypatch):
    from amas_code import tools

    monkeypatch.setattr(tools, "SEARCH_SECONDS", 1)
    (project / "runs.txt").write_text("-" * 40 + "x\n" + "a" * 80 + "b\n")
    assert run("search_files", pattern=r"(-+)+\d$") == "No matches for '(-+)+\\\\d$'"
    out = run("search_files", pattern=r"(a|aa)+$")
    assert out.startswith("No matches for '(a|aa)+$'\n[stopped after 1 s, not every file searched")


def test_a_busy_machine_is_not_blamed_on_the_pattern(run, project, monkeypatch):
    """The limit is CPU time: a search stopped by the wall-clock ceiling while the pattern had used
    little CPU (the machine was busy) says so, not that the pattern is too slow."""
    from amas_code import tools

    (project / "a.txt").write_text("plain\n" * 1000)
    monkeypatch.setattr(tools, "SEARCH_WALL", 0)  # as if others had taken every second of it
    out = run("search_files", pattern="ne+dle")
    assert "the machine is too busy" in out and "too slow" not in out


@pytest.mark.timeout(60)  # before, git hashed the 64 GB of zeros for minutes
def test_a_sparse_file_a_command_makes_is_named_not_hashed(project):
    box = toolbox(project, checkpoint=True, auto_accept=True, shell_timeout=10)
    command = "truncate -s 1G sparse.img && echo made > small.txt"
    out = box.execute("shell_command", json.dumps({"command": command}))
    assert "checkpoint: 1 file" in out
    assert "/undo leaves sparse.img (over 256 MB or sparse, not kept)]" in out
    assert box.checkpoint.undo() == ["small.txt"]
    assert not (project / "small.txt").exists()
    assert (project / "sparse.img").stat().st_size == 1 << 30


def test_an_ignored_file_a_command_makes_is_named_as_left_by_undo(project):
    (project / ".gitignore").write_text(".env\n")
    box = toolbox(project, checkpoint=True, auto_accept=True, shell_timeout=10)
    out = box.execute("shell_command", json.dumps({"command": "echo API_URL=x > .env"}))
    assert out.endswith("[exit code 0]\n[/undo leaves .env (git ignores it)]")
    out = box.execute("shell_command", json.dumps({"command": "echo B=1 > b.txt; rm .env"}))
    assert out.endswith("[checkpoint: 2 files; /undo takes it back]")  # it was there before: kept
    assert sorted(box.checkpoint.undo()) == [".env", "b.txt"]
    assert (project / ".env").read_text() == "API_URL=x\n" and not (project / "b.txt").exists()
