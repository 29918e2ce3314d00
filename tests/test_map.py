"""The project map in the prompt: ranked by references,
the user's words and the files touched, packed to a budget."""

import os
import re
import sqlite3  # noqa: F401  (loaded before memory is measured)
import tracemalloc

import pytest
from conftest import count_tokens
from test_init import write

from amas_code import repomap

CORE = "def parse(text):\n    return text\n\n\ndef render(tree):\n    return tree\n"
USERS = {
    f"app/use{i}.py": "from core import parse\n\n\ndef run{i}():\n    return parse('x')\n"
    for i in range(4)
}

ALIKE = re.compile(r" \(\+\d+ alike\)$")  # after the first file of a group of look-alikes


def mapped(root, query: str = "", touched: set[str] = frozenset(), budget: int = 1000) -> str:
    assert repomap.init(root, []) == 0
    return repomap.prompt_map(root, query, set(touched), budget)


def files(text: str) -> list[str]:
    """The files listed in the map, in order:
    block headers, then the paths of More files' tree of folders."""
    lines = text.splitlines()
    more = lines.index("More files:") if "More files:" in lines else len(lines)
    listed, stack = [line for line in lines[:more] if line and not line.startswith(" ")], []
    for line in lines[more + 1 :]:
        head, _, names = line.strip().partition(": ")
        stack[(len(line) - len(line.lstrip(" "))) // 2 :] = (
            [head.rstrip("/")] if head != "./" else []
        )
        listed += ["/".join([*stack, name]) for name in names.split(", ") if names]
    return [ALIKE.sub("", rel) for rel in listed]


def test_no_map_before_init(bare):
    assert repomap.prompt_map(bare, "hello", set(), 1000) == ""


def test_files_referenced_by_more_files_come_first_with_compact_lines(bare):
    write(
        bare,
        {
            "core.py": CORE,
            "lonely.py": "def alone(a, b):  # nobody calls this\n    pass\n",
            **USERS,
        },
    )
    text = mapped(bare)
    assert text.startswith("core.py\n  def parse(text)\n  def render(tree)\n")
    assert files(text).index("core.py") < files(text).index("lonely.py")
    assert "  def alone(a, b)\n" in text + "\n"  # the comment is not part of the line


def test_files_without_symbols_are_never_listed(bare):
    write(
        bare,
        {"core.py": CORE, "README.md": "# core\n", "empty.py": "import os\n", "data.json": "{}\n"},
    )
    assert files(mapped(bare)) == ["core.py"]


def test_tests_examples_docs_and_vendored_code_rank_below_source(bare):
    helper = "def make_client():\n    return 1\n"
    users = {
        f"tests/test_{i}.py": (
            "from helpers import make_client\n\n\ndef test_it():\n    make_client()\n"
        )
        for i in range(6)
    }
    write(
        bare,
        {
            "tests/helpers.py": helper,
            "examples/demo.py": helper.replace("make_client", "demo"),
            "docs/conf.py": "def setup(app):\n    pass\n",
            "vendor/lib.py": "def left_pad(s):\n    return s\n",
            "src/app.py": "def serve():\n    pass\n",
            "src/main.py": "from app import serve\nserve()\n",
            **users,
        },
    )
    order = files(mapped(bare))
    assert order[0] == "src/app.py"
    assert order.index("src/app.py") < min(
        order.index(f) for f in ("tests/helpers.py", "docs/conf.py", "vendor/lib.py")
    )


def test_the_words_of_the_message_bring_up_the_file_and_the_method_with_its_class(bare):
    session = "class Session:\n" + "".join(
        f"    def op{i}(self):\n        pass\n\n" for i in range(8)
    )
    session += "    def resolve_redirects(self, resp):\n        pass\n"
    write(
        bare,
        {
            "core.py": CORE,
            **USERS,
            "net/session.py": session,
            "cookies.py": "def jar():\n    pass\n",
        },
    )
    text = mapped(bare, "Where are redirects followed?")
    assert files(text)[0] == "net/session.py"
    block = text.split("\ncore.py")[0].splitlines()
    assert (
        block[:2] == ["net/session.py", "  class Session"]
        and "    def resolve_redirects(self, resp)" in block
    )
    assert block[-1] == f"  (+{10 - (len(block) - 2)} more)"  # the symbols not shown are counted
    assert files(mapped(bare, "where are cookies kept?"))[0] == "cookies.py"


