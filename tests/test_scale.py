"""Scale (issue 40) as facts that need no timing: what a huge project costs in memory is bounded by
what a tool shows, not by the project's size; a full project map loads no tokenizer."""

import subprocess
import sys
import tracemalloc

import pytest
from conftest import amas_env, git, run_amas, toolbox

FILES = 20_000
SEARCH = '{"pattern": "NEEDLE_\\\\d+"}'


def index(root, files: int):
    """A repository whose index names `files` files in 100 folders (none on disk: git lists them),
    with one file that holds a needle; an agent on it, its tools warmed by a first search."""
    root.mkdir()
    git(root, "init", "-q")
    blob = subprocess.run(
        ["git", "hash-object", "-w", "--stdin"], cwd=root, input=b"", capture_output=True
    ).stdout.decode()
    entries = "".join(f"100644 {blob.strip()}\tpkg{i % 100}/mod_{i:05}.py\n" for i in range(files))
    subprocess.run(["git", "update-index", "--index-info"], cwd=root, input=entries.encode())
    (root / "pkg7").mkdir()
    (root / "pkg7/mod_00007.py").write_text("NEEDLE_7 = 7\n")
    box = toolbox(root)
    box.execute("search_files", '{"pattern": "nothing\\d", "path": "pkg7"}')  # imports, compiles
    return box


def peak_of(box, name: str, args: str) -> tuple[int, str]:
    """Bytes Python held at most while the tool ran, beyond what it held before; and its result."""
    tracemalloc.start()
    try:
        result = box.execute(name, args)
        return tracemalloc.get_traced_memory()[1], result
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("name, args", [("list_files", "{}"), ("search_files", SEARCH)])
def test_a_tool_over_a_huge_tree_holds_no_more_than_over_a_small_one(bare, name, args):
    """20 times the files, the same memory (before: 20,000 paths held at once, ~6 MB more)."""
    small = peak_of(index(bare / "small", FILES // 20), name, args)
    huge = peak_of(index(bare / "huge", FILES), name, args)
    assert huge[0] - small[0] < 2_000_000, (small[0], huge[0])
    if name == "search_files":
        assert huge[1] == small[1] == "pkg7/mod_00007.py:1: NEEDLE_7 = 7"
    else:
        lines = huge[1].splitlines()
        assert lines[:3] == ["pkg0/", "  mod_00000.py", "  mod_00100.py"]
        assert lines[-1].startswith(f"[{FILES - 300} more files not shown, by folder: pkg10/ 200, ")


def test_a_one_shot_with_a_full_map_loads_no_tokenizer(project, llm):
    """The system prompt is kept in budget by the map's own measure: tiktoken's encoding (+35 MB of
    a one-shot's 200) loads only when a conversation nears the model's context."""
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
