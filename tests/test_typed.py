"""The person at the terminal, round 2 (issue 42): what is typed while the model works is kept,
waiting says how long, and Ctrl+C keeps what was shown."""

import io
import re
import threading

import pexpect
import pytest
import test_terminal

term = test_terminal.term  # the 120-column terminal, in colour


def test_a_line_typed_during_a_turn_is_the_next_message(term, llm):
    answer = threading.Event()  # the model answers once the line is typed
    llm.reply(text="First answer.", wait=answer).reply(text="Kept it.")
    child = term()
    child.sendline("start")
    child.expect("thinking")
    child.sendline("actually, keep the README")
    child.expect("queued › actually, keep the README")
    answer.set()
    child.expect("Kept it.")
    assert llm.requests[1]["messages"][-1]["content"] == "actually, keep the README"
    assert llm.requests[1]["messages"][-2]["content"] == "First answer."


def test_a_queued_line_never_answers_a_question_and_can_be_taken_back(term, project, llm):
    answer = threading.Event()
    llm.reply(tool="create_file", path="typed.txt", content="x\n", wait=answer)
    llm.reply(text="Fine.")
    child = term()
    child.sendline("make a file")
    child.expect("thinking")
    child.send("yes\r")  # meant for something else: the question is not asked yet
    child.expect("queued › yes")
    child.send("\x7f\x7f\x7fah")  # Backspace on an empty line takes it back to edit
    child.expect(r"› yah")
    answer.set()
    child.expect(r"\[y\]es/\[n\]o")
    child.sendline("n")
    child.expect("Fine.")
    child.expect("› yah")  # not sent: back in the prompt, to edit or send
    assert not (project / "typed.txt").exists()
    assert len(llm.requests) == 2
    assert llm.requests[1]["messages"][-1]["content"].startswith("Edit declined")
    child.sendline("")
    child.expect("no scripted reply left")
    assert llm.requests[2]["messages"][-1]["content"] == "yah"


def test_one_undo_after_edit_then_tests_takes_back_the_edit(term, project, llm):
    """The README's example: "edit, then run the tests" in one turn; the test run only made a cache
    (which /undo leaves, and says so), so one plain /undo takes back the edit."""
    tests = "mkdir -p .pytest_cache/v/cache && echo '*' > .pytest_cache/.gitignore"
    tests += " && echo [] > .pytest_cache/v/cache/nodeids && echo 1 passed"
    edit = {"path": "README.md", "old_str": "demo", "new_str": "shouting"}
    llm.reply(tool="edit_file", **edit).reply(tool="shell_command", command=tests)
    llm.reply(text="Edited; tests pass.")
    child = term()
    child.sendline("edit the README, then run the tests")
    for _ in range(2):  # the edit, then the command
        child.expect(r"\[y\]es/\[n\]o")
        child.sendline("y")
    child.expect(r"/undo leaves \.pytest_cache/ \(git ignores it\)")
    child.expect("Edited; tests pass.")
    child.expect("›")
    assert (project / "README.md").read_text() == "# shouting\n"
    child.sendline("/undo")
    child.expect("taking back: \\[amas\\] edit README.md")
    child.expect("undone: README.md")
    child.expect("›")
    assert (project / "README.md").read_text() == "# demo\n"


def test_ctrl_c_cancels_a_turn_even_when_amas_was_started_with_it_ignored(term, llm):
    """A script's background job starts its children with SIGINT ignored; a REPL on a terminal
    started that way still stops a turn on Ctrl+C."""
    from conftest import FRESH

    llm.reply(text="Too late.", wait=10)
    child = term(argv=["/bin/sh", "-c", 'trap "" INT; exec "$0" "$@"', *FRESH])
    child.sendline("a slow question")
    child.expect("thinking")
    child.sendintr()
    child.expect("cancelled")
    child.expect("›")


def test_waiting_says_how_long_and_how_to_stop(term, llm):
    answer, rest = threading.Event(), threading.Event()
    llm.reply(text="Late answer " * 40, wait=answer, hold=rest)
    child = term()
    child.sendline("slow one")
    seconds = set()
    for _ in range(50):  # bounded: the counter is redrawn in place eight times a second
        child.expect(r"thinking… \((\d+) s · Esc to interrupt\)")
        seconds.add(child.match[1])
        if len(seconds) > 1:
            break
    assert len(seconds) > 1  # two screens, two different counts
    answer.set()
    child.expect(r"answering… \(\d+ s · 1 token · Esc to interrupt\)")  # held after it
    rest.set()
    child.expect("›")
    child.sendeof()  # Ctrl+D: how to come back
    child.expect(r"resume this conversation with `amas -c`")


