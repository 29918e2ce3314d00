"""A new user's first runs (issue 47): the first-run questions in order and in plain words, tool
output bounded on the screen with counts that add up, an answer for this session, and the small
things a person reads (/model, /permissions, /help, a new file's diff, init, /tokens, !command,
the JSON result)."""

import io
import json
import re

import pexpect
import pytest
from conftest import amas_argv, amas_env, git, run_amas
from test_sandbox_agent import needs_box, outside  # noqa: F401
from test_terminal import screen, settled

from amas_code import home as amas_home

QUESTION = r"\[y\]es/\[n\]o"


def upto(child, pattern) -> str:
    """Everything the terminal showed until pattern, pattern included, as text."""
    child.expect(pattern)
    return screen(child.before + child.after)


def flat(text: str) -> str:
    """Text with its wrapping undone: words joined by single spaces."""
    return " ".join(text.split())


@pytest.fixture
def spawn(llm):
    """amas in a pseudo-terminal of the given size, in the given folder (rich asks the terminal)."""
    children = []

    def start(cwd, *args, dims=(40, 120)):
        env = amas_env(llm, PROMPT_TOOLKIT_NO_CPR="1", TERM="xterm", NO_COLOR="1")
        env.pop("COLUMNS")
        argv = amas_argv(*args, env=env)
        child = pexpect.spawn(argv[0], argv[1:], cwd=str(cwd), env=env, encoding="utf-8",
                              timeout=30, dimensions=dims)  # fmt: skip
        child.logfile_read = io.StringIO()
        children.append(child)
        return child

    yield start
    for child in children:
        child.close(force=True)


def rows(child) -> list[str]:
    """The rows the terminal holds now, scrollback included."""
    return settled(child.logfile_read.getvalue())


# -- the first run in a folder ---------------------------------------------------------------------


def test_the_trust_question_in_a_bare_folder_says_plainly_what_trust_would_do(spawn, project):
    child = spawn(project)
    seen = upto(child, QUESTION)
    assert "It sets nothing to trust" not in seen
    said = flat(seen)
    assert f"{project} has no amas settings, rules, AGENTS.md or skills" in said
    assert "trusting it only lets your own allow rules run matching commands here unasked" in said
    assert said.index("has no amas settings") < said.index(f"Trust {project}?")
    child.sendline("y")
    child.expect("›")
    assert amas_home.trusted(project)


def test_in_the_home_the_home_is_said_first_and_not_going_on_records_nothing(spawn, home):
    child = spawn(home)
    seen = flat(upto(child, QUESTION))
    assert f"{home} is your home or above it, not a project folder" in seen
    assert "Go on here, with the home read-only?" in seen and "Trust" not in seen
    child.sendline("no, don't go on")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert amas_home.answered(home) is None  # nothing recorded: asked again next time

    child = spawn(home)
    child.expect(r"Go on here, with the home read-only\?\S* " + QUESTION)
    child.sendline("y")
    seen = flat(upto(child, QUESTION))
    assert f"Trust {home}?" in seen
    child.sendline("n")
    child.expect("›")
    assert amas_home.answered(home) is False


# -- tool output on the screen ------------------------------------------------------------------


def test_a_50000_character_line_takes_a_few_rows_at_80_columns_and_counts_add_up(
    spawn, project, llm
):
    amas_home.set_trust(project, True)
    command = "seq 1 200000; python3 -c \"print('x' * 50000)\""
    llm.reply(tool="shell_command", command=command).reply(text="Counted.")
    child = spawn(project, "-y", dims=(40, 80))
    child.expect("›")
    child.sendline("count")
    child.expect("Counted.")
    child.expect("›")
    shown = rows(child)
    assert all(len(row) <= 80 for row in shown), [r for r in shown if len(r) > 80]
    assert 1 <= len([row for row in shown if "x" * 20 in row]) <= 3
    text = flat("\n".join(shown))
    assert "200,001 lines in" in text  # what it printed
    # what the screen shows of it: 3 lines, the rest counted, the last 3 (the long one cut)
    assert "│ 1 │ 2 │ 3 │ … 199,995 more lines │ 199999 │ 200000 │ xxx" in text, text
    assert re.search(r"x … \(\+4\d,\d{3} characters\)", text)
    assert "the model gets the start and the end of it" in text
    assert "characters cut" in llm.requests[1]["messages"][-1]["content"]


