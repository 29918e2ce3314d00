"""The person at the terminal, round 2 (issue 42): what is typed while the model works is kept,
waiting says how long, and Ctrl+C keeps what was shown."""

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
