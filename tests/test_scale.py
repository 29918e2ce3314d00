"""Scale (issue 40) as facts that need no timing: what a huge project costs in memory is bounded by
what a tool shows, not by the project's size; a full project map loads no tokenizer."""

import subprocess
import sys
import tracemalloc

from conftest import amas_env, git, run_amas, toolbox

FILES = 40_000


def huge_index(root, files: int = FILES) -> None:
    """A repository whose index names `files` files in 100 folders (none on disk: git lists them)."""
    git(root, "init", "-q")
    blob = subprocess.run(
        ["git", "hash-object", "-w", "--stdin"], cwd=root, input=b"", capture_output=True
    ).stdout.decode()
    entries = "".join(f"100644 {blob.strip()}\tpkg{i % 100}/mod_{i:05}.py\n" for i in range(files))
    subprocess.run(["git", "update-index", "--index-info"], cwd=root, input=entries.encode())


def peak_of(action) -> int:
    """Bytes Python held at most while the action ran, beyond what it held before."""
    tracemalloc.start()
    try:
        action()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_listing_a_huge_tree_holds_no_part_of_it_whole(bare):
    huge_index(bare)
    box = toolbox(bare)
    listing = []
    peak = peak_of(lambda: listing.append(box.execute("list_files", "{}")))
    lines = listing[0].splitlines()
    assert lines[:3] == ["pkg0/", "  mod_00000.py", "  mod_00100.py"]
    assert lines[-1].startswith(f"[{FILES - 300} more files not shown, by folder: pkg1/ 400, ")
    # 40,000 paths held at once take ~20 MB; streamed, what is held is the listing's 300 lines
    assert peak < 5_000_000, peak


def test_searching_a_huge_tree_holds_no_list_of_its_files(bare):
    """20,000 files: held as a list of paths they take 10 MB, streamed 1.6 MB (40,000 took twice
    the time under tracemalloc, and past the search's 10 s limit on a loaded machine)."""
    huge_index(bare, 20_000)
    (bare / "pkg7").mkdir()
    (bare / "pkg7/mod_00007.py").write_text("NEEDLE_7 = 7\n")
    box = toolbox(bare)
    found = []
    peak = peak_of(
        lambda: found.append(box.execute("search_files", '{"pattern": "NEEDLE_\\\\d+"}'))
    )
    assert "pkg7/mod_00007.py:1: NEEDLE_7 = 7" in found[0]
    # pathlib interns each name, and the table that holds interned strings grows with how many
    # went through it
    assert peak < 5_000_000, peak


def test_a_one_shot_with_a_full_map_loads_no_tokenizer(project, llm):
    """The system prompt is kept in budget by the map's own measure: tiktoken's encoding (+35 MB of a
    one-shot's 200) loads only when a conversation nears the model's context."""
    (project / "pkg").mkdir()
    for i in range(300):
        body = "".join(f"def function_{i}_{j}(a, b):\n    pass\n" for j in range(8))
        (project / f"pkg/module_{i}.py").write_text(body)
    assert run_amas("init").returncode == 0
    llm.reply(text="Looked.")
    probe = (
        "import atexit, runpy, sys\n"
        "atexit.register(lambda: print('tokenizer loaded:',"
        " 'litellm.litellm_core_utils.default_encoding' in sys.modules, file=sys.stderr))\n"
        "sys.argv = ['amas', *sys.argv[1:]]; runpy.run_module('amas_code', run_name='__main__')\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", probe, "-y", "what does pkg hold?"],
        env=amas_env(llm),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert run.returncode == 0 and "Looked." in run.stdout, run.stderr
    system = llm.requests[0]["messages"][0]["content"]
    assert "### Project map\n" in system and system.count("module_") > 100  # the map is full
    assert "tokenizer loaded: False" in run.stderr