@needs_box
def test_a_granted_rerun_shows_its_own_lines_and_counts(spawn, project, outside, llm):  # noqa: F811
    amas_home.set_trust(project, True)
    line = f"seq 1 13; echo hi > {outside}"
    llm.reply(tool="shell_command", command=line).reply(text="Written.")
    child = spawn(project, "-y")
    child.expect("›")
    child.sendline("write it")
    child.expect("or type another folder: ")  # it proposes the folder the command tried
    child.sendline("y")
    child.expect("Written.")
    assert outside.read_text() == "hi\n"
    text = flat("\n".join(rows(child)))
    second = text[text.rindex(f"{outside}: ") :]  # the second run's summary, and what follows
    assert second.startswith(f"{outside}: 13 lines in")
    assert "│ 1 │ 2 │ 3 │ … 7 more lines │ 11 │ 12 │ 13 │ [exit code 0]" in second, second
    assert "Read-only file system" not in second  # the first run's error stays with the first


# -- a session-scoped answer -----------------------------------------------------------------------


def test_a_command_allowed_for_this_session_is_not_asked_again_and_is_listed(repl, project, llm):
    for _ in range(3):
        llm.reply(tool="shell_command", command="echo ran-it")
    llm.reply(text="Ran it three times.")
    child = repl()
    child.logfile_read = io.StringIO()
    child.sendline("run it after each edit")
    seen = upto(child, r"\[y\]es/\[n\]o/\[s\]ession/\[a\]lways")
    assert "[s]ession: this exact command, until amas exits" in seen
    child.sendline("s")
    child.expect("Ran it three times.")
    shown = rows(child)
    assert len([row for row in shown if row.startswith("Run `echo ran-it`?")]) == 1
    assert len([row for row in shown if row == "  │ ran-it"]) == 3  # all three ran
    child.sendline("/permissions")
    seen = flat(upto(child, "forgets one as listed"))
    assert "this session: echo ran-it" in seen and "allowed: (none)" in seen
    child.expect_exact("last: 'echo ran-it' -> allow by your answer for this session")
    assert amas_home.remembered(project).get("commands", []) == []  # not for the project
    child.sendline("/permissions forget")
    child.expect("/permissions forget <command|host> forgets one as listed")
    child.sendline("/permissions forget echo ran-it")
    child.expect("forgotten: echo ran-it")
    llm.reply(tool="shell_command", command="echo ran-it").reply(text="Asked.")
    child.sendline("once more")
    child.expect(QUESTION)  # forgotten: asked again
    child.sendline("n")
    child.expect("Asked.")


# -- small things a person reads ------------------------------------------------------------------


def test_model_to_a_provider_without_a_key_says_so_at_once_in_the_repls_words(repl, llm):
    child = repl()
    child.sendline("/model anthropic/claude-3-5-haiku-latest")
    seen = flat(upto(child, "a message to it fails"))
    assert "model: anthropic/claude-3-5-haiku-latest" in seen
    assert "no API key for anthropic/claude-3-5-haiku-latest: export ANTHROPIC_API_KEY" in seen
    assert "another model with /model" in seen and "-m" not in seen
    child.sendline("hello")  # and the message that fails says it the same way
    seen = flat(upto(child, "✗[^›]*›"))
    assert "no API key for anthropic/claude-3-5-haiku-latest" in seen
    assert "another model with /model" in seen and "with -m" not in seen
    assert llm.requests == []


def test_help_keeps_each_row_whole_at_60_columns(spawn, project):
    amas_home.set_trust(project, True)
    child = spawn(project, dims=(40, 60))
    child.expect("›")
    child.sendline("/help")
    child.expect("/exit")
    child.expect("›")
    shown = rows(child)
    start = next(n for n, row in enumerate(shown) if row.startswith("  /help "))
    listed = shown[start : next(n for n, row in enumerate(shown) if "/exit" in row) + 1]
    assert all(row.startswith(("  /", " " * 15)) for row in listed), listed
    at = next(n for n, row in enumerate(listed) if row.startswith("  /permissions"))
    row = listed[at] + " " + " ".join(r.strip() for r in listed[at + 1 : at + 3])
    assert "/permissions forget <command|host|all>" in flat(row)


