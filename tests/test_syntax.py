"""Issue 39 item 5: an edit that breaks a file's syntax is said in the tool result at once, with its
line (tree-sitter, the languages the project map parses); the edit itself stays."""

import json

import pytest
from conftest import toolbox

PYTHON = "def total(items):\n    return sum(items)\n\n\nprint(total([1, 2]))\n"
JS = (
    "function total(items) {\n  return items.reduce((a, b) => a + b, 0);\n}\n\n"
    "console.log(total([1, 2]));\n"
)
GO = 'package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Println(1 + 2)\n}\n'
CASES = {  # file, what it holds, a broken edit (old, new) and the line it breaks, a fine edit
    "python": ("calc.py", PYTHON, ("sum(items)", "sum(items"), 2, ("sum(items)", "sum(items) + 0")),
    "javascript": ("calc.js", JS, ("a + b, 0)", "a + b, 0"), 2, ("a + b", "b + a")),
    "go": ("main.go", GO, ("(1 + 2)", "(1 + 2"), 6, ("1 + 2", "2 + 1")),
}


def edit(box, path: str, old: str, new: str) -> str:
    return box.execute("edit_file", json.dumps({"path": path, "old_str": old, "new_str": new}))


@pytest.fixture
def box(bare):
    return toolbox(bare, auto_accept=True)


@pytest.mark.parametrize("language", CASES)
def test_an_edit_that_breaks_the_syntax_names_the_line_and_stays(box, bare, language):
    name, text, (old, new), line, _ = CASES[language]
    (bare / name).write_text(text)
    result = edit(box, name, old, new)
    assert result.startswith(f"Edit {name}")
    assert f"syntax error at line {line}" in result
    assert (bare / name).read_text() == text.replace(old, new)  # the edit is kept


@pytest.mark.parametrize("language", CASES)
def test_an_edit_that_keeps_the_syntax_says_nothing_more(box, bare, language):
    name, text, _, _, (old, new) = CASES[language]
    (bare / name).write_text(text)
    result = edit(box, name, old, new)
    assert "syntax" not in result and result.startswith(f"Edit {name}")


def test_a_file_broken_before_the_edit_is_not_blamed_on_it(box, bare):
    (bare / "calc.py").write_text(PYTHON.replace("sum(items)", "sum(items"))
    result = edit(box, "calc.py", "print(total([1, 2]))", "print(total([3]))")
    assert "syntax" not in result and result.startswith("Edit calc.py")


def test_a_whole_file_write_that_breaks_it_is_refused_a_new_file_is_checked(box, bare):
    """Task bench, fifth run, unnamed-file: the 1.5B wrote shop.py over with amas's own tool result
    (`<tools>\n<tool_response>\nEdit shop.py: 15 lines…`); the write was kept with a warning and
    the run ended with the program gone. A whole-file write is a whole file: one that parses now
    is not replaced by one that does not."""
    (bare / "calc.js").write_text(JS)
    box.execute("read_file", json.dumps({"path": "calc.js"}))
    written = box.execute("write_file", json.dumps({"path": "calc.js", "content": "let a = [1,\n"}))
    created = box.execute(
        "create_file", json.dumps({"path": "new.go", "content": "package main\n\nfunc f( {\n}\n"})
    )
    assert written == (
        "Error: write_file would leave calc.js unparsable: a syntax error at line 1 of what you "
        "wrote (the file parses now, and is unchanged). Write the whole file as valid code, or "
        "change a part with edit_file"
    )
    assert (bare / "calc.js").read_text() == JS
    assert "syntax error at line 3" in created and (bare / "new.go").exists()


def test_languages_the_map_does_not_parse_are_not_checked(box, bare):
    result = box.execute("create_file", json.dumps({"path": "notes.txt", "content": "def f(:\n"}))
    assert result == "Create notes.txt: 1 line"


def test_check_syntax_false_turns_it_off(bare):
    box = toolbox(bare, auto_accept=True, check_syntax=False)
    (bare / "calc.py").write_text(PYTHON)
    result = edit(box, "calc.py", "sum(items)", "sum(items")
    assert "syntax" not in result and (bare / "calc.py").read_text().count("sum(items") == 1


def test_check_syntax_takes_only_true_or_false(bare):
    from amas_code.config import ConfigError, check_value

    with pytest.raises(ConfigError, match="check_syntax should be true or false"):
        check_value("check_syntax", "yes", "config.yaml")