def test_ctrl_c_keeps_the_answer_shown_once(term, llm):
    """Ctrl+C while a long block of the answer is being written (more than the terminal takes at
    once): rich kept what the interrupted print had buffered and wrote it again with the next one,
    so every line of the block was shown twice."""
    paragraphs = [f"Paragraph {n} says something about the code." for n in range(400)]
    # the whole text in one piece, and nothing after it: Ctrl+C comes while it is written
    llm.reply(text="\n\n".join(paragraphs), piece=40_000, hold=threading.Event())
    child = term()
    child.logfile_read = log = io.StringIO()  # the whole screen, to read what stays
    child.sendline("explain")
    child.expect("Paragraph 12 says")
    child.sendintr()
    child.expect("cancelled")
    child.expect("›")
    shown = [line for line in test_terminal.settled(log.getvalue()) if "Paragraph" in line]
    assert shown and len(shown) == len(set(shown)), shown  # each finished line once


def test_ctrl_c_on_a_command_keeps_its_output_for_the_screen_and_the_model(term, llm):
    command = "for i in 1 2 3; do echo line-$i; done; sleep 30; echo line-4"
    llm.reply(tool="shell_command", command=command).reply(text="Stopped, I see.")
    child = term()
    child.logfile_read = log = io.StringIO()
    child.sendline("count")
    child.expect(r"\[y\]es/\[n\]o")
    child.sendline("y")
    child.expect("│ line-3")
    child.sendintr()
    child.expect("cancelled")
    child.expect("›")
    kept = "\n".join(test_terminal.settled(log.getvalue()))
    assert "│ line-2" in kept and "│ line-3" in kept  # still on the screen
    child.sendline("what happened?")
    child.expect("Stopped, I see.")
    result = [m for m in llm.requests[1]["messages"] if m["role"] == "tool"][-1]["content"]
    assert "line-1\nline-2\nline-3" in result and "line-4" not in result
    assert re.search(r"\[stopped by the user after [0-9.]+ s\]", result), result


# -- rendering (issue 42 item 6) -------------------------------------------------------------------


def spawn(project, llm, columns: int) -> pexpect.spawn:
    """amas in a terminal of the given width (rich asks the terminal: no COLUMNS)."""
    from conftest import amas_argv, amas_env

    from amas_code import home as amas_home

    amas_home.set_trust(project, True)
    env = amas_env(llm, PROMPT_TOOLKIT_NO_CPR="1", TERM="xterm", NO_COLOR="1")
    env.pop("COLUMNS")
    argv = amas_argv()
    return pexpect.spawn(
        argv[0], argv[1:], cwd=str(project), env=env, encoding="utf-8", timeout=30,
        dimensions=(40, columns),
    )  # fmt: skip


def words_kept(lines: list[str], start: str, end: str, columns: int) -> str:
    """The text from the line starting with start to the one holding end,
    checked to fit the width."""
    first = next(i for i, line in enumerate(lines) if line.startswith(start))
    last = next(i for i in range(first, len(lines)) if end in lines[i])
    block = lines[first : last + 1]
    assert all(len(line) <= columns for line in block), block
    return " ".join(line.strip() for line in block)


@pytest.mark.parametrize("columns", [60, 80, 120])
def test_lines_wrap_at_words_and_lists_keep_their_indent(project, llm, columns):
    items = [f"{n}. step number {n} of the plan" for n in range(1, 13)]
    llm.reply(text="Plan:\n\n" + "\n".join(items), delay=0.01)
    child = spawn(project, llm, columns)
    try:
        child.logfile_read = log = io.StringIO()
        child.expect("›")
        child.sendline("plan it")
        child.expect("step number 12")
        child.expect("›")
        child.sendline("/tokens")
        child.expect("tokens of")
        child.expect("›")
    finally:
        child.close(force=True)
    lines = test_terminal.settled(log.getvalue())
    banner = words_kept(lines, "ℹ amas ·", "quit", columns)
    assert "Esc-Enter for a new line, Ctrl+D to quit" in banner  # no word cut in two
    tokens = words_kept(lines, "ℹ prompt", "tokens of", columns)
    assert re.search(
        r"cost \$[0-9.]+( \(some calls had no known price\))?; conversation now", tokens
    )
    steps = [line for line in lines if "step number" in line]
    assert len(steps) == 12 and len({line.index("step") for line in steps}) == 1, steps


def test_without_a_terminal_nothing_is_hard_wrapped(project, llm):
    from conftest import run_amas

    long = "word " * 60
    llm.reply(tool="shell_command", command=f"echo {long}").reply(text="Echoed.")
    result = run_amas("-y", "echo it", llm=llm)
    assert f"● shell_command echo {long.strip()}" in result.stderr
    assert f"  │ {long.strip()}\n" in result.stderr  # the output line whole