def test_a_file_named_at_a_word_boundary_comes_first(bare):
    write(
        bare,
        {
            "core.py": CORE,
            **USERS,
            "ui/progress_bar.py": "def draw():\n    pass\n",
            "ui/bar.py": "def bar():\n    pass\n",
            "a/__init__.py": "def a():\n    pass\n",
            "b/__init__.py": "def b():\n    pass\n",
        },
    )
    baseline = files(mapped(bare))
    order = files(mapped(bare, "fix the width in progress_bar.py"))
    assert order[0] == "ui/progress_bar.py"
    # not promoted by a longer name
    assert order.index("ui/bar.py") >= baseline.index("ui/bar.py") - 1
    # a path names one file
    assert files(mapped(bare, "look at b/__init__.py"))[0] == "b/__init__.py"
    assert files(mapped(bare, "look at b/__init__.py"))[1] != "a/__init__.py"
    assert set(files(mapped(bare, "what do the __init__.py files export?"))[:2]) == {
        "a/__init__.py",
        "b/__init__.py",
    }


def test_files_read_or_changed_in_the_conversation_move_up(bare):
    write(bare, {"core.py": CORE, **USERS, "tools/misc.py": "def tidy():\n    pass\n"})
    assert files(mapped(bare))[0] == "core.py"
    assert files(mapped(bare, "", {"tools/misc.py"}))[0] == "tools/misc.py"
    write(bare, {"settings.py": "DEBUG = False\n"})  # read, and without symbols: never listed
    assert files(mapped(bare, "", {"settings.py", "core.py"}))[0] == "core.py"


def test_a_file_too_big_for_the_room_is_skipped_and_smaller_ones_still_fill_it(bare):
    wide = "".join(
        f"def {name}_{'x' * 70}(argument_one, argument_two, argument_three):\n    pass\n\n"
        for name in ("alpha", "beta", "gamma", "delta")
    )
    users = {
        f"use{i}.py": f"import big\nbig.alpha_{'x' * 70}\nbig.beta_{'x' * 70}\n" for i in range(5)
    }
    write(bare, {"big.py": wide, **users, "small.py": "def tiny():\n    pass\n"})
    text = mapped(bare, budget=60)
    assert not text.startswith("big.py") and "small.py\n  def tiny()" in text
    # named in More files, if not shown
    assert files(text)[-1] == "big.py" or "big.py" in text.splitlines()[-1]


@pytest.mark.parametrize("budget", [60, 200, 1000])
def test_the_map_stays_under_its_budget(bare, budget):
    write(
        bare,
        {
            f"pkg{i % 7}/mod{i}.py": f"class Thing{i}(Base):\n"
            f"    def method_{i}(self, value: int = {i}) -> int:\n"
            f"        return value\n\n\ndef helper_{i}(a, b, c):\n    return Thing{(i + 1) % 40}\n"
            for i in range(40)
        },
    )
    text = mapped(bare, "where are things handled", {"pkg1/mod1.py"}, budget)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    assert text and count_tokens(text) <= budget


def test_more_files_are_a_tree_of_folders_so_long_paths_cost_little(bare):
    deep = "service/src/main/java/com/example/service"
    sources = {
        f"{deep}/{part}/Handler{i}.java": f"class Handler{i} {{\n  void handle{i}() {{}}\n}}\n"
        for i in range(40)
        for part in ("api", "storage")
    }
    write(bare, {"core.py": CORE, **USERS, **sources})
    text = mapped(bare, budget=300)
    more = text.split("More files:\n", 1)[1].splitlines()
    # each name once, short
    assert more[:3] == ["service/", "  src/", "    main/"] and deep not in "\n".join(more)
    # under service/, seven deep
    assert any(line.startswith(" " * 14 + "api/: Handler") for line in more)
    listed = [f for f in files(text) if f.startswith(deep)]
    assert set(listed) <= set(sources) and len(listed) == len(set(listed)) > 20
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    spelled = count_tokens("More files: " + ", ".join(listed))
    assert spelled > 300 >= count_tokens(text)  # in full they would not have fit


def test_a_name_many_files_define_says_little_about_a_file(bare):
    generic = "\n".join(
        f"    def {name}(self):\n        return self\n" for name in ("new", "clone", "size")
    )
    models = {f"models/m{i}.py": f"class Model{i}:\n{generic}" for i in range(12)}
    users = {
        f"use{i}.py": "from core import parse, render\nrender(parse(x.new().clone().size()))\n"
        for i in range(8)
    }
    write(bare, {"core.py": CORE, **models, **users})
    # `new`, `clone`, `size` are everywhere: core's names are its own
    assert files(mapped(bare))[0] == "core.py"


