"""The person at the terminal, round 2 (issue 42): what is typed while the model works is kept,
waiting says how long, and Ctrl+C keeps what was shown."""

import io
import re
import time

import test_terminal

term = test_terminal.term  # the 120-column terminal, in colour


def test_a_line_typed_during_a_turn_is_the_next_message(term, llm):
    llm.reply(text="First answer.", wait=3).reply(text="Kept it.")
    child = term()
    child.sendline("start")
    child.expect("thinking")
    time.sleep(1.5)
    child.sendline("actually, keep the README")
    child.expect("queued › actually, keep the README")
    child.expect("Kept it.")
    assert llm.requests[1]["messages"][-1]["content"] == "actually, keep the README"
    assert llm.requests[1]["messages"][-2]["content"] == "First answer."


def test_a_queued_line_never_answers_a_question_and_can_be_taken_back(term, project, llm):
    llm.reply(tool="create_file", path="typed.txt", content="x\n", wait=2).reply(text="Fine.")
    child = term()
    child.sendline("make a file")
    child.expect("thinking")
    child.send("yes\r")  # meant for something else: the question is not asked yet
    child.expect("queued › yes")
    child.send("\x7f\x7f\x7fah")  # Backspace on an empty line takes it back to edit
    child.expect(r"› yah")
    child.expect(r"\[y\]es/\[n\]o")
    child.sendline("n")
    child.expect("Fine.")
    child.expect("› yah")  # not sent: back in the prompt, to edit or send
    assert not (project / "typed.txt").exists()
    assert len(llm.requests) == 2
    child.sendline("")
    child.expect("no scripted reply left")
    assert llm.requests[2]["messages"][-1]["content"] == "yah"


def test_waiting_says_how_long_and_how_to_stop(term, llm):
    llm.reply(text="Late answer " * 40, wait=2.5, delay=0.05)
    child = term()
    child.sendline("slow one")
    seconds = set()
    for _ in range(50):  # bounded: the counter is redrawn in place eight times a second
        child.expect(r"thinking… \((\d+) s · Ctrl\+C to interrupt\)")
        seconds.add(child.match[1])
        if len(seconds) > 1:
            break
    assert len(seconds) > 1  # two screens, two different counts
    child.expect(r"answering… \(\d+ s · \d+ tokens · Ctrl\+C to interrupt\)")
    child.expect("›")


def test_ctrl_c_keeps_the_answer_shown_once(term, llm):
    paragraphs = [f"Paragraph {n} says something about the code." for n in range(30)]
    llm.reply(text="\n\n".join(paragraphs), delay=0.03)
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
    command = "for i in 1 2 3 4 5 6 7 8 9; do echo line-$i; sleep 0.4; done"
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
    assert "line-1\nline-2\nline-3" in result
    assert re.search(r"\[stopped by the user after [0-9.]+ s\]", result), result
