"""Each tool and its edge cases, called through the dispatcher the model uses."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from conftest import git, toolbox

from amas_code import tools


@pytest.fixture
def box(bare):
    return toolbox(bare, auto_accept=True, shell_timeout=5)


@pytest.fixture
def run(box):
    def call(name, **args):
        return box.execute(name, json.dumps(args))

    return call


def test_read_file_numbers_lines_and_pages(run, bare):
    (bare / "a.py").write_text("one\ntwo\nthree\n")
    assert run("read_file", path="a.py") == "     1\tone\n     2\ttwo\n     3\tthree"
    assert run("read_file", path="a.py", offset=1, limit=1) == (
        "     2\ttwo\n[more lines follow: lines 2-2 of 3 shown; read_file offset=2 reads on]"
    )


def test_read_file_binary_missing_and_empty(run, bare):
    (bare / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0")
    (bare / "empty.txt").write_text("")
    assert run("read_file", path="img.png") == "Binary file, cannot display"
    assert run("read_file", path="nope.py").startswith("Error: nope.py does not exist.")
    assert run("read_file", path="empty.txt") == "(empty file: empty.txt)"
    (bare / "two.txt").write_text("1\n2\n")
    assert (
        run("read_file", path="two.txt", offset=5)
        == "Error: two.txt has 2 lines; offset 5 is past its end"
    )
    assert run("create_file", path="", content="x") == (
        "Error: the path for create_file is empty; name a file or folder, e.g. README.md or ."
    )


def test_read_file_truncates_at_50kb_and_says_how_to_go_on(run, bare):
    (bare / "big.txt").write_text("".join(f"line {i} " + "x" * 90 + "\n" for i in range(2000)))
    out = run("read_file", path="big.txt")
    assert len(out) < 52_000
    assert "[truncated at 50 KB: lines 1-" in out and "read_file offset=" in out
    offset = int(out.rsplit("offset=", 1)[1].split()[0])
    assert run("read_file", path="big.txt", offset=offset).startswith(
        f"{offset + 1:6}\tline {offset} "
    )


def test_write_create_edit(run, bare):
    assert run("write_file", path="pkg/mod.py", content="x = 1\n") == "Write pkg/mod.py: 1 line"
    assert (bare / "pkg/mod.py").read_text() == "x = 1\n"
    assert run("create_file", path="pkg/mod.py", content="y").startswith(
        "Error: pkg/mod.py already exists"
    )
    assert (
        run("edit_file", path="pkg/mod.py", old_str="x = 1", new_str="x = 2")
        == "Edit pkg/mod.py: 1 line"
    )
    assert (bare / "pkg/mod.py").read_text() == "x = 2\n"


def test_edit_keeps_crlf_bytes(run, bare):
    (bare / "w.txt").write_bytes(b"a\r\nb\r\n")
    run("edit_file", path="w.txt", old_str="b", new_str="c")
    assert (bare / "w.txt").read_bytes() == b"a\r\nc\r\n"


def test_in_a_file_of_mixed_line_endings_an_edit_keeps_every_other_line_ending(run, bare):
    mixed = b"one\r\ntwo\nthree\r\nfour\n"
    (bare / "m.txt").write_bytes(mixed)
    assert run("edit_file", path="m.txt", old_str="two\nthree", new_str="2\nthree")
    assert (bare / "m.txt").read_bytes() == b"one\r\n2\nthree\r\nfour\n"
    (bare / "m.txt").write_bytes(mixed)
    run("read_file", path="m.txt")
    run("write_file", path="m.txt", content="one\ntwo\nthree\nadded\nfour\n")
    assert (bare / "m.txt").read_bytes() == b"one\r\ntwo\nthree\r\nadded\r\nfour\n"


def test_write_file_over_text_that_is_not_utf8_is_refused(run, bare):
    latin = "café = 1\n".encode("latin-1")
    (bare / "l.py").write_bytes(latin)
    assert run("write_file", path="l.py", content="café = 2\n") == (
        "Error: l.py is not UTF-8 text; write_file would re-encode it. "
        "Use shell_command (e.g. sed or iconv) instead"
    )
    assert (bare / "l.py").read_bytes() == latin


def test_edit_not_found_quotes_closest_region(run, bare):
    (bare / "m.py").write_text("def alpha():\n    return 1\n\ndef beta():\n    return 2\n")
    run("read_file", path="m.py")
    out = run("edit_file", path="m.py", old_str="def beta():\n    return 3", new_str="")
    assert out.startswith("Error: old_str not found in m.py.")
    assert "lines 4-5" in out and "     4\tdef beta():" in out and "     5\t    return 2" in out


def test_edit_ambiguous_gives_line_numbers_and_the_lines(run, bare):
    """Task bench, fourth run, rename: the 1.5B's edit_file of `get_usr` in a file holding it twice
    was told the line numbers only; it showed a guess as an example and stopped."""
    (bare / "m.py").write_text("x = 1\ny = 2\nx = 1  # again\n")
    assert run("edit_file", path="m.py", old_str="x = 1", new_str="z") == (
        "Error: old_str occurs 2 times in m.py (lines 1, 3); include more of its line or the lines "
        "around it to make it unique, or edit each place in turn:\n"
        "     1\tx = 1\n"
        "     3\tx = 1  # again"
    )
    assert (bare / "m.py").read_text() == "x = 1\ny = 2\nx = 1  # again\n"


def test_declined_edit_leaves_file_byte_identical(run, box, bare):
    box.config["auto_accept"] = False  # stdin is not a terminal under pytest: declined
    (bare / "keep.txt").write_bytes(b"orig\n")
    assert (
        run("edit_file", path="keep.txt", old_str="orig", new_str="new")
        == "Edit declined (no terminal to ask the user on)."
    )
    run("read_file", path="keep.txt")
    assert (
        run("write_file", path="keep.txt", content="x")
        == "Edit declined (no terminal to ask the user on)."
    )
    assert (bare / "keep.txt").read_bytes() == b"orig\n"


def test_shell_command_output_and_exit_code(run):
    out = run("shell_command", command="echo out; echo err >&2; exit 3")
    assert out == "$ echo out; echo err >&2; exit 3\nout\n[stderr]\nerr\n[exit code 3]"


def still_running(cmdline: list[str]) -> list:
    """Processes with this command line that outlive a short grace period
    (SIGKILL is asynchronous)."""
    found = [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == cmdline]
    return psutil.wait_procs(found, timeout=5)[1]


def test_shell_timeout_kills_background_children(run):
    start = time.monotonic()
    out = run("shell_command", command="sleep 300 & echo started; sleep 60", timeout=1)
    assert "started" in out and "[timed out after 1s" in out
    assert time.monotonic() - start < 30
    assert still_running(["sleep", "300"]) == []


def test_a_finished_command_does_not_wait_for_what_it_left_running(run):
    # the sleep holds its output open
    out = run("shell_command", command="sleep 302 & echo started", timeout=5)
    # returned when the shell did, not at 5 s (shell_timeout, the most a call may ask)
    assert out == "$ sleep 302 & echo started\nstarted\n[exit code 0]"
    assert still_running(["sleep", "302"]) == []


def test_shell_leaves_nothing_running(run):
    out = run("shell_command", command="nohup sleep 301 >/dev/null 2>&1 & echo started")
    assert "started" in out and "[exit code 0]" in out
    assert still_running(["sleep", "301"]) == []


def test_search_files_respects_ignore_and_gitignore(run, bare):
    (bare / "src").mkdir()
    (bare / "src/a.py").write_text("import os\nTODO = 1\n")
    (bare / "node_modules").mkdir()
    (bare / "node_modules/x.js").write_text("TODO\n")
    (bare / "secret.log").write_text("TODO\n")
    (bare / ".gitignore").write_text("*.log\n")
    assert run("search_files", pattern=r"TODO\b") == "src/a.py:2: TODO = 1"
    assert run("search_files", pattern=r"^TODO") == "src/a.py:2: TODO = 1"  # ^ anchors at each line
    assert run("search_files", pattern="zzz") == "No matches for 'zzz'"
    assert run("search_files", pattern="(").startswith("Error: error:")


def test_search_in_git_finds_what_python_regex_finds_in_any_language(project):
    # git grep sees bytes
    (project / "notes.py").write_text("prix = 'café'\nnaïve = True\nx = '٣'\n")
    box = toolbox(project)
    assert (
        box.execute("search_files", json.dumps({"pattern": r"caf\w'"}))
        == "notes.py:1: prix = 'café'"
    )
    assert (
        box.execute("search_files", json.dumps({"pattern": r"^na\w+ve"}))
        == "notes.py:2: naïve = True"
    )
    assert box.execute("search_files", json.dumps({"pattern": r"'\d'"})) == "notes.py:3: x = '٣'"


def test_search_output_is_capped(run, bare):
    (bare / "many.txt").write_text("hit\n" * 1000)
    out = run("search_files", pattern="hit")
    assert out.count("\n") == tools.MAX_LINES and out.endswith("narrow the pattern or path]")


def test_a_huge_tree_is_summed_up_by_folder(run, bare):
    for folder, count in (("gen", 350), ("src", 20)):
        (bare / folder).mkdir()
        for i in range(count):
            (bare / folder / f"f{i:03}.py").write_text("")
    said = run("list_files")
    assert said.endswith("[70 more files not shown, by folder: gen/ 50, src/ 20; list a subfolder]")


def test_a_file_that_is_not_utf8_is_read_with_a_note(run, bare):
    (bare / "menu.txt").write_bytes("café crème\n".encode("latin-1"))
    said = run("read_file", path="menu.txt")
    assert "caf� cr�me" in said and "[the file is not UTF-8:" in said
    (bare / "ok.txt").write_text("café\n")
    assert "not UTF-8" not in run("read_file", path="ok.txt")


def test_list_files_tree(run, bare):
    for rel in ("b.txt", "src/a.py", "src/sub/c.py", "__pycache__/x.pyc"):
        (bare / rel).parent.mkdir(parents=True, exist_ok=True)
        (bare / rel).write_text("")
    assert run("list_files") == "b.txt\nsrc/\n  a.py\n  sub/\n    c.py"
    assert run("list_files", path="src/sub") == "c.py"


def test_dispatcher_answers_bad_calls_with_text(run, box):
    assert run("no_such_tool").startswith(
        "Error: unknown tool 'no_such_tool'; available tools: read_file"
    )
    assert box.execute("read_file", "{not json") == (
        "Error: arguments for read_file are not a JSON object ('{not json'); send one JSON object"
    )
    assert box.execute("read_file", "[1]") == (
        "Error: arguments for read_file are not a JSON object ('[1]'); send one JSON object"
    )
    assert run("read_file") == "Error: read_file is missing required argument(s): path"
    assert run("read_file", path=["a"]) == (
        "Error: argument 'path' of read_file must be a string, not [\"a\"]"
    )
    assert run("read_file", path="x", colour="red").startswith(
        "Error: read_file has no argument(s) colour"
    )
    assert run("shell_command", command="true") == "$ true\n[exit code 0]"


def test_huge_tool_result_is_capped(run):
    out = run("shell_command", command="python3 -c \"print('x' * 3_000_000)\"")
    assert len(out) < tools.MAX_RESULT + 200 and "characters cut" in out


def test_search_and_list_say_when_the_path_is_not_there(project):
    box = toolbox(project)
    assert (
        box.execute("search_files", json.dumps({"pattern": "x", "path": "nope"}))
        == "Error: nope does not exist"
    )
    assert box.execute("list_files", json.dumps({"path": "nope"})) == "Error: nope does not exist"
    assert (
        box.execute("list_files", json.dumps({"path": "README.md"}))
        == "Error: README.md is not a folder"
    )
    wrong = box.execute("read_file", json.dumps({"path": "README.md", "offset": "three"}))
    assert wrong == "Error: argument 'offset' of read_file must be an integer, not \"three\""


@pytest.mark.parametrize(
    "name, args, said",
    [
        # the walk of a folder without git meets it
        (
            "search_files",
            {"pattern": "hello"},
            "a.txt:1: hello",
        ),
        ("search_files", {"pattern": "hello", "path": "pipe"}, "Error: pipe is not a regular file"),
        ("read_file", {"path": "pipe"}, "Error: pipe is not a regular file"),
        (
            "edit_file",
            {"path": "pipe", "old_str": "a", "new_str": "b"},
            "Error: pipe is not a regular file",
        ),
        ("read_file", {"path": "."}, "Error: . is a folder; list_files shows what it holds"),
    ],
)
def test_a_fifo_never_blocks_a_tool(run, bare, name, args, said):
    import os
    import threading

    (bare / "a.txt").write_text("hello\n")
    os.mkfifo(bare / "pipe")
    result = []
    worker = threading.Thread(target=lambda: result.append(run(name, **args)), daemon=True)
    worker.start()
    worker.join(10)
    blocked = worker.is_alive()
    if blocked:  # opening the FIFO: a writer that closes at once lets it go
        os.close(os.open(bare / "pipe", os.O_WRONLY | os.O_NONBLOCK))
        worker.join(10)
    assert not blocked and result == [said]


def test_a_one_line_change_in_a_file_of_repeated_lines_is_diffed_as_one_line(monkeypatch):
    """Matching is quadratic in repeated lines (10,000 took 13 s):
    the lines both ends share are left out first."""
    import difflib

    from amas_code import ui

    matched = []

    class Recorded(difflib.SequenceMatcher):
        def __init__(self, isjunk=None, a="", b="", autojunk=True):
            matched.append(len(a) + len(b))
            super().__init__(isjunk, a, b, autojunk)

    monkeypatch.setattr(difflib, "SequenceMatcher", Recorded)
    old = "x,1\n" * 30_000
    new = "x,1\n" * 15_000 + "x,2\n" + "x,1\n" * 14_999
    shown = ui.diff(old, new, "data.csv").plain
    assert shown == (
        "--- a/data.csv\n+++ b/data.csv\n@@ -14999,5 +14999,5 @@\n"
        " x,1\n x,1\n-x,1\n+x,2\n x,1\n x,1\n"
    )
    assert matched and max(matched) <= 12
    assert (
        ui.diff("a\nb\n", "a\nc\nb\n", "f").plain
        == "--- a/f\n+++ b/f\n@@ -1,2 +1,3 @@\n a\n+c\n b\n"
    )


@pytest.mark.parametrize("name", ["create_file", "write_file"])
def test_a_path_ending_in_a_slash_is_not_made_a_file(run, bare, name):
    said = run(name, path="sub/", content="x\n")
    assert (
        said
        == "Error: sub/ ends with /, which names a folder; give the file's name, e.g. sub/file.txt"
    )
    assert not (bare / "sub").exists()


def test_writes_to_a_folder_or_a_long_name_leave_no_stray_file(run, bare):
    (bare / "d").mkdir()
    assert (
        run("write_file", path="d", content="x")
        == "Error: d is a folder; list_files shows what it holds"
    )
    # the file system's limit is 255 bytes: a temporary name must be shorter
    long = "n" * 250 + ".txt"
    assert run("write_file", path=long, content="x\n") == f"Write {long}: 1 line"
    assert run("edit_file", path=long, old_str="x", new_str="y") == f"Edit {long}: 1 line"
    assert (
        sorted(p.name for p in bare.iterdir()) == ["d", long] and (bare / long).read_text() == "y\n"
    )


# until the daemon has left the command's session (under load it had not, and the end of the
# command's process group took it along)
WAIT = "until [ -s daemon.pid ]; do sleep 0.05; done; "


def test_a_process_out_of_reach_holding_the_output_ends_the_reading_at_the_timeout(bare):
    """Where no subreaper brings a daemon back (macOS, or a parent that took the role), the command
    still returns at its timeout with what it printed, and says why; a fresh interpreter stands in
    for such a system."""
    script = (
        "import os, pathlib; from amas_code import effects, sandbox; "
        "sandbox._harden = lambda: None; "
        "line = \"setsid sh -c 'echo $$ > daemon.pid; exec sleep 303' & " + WAIT + 'echo started"; '
        "print(sandbox.run(effects.Command(line, 2, dict(os.environ)), pathlib.Path.cwd()))"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", script], cwd=bare, capture_output=True, text=True, timeout=40
        )
        assert done.stdout.startswith("$ setsid sh -c") and "\nstarted\n" in done.stdout
        assert (
            "[exit code 0]\n[still held open after 2s by a process it started that amas cannot stop"
            in done.stdout
        )
    finally:
        with contextlib.suppress(OSError, ValueError):
            os.killpg(int((bare / "daemon.pid").read_text()), signal.SIGKILL)


def test_outside_git_every_gitignore_is_read_as_git_reads_it(bare, run):
    """Negations, anchors, `dir/*.txt` and a .gitignore in a subfolder: list_files and search_files
    outside a repository leave out exactly what git would (git itself is asked on a copy)."""
    import shutil

    (bare / ".gitignore").write_text("*.md\n!keep.md\n/out\ndocs/*.txt\n")
    (bare / "sub" / "deep").mkdir(parents=True)
    (bare / "sub" / ".gitignore").write_text("!again.md\n*.log\n")
    names = "a.md keep.md b.py docs/x.txt docs/y.py sub/again.md sub/c.md sub/x.log sub/deep/d.log"
    for name in [*names.split(), "sub/deep/e.md", "out/o", "sub/out"]:
        (bare / name).parent.mkdir(parents=True, exist_ok=True)
        (bare / name).write_text("needle\n")
    copy = bare.parent / "copy"
    shutil.copytree(bare, copy)
    git(copy, "init", "-q")
    listed = git(copy, "ls-files", "-co", "--exclude-standard").split()
    assert sorted(listed) == [
        ".gitignore", "b.py", "docs/y.py", "keep.md", "sub/.gitignore", "sub/again.md", "sub/out"
    ]  # fmt: skip
    found = run("search_files", pattern="needle").splitlines()
    needles = [name for name in listed if not name.endswith(".gitignore")]
    assert sorted(line.split(":")[0] for line in found) == sorted(needles)
    assert "a.md" not in run("list_files") and "keep.md" in run("list_files")


def test_arguments_are_read_as_a_tolerant_reader_takes_them(run, bare):
    """A real small model (Qwen2.5-Coder-1.5B) writes every optional argument it does not mean as
    null: null is the default. A value of another type is converted where that is unambiguous."""
    (bare / "a.txt").write_text("one\ntwo\nthree\n")
    whole = run("read_file", path="a.txt")
    assert run("read_file", path="a.txt", offset=None, limit=None) == whole
    assert run("read_file", path="a.txt", offset="1", limit=1.0) == run(
        "read_file", path="a.txt", offset=1, limit=1
    )
    assert "2\ttwo" in run("read_file", path="a.txt", offset="1", limit=1.0)
    (bare / "7").write_text("seven\n")
    assert "seven" in run("read_file", path=7)
    assert run("shell_command", command="echo hi", timeout=None).startswith("$ echo hi\nhi")
    assert run("read_file", path=None) == "Error: read_file is missing required argument(s): path"
    assert run("read_file", path="a.txt", limit=True).startswith(
        "Error: argument 'limit' of read_file must be an integer, not true"
    )


def test_a_path_that_is_not_there_names_the_nearest_real_ones(run, bare):
    """The real 1.5B model edited `scripts/cli.py` and `src/main.py` where `cli.py` sat at the
    root, got a bare FileNotFoundError, and told the user to create the file."""
    (bare / "cli.py").write_text("print('hi')\n")
    (bare / "tests").mkdir()
    (bare / "tests" / "cli.py").write_text("")
    said = run("edit_file", path="scripts/cli.py", old_str="hi", new_str="ho")
    assert said == (
        "Error: scripts/cli.py does not exist. A file of that name is at: cli.py, tests/cli.py. "
        "scripts/ does not exist either. The project's top folder holds: cli.py, tests/."
    )
    assert run("read_file", path="tests/main.py") == (
        "Error: tests/main.py does not exist. tests/ holds: cli.py."
    )


def test_old_str_not_found_in_a_file_never_read_shows_it_or_says_to_read_it(run, bare):
    """A closest match from a file the model never read
    (`17 return 0`) led it to guess twice more."""
    (bare / "small.py").write_text("def f():\n    return 1\n")
    said = run("edit_file", path="small.py", old_str="return 0", new_str="return 2")
    assert said == (
        "Error: old_str not found in small.py, which you have not read in this session "
        "(read_file shows it). It holds:\n"
        "     1\tdef f():\n     2\t    return 1\nCopy old_str exactly from it."
    )
    (bare / "big.py").write_text("x = 1\n" * 1000)
    said = run("edit_file", path="big.py", old_str="y = 2", new_str="y = 3")
    assert said == (
        "Error: old_str not found in big.py, which you have not read in this session: read_file it,"
        " then copy old_str exactly from what it shows."
    )
    run("read_file", path="small.py")  # read: the closest region, as before
    said = run("edit_file", path="small.py", old_str="return 0", new_str="return 2")
    assert said.startswith("Error: old_str not found in small.py. The closest region (lines 2-2)")


@pytest.mark.parametrize(
    "path, seen",
    [
        ("/p/proj/a/b.py", "a/b.py"),
        ("/p/proj/a/./b.py", "a/b.py"),
        ("/p/proj/../x", "../x"),
        ("/p/project2/y", "/p/project2/y"),  # a sibling whose name starts like the project's
        ("/p/proj", "."),
        ("/p/proj/", "."),
        ("/elsewhere/z", "/elsewhere/z"),
        ("rel/p", "rel/p"),
    ],
)
def test_a_path_is_shown_relative_inside_the_project_and_whole_outside(path, seen):
    from amas_code import project

    assert project.shown(Path("/p/proj"), path) == seen