def test_a_small_project_gives_its_symbols_the_room_its_names_do_not_need(bare):
    body = "".join(
        f"def step_{n}_of_the_pipeline(source_{n}, target_{n}, options_{n}):\n    pass\n\n"
        for n in range(6)
    )
    write(bare, {f"stage{i}.py": body.replace("step_", f"s{i}_") for i in range(8)})
    text = mapped(bare, budget=1000)
    assert "More files:" not in text and len(files(text)) == 8  # all eight shown with their symbols


WORDS = (
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
)


def module(i: int) -> str:
    """A module of its own, nothing alike in others (no group shortens the index):
    `class AlphaBravo…`."""
    name = "_".join(WORDS[int(digit)] for digit in f"{i:04}")
    return f"class {name.title()}:\n    def {name}_apply(self, {name}_value):\n        return {i}\n"


def test_a_prompt_reads_only_the_parts_of_the_index_it_needs(bare):
    write(bare, {f"pkg{i % 40}/m{i}.py": module(i) for i in range(2000)})
    write(bare, {"billing/invoices.py": "def total_invoice(lines):\n    return sum(lines)\n"})
    assert repomap.init(bare, []) == 0
    tracemalloc.start()
    text = repomap.prompt_map(bare, "where are invoices totalled?", set(), 1000)
    alive, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert text.startswith("billing/invoices.py\n  def total_invoice(lines)")
    # 2,000 files' symbols and words in memory would take megabytes:
    # the prompt read a few hundred rows
    assert peak < 1_500_000 and alive < 300_000, (peak, alive)


def test_generated_look_alikes_rank_as_one_group_and_never_crowd_out_real_code(bare):
    generated = {
        f"gen/f{i:04}.py": (
            f"def value_{i:04}(x):\n    return x + {i}\n\n\ndef check_{i:04}(x):\n    return x\n"
        )
        for i in range(1, 601)
    }
    shapes = (
        "class Circle:\n    def area(self):\n        pass\n\n\n"
        "class Square:\n    def area(self):\n        pass\n"
    )
    write(bare, {**generated, "shapes.py": shapes})
    text = mapped(bare, "How do I add a new kind of figure?")
    assert "shapes.py\n  class Circle\n    def area(self)\n  class Square" in text
    # the group is named once, ahead of its members, with their count
    assert "gen/f0001.py (+599 alike)" in text
    listed = files(text)
    assert listed.index("shapes.py") < listed.index("gen/f0001.py")
    assert all(listed.index("shapes.py") < listed.index(f) for f in generated if f in listed)


def test_the_index_is_bounded_in_project_map_md_and_the_rest_counted_by_folder(bare, monkeypatch):
    write(bare, {"core.py": CORE, **USERS})
    write(bare, {f"pkg{i % 3}/mod{i}.py": f"def helper_{i}(a):\n    return a\n" for i in range(60)})
    monkeypatch.setattr(repomap, "MAP_BYTES", 600)
    mapped(bare)
    text = (bare / ".amas" / "project_map.md").read_text()
    assert len(text) < 1200 and "## core.py\n- L1 def parse(text)" in text
    listed = text.count("\n## ")
    counted = re.findall(r"^- (pkg\d/|app/) (\d+) files?, \d+ symbols?$", text, re.M)
    assert 1 < listed and sum(int(n) for _, n in counted) == 61 - listed
    assert text.startswith("# Project map\n61 files, 62 symbols")


def test_an_incremental_init_ranks_as_a_full_one(bare):
    lonely = "def alone(a, b):\n    pass\n"
    write(bare, {"core.py": CORE, "lonely.py": lonely, **USERS})
    assert files(mapped(bare))[0] == "core.py"
    callers = {f"call{i}.py": "from lonely import alone\nalone(1, 2)\n" for i in range(6)}
    write(bare, callers)  # new files that refer to lonely.py's name: only they are parsed
    assert files(mapped(bare))[0] == "lonely.py"
    os.utime(bare / "core.py")  # saved again as it was: the same ranks
    incremental = mapped(bare, "where is alone?")
    repomap.index(bare).unlink()
    assert mapped(bare, "where is alone?") == incremental
    for name in callers:
        (bare / name).unlink()
    assert files(mapped(bare))[0] == "core.py"