def test_a_new_files_diff_is_from_dev_null_and_says_new_file(repl, project, llm):
    llm.reply(tool="create_file", path="poem.txt", content="a line\n").reply(text="Made.")
    child = repl()
    child.sendline("write a poem")
    seen = upto(child, QUESTION)
    assert "new file poem.txt\n--- /dev/null\n+++ b/poem.txt\n@@ -0,0 +1 @@\n+a line" in seen
    assert "--- a/poem.txt" not in seen
    child.sendline("y")
    seen = upto(child, "Made.")
    assert seen.count("│ Create poem.txt: 1 line") == 1  # the result, once


def test_init_says_it_made_amas_and_what_git_status_shows(project):
    (project / "app.py").write_text("def main():\n    pass\n")
    first = run_amas("init")
    said = flat(first.stderr)
    assert first.returncode == 0 and "mapped 1 file, 1 symbol" in said
    assert "created .amas/" in said and "`git status` lists it as new (?? .amas/)" in said
    assert "reparsed" not in said and "cached" not in said
    assert "?? .amas/" in git(project, "status", "--short").splitlines()  # as said
    again = run_amas("init")
    assert again.returncode == 0 and "created" not in again.stderr


def test_tokens_says_what_is_kept_for_the_answer(repl, llm):
    child = repl()
    child.sendline("/tokens")
    seen = flat(upto(child, "kept for the answer"))
    found = re.search(r"tokens of (\d+) \(the context is (\d+); (\d+) are kept for the", seen)
    assert found, seen
    limit, context, kept = map(int, found.groups())
    assert context == 32000 and limit + kept == context  # the docs' max_context_tokens


def test_a_bang_command_shows_its_whole_output_in_the_gutter(repl, project):
    child = repl()
    child.logfile_read = io.StringIO()
    child.sendline("!seq 1 12")
    child.expect("exit code 0")
    child.expect("›")
    shown = rows(child)  # what stays, not the live tail's drafts
    assert [row for row in shown if row.startswith("  │ ")] == [
        *[f"  │ {n}" for n in range(1, 13)],
        "  │ [exit code 0]",
    ]


def test_the_json_result_has_one_shape_whatever_the_error(project, llm):
    results = []
    for _ in range(6):
        llm.error(401, "invalid api key")
    results.append(run_amas("--output-format", "json", "hello", llm=llm))  # from the provider
    results.append(run_amas("--output-format", "json", llm=llm, input=""))  # nothing to do
    missing = {"AMAS_API_KEY": "", "AMAS_API_BASE": ""}
    # no key: before the model library loads
    results.append(
        run_amas("--output-format", "json", "-m", "anthropic/claude-3-5-haiku", "hi", env=missing)
    )
    (project / ".amas").mkdir()
    (project / ".amas/config.yaml").write_text("shell_timeout: soon\n")
    results.append(run_amas("--output-format", "json", "hello", llm=llm))  # a bad config
    shapes = []
    for done in results:
        (result,) = [json.loads(line) for line in done.stdout.splitlines()]
        assert done.returncode == 1 and result["is_error"] is True, done.stderr
        assert isinstance(result["session_id"], str) and len(result["session_id"]) == 12
        assert result["cost_usd"] == 0.0  # nothing was spent
        shapes.append({key: type(value).__name__ for key, value in result.items()})
    assert all(shape == shapes[0] for shape in shapes), shapes


@pytest.mark.parametrize("size", [1, 3, 7, 64, 65536])
def test_what_a_command_printed_is_kept_the_same_however_it_comes(size):
    from amas_code import ui

    printed = "".join(f"line {n}\n" for n in range(1, 41)) + "no end " * 300
    tail = ui.Tail("x")
    for at in range(0, len(printed), size):
        tail.feed(printed[at : at + size])
    assert tail.total() == 41 and tail.count == 40
    first, last = tail._kept()
    assert [text for text, _ in first] == ["line 1", "line 2", "line 3"]
    assert [text for text, _ in last[:-1]] == [f"line {n}" for n in range(36, 41)]
    assert last[-1] == (("no end " * 300)[: ui.Tail.WIDE], 2100)  # its start, its whole length
    rows = tail._excerpt()
    assert rows[:4] == ["line 1", "line 2", "line 3", "… 35 more lines"]
    assert rows[4:6] == ["line 39", "line 40"] and "(+" in rows[6]
