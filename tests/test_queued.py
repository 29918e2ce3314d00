"""The person at the terminal, round 3 (issue 47): what is typed during a turn is handled as what it
is, answers are read as people give them, Esc interrupts, and the waiting line counts from Enter."""

import io
import re
import threading
import time

import pexpect
from conftest import FRESH, amas_env
from test_terminal import screen, settled

from amas_code import home as amas_home

QUESTION = r"\[y\]es/\[n\]o"
WORDS = " ".join(f"word{n}" for n in range(90))


def upto(child, pattern) -> str:
    """Everything the terminal showed until pattern, pattern included, as text."""
    child.expect(pattern)
    return screen(child.before + child.after)


def logged(child) -> io.StringIO:
    child.logfile_read = log = io.StringIO()
    return log


def test_a_slash_command_typed_while_the_answer_streams_runs_as_that_command(repl, project, llm):
    rest = threading.Event()  # the answer pauses after its first words until the lines are typed
    llm.reply(tool="create_file", path="a.txt", content="one\n").reply(text=WORDS, hold=rest)
    child = repl("-y")
    log = logged(child)
    child.sendline("make a.txt")
    child.expect("answering")  # the answer is streaming: a natural moment to type
    for line in ("/undo", "!echo typed-ahead", "carry on", "/quit", "one more thing"):
        child.send(line + "\r")
    child.expect("queued › one more thing")
    llm.reply(text="Carrying on.")
    rest.set()
    child.expect("undone: a.txt")  # /undo ran as /undo, in its turn
    child.expect("typed-ahead")
    child.expect("Carrying on.")
    child.expect("left as you quit: one more thing")  # /quit as /quit; what follows is said
    child.expect(pexpect.EOF)
    shown = settled(log.getvalue())
    assert not (project / "a.txt").exists()
    assert not [row for row in shown if "unknown command" in row], shown
    ran = [row for row in shown if re.match(r"› (/undo|!echo typed-ahead|carry on|/quit)$", row)]
    assert ran == ["› /undo", "› !echo typed-ahead", "› carry on", "› /quit"]  # each, in order
    sent = llm.requests[2]["messages"][-1]["content"]
    assert "with /undo the user took back your changes to a.txt" in sent
    assert "The user ran a command themselves" in sent and "typed-ahead" in sent
    assert sent.endswith("carry on") and "/undo\n" not in sent and "/quit" not in sent
    assert len(llm.requests) == 3


def test_text_lines_typed_during_a_turn_go_as_one_message_and_it_is_said(repl, llm):
    rest = threading.Event()
    llm.reply(text=WORDS, hold=rest).reply(text="Both read.")
    child = repl()
    child.sendline("start")
    child.expect("answering")
    child.send("first thought\r")
    child.send("second thought\r")
    child.expect("queued › second thought")
    rest.set()
    child.expect("the 2 lines typed during the turn go as one message")
    child.expect("Both read.")
    assert llm.requests[1]["messages"][-1]["content"] == "first thought\nsecond thought"


def test_a_queued_y_stays_listed_under_the_question_and_is_not_sent(repl, project, llm):
    answer = threading.Event()
    llm.reply(tool="create_file", path="typed.txt", content="x\n", wait=answer)
    llm.reply(text="Fine.")
    child = repl()
    child.sendline("make a file")
    child.expect("thinking")
    child.send("y\r")  # a moment before the question appears
    child.expect("queued › y")
    answer.set()
    seen = upto(child, QUESTION)
    above = seen[seen.rindex("+++ b/typed.txt") :]  # between the diff and the question
    assert "queued › y" in above and "typed before this question, so not its answer" in above
    child.sendline("n")
    child.expect("Fine.")
    child.expect("'y' was typed during the turn and answers no question")
    child.expect("Ctrl\\+C drops it")
    child.expect("› y")  # waiting in the prompt, not sent
    assert not (project / "typed.txt").exists()
    child.sendintr()  # dropped
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    assert len(llm.requests) == 2
    assert llm.requests[1]["messages"][-1]["content"].startswith("Edit declined")


def test_yes_please_ok_and_sure_are_yes_and_nope_is_no(repl, project, llm):
    for name in ("a", "b", "c", "d"):
        llm.reply(tool="create_file", path=f"{name}.txt", content=f"{name}\n")
    llm.reply(text="Done.")
    child = repl()
    child.sendline("make four files")
    for said in ("yes please", "ok", "Sure!", "nope"):
        child.expect(QUESTION)
        child.sendline(said)
    child.expect("Done.")
    made = [name for name in "abcd" if (project / f"{name}.txt").exists()]
    assert made == ["a", "b", "c"]
    assert llm.requests[4]["messages"][-1]["content"] == "Edit declined by user."  # no feedback


def test_a_word_that_is_no_answer_is_asked_again_not_declined(repl, project, llm):
    llm.reply(tool="create_file", path="a.txt", content="a\n").reply(text="Made.")
    child = repl()
    child.sendline("make a file")
    child.expect(QUESTION)
    child.sendline("yess")
    child.expect("answer y, n or a, or tell the agent what to do instead")
    child.sendline("y")
    child.expect("Made.")
    assert (project / "a.txt").read_text() == "a\n"


def test_esc_interrupts_a_turn_as_ctrl_c_does(repl, llm):
    llm.reply(text="Too late.", wait=threading.Event())  # never, unless interrupted
    child = repl()
    child.sendline("a slow question")
    child.expect(r"thinking… \(\d+ s · Esc to interrupt\)")
    child.send("\x1b")
    child.expect("cancelled; the conversation is kept")
    child.expect("›")
    # a next message is not sent here: after an interrupted request, the model library's next
    # request on the same connection reads the old answer (a provider-side defect, reported)
    child.sendline("/tokens")
    child.expect("conversation now")
    assert "Too late." not in screen(child.before)


def test_a_command_shows_its_limit_and_esc_stops_it(repl, project, llm):
    llm.reply(tool="shell_command", command="echo started; sleep 20").reply(text="Stopped it.")
    child = repl("-y")
    child.sendline("wait a while")
    child.expect(r"\(\d+ s of 30 s · Esc to interrupt\)")  # the limit is shell_timeout
    child.expect("│ started")
    child.send("\x1b")
    child.expect("cancelled")
    child.expect("›")


def test_the_waiting_line_counts_from_enter_while_the_model_library_loads(project, llm):
    (project / ".amas").mkdir()
    (project / ".amas/config.yaml").write_text("preload: true\n")
    amas_home.set_trust(project, True)  # as it is now, with its config
    llm.reply(text="Here it is.", wait=2)
    env = amas_env(llm, PROMPT_TOOLKIT_NO_CPR="1", TERM="xterm", NO_COLOR="1", COLUMNS="120")
    # litellm not imported yet: the preload is still importing it when Enter is pressed
    child = pexpect.spawn(FRESH[0], FRESH[1:], cwd=str(project), env=env, encoding="utf-8",
                          timeout=60, dimensions=(40, 120))  # fmt: skip
    child.expect("›")
    child.sendline("hello")
    enter = time.monotonic()
    counted = []
    while child.expect([r"thinking… \((\d+) s", "Here it is."]) == 0:
        counted.append(int(child.match[1]))
    waited = time.monotonic() - enter
    assert counted == sorted(counted), counted  # never back to 0 once the library loaded
    assert counted[-1] >= int(waited) - 1, (counted, waited)


def test_after_esc_the_lines_typed_meanwhile_come_back_one_at_a_time(repl, project, llm):
    llm.reply(text="Too late.", wait=threading.Event())  # never, unless interrupted
    child = repl()
    child.sendline("a slow question")
    child.expect("thinking")
    child.send("/diff\r")
    child.send("and another thing\r")
    child.expect("queued › and another thing")
    child.send("\x1b")
    child.expect("cancelled")
    child.expect("2 lines typed meanwhile come back in the prompt one at a time")
    child.expect("› /diff")  # not run by itself: Enter runs it
    child.sendline("")
    child.expect("the agent changed nothing in this session")
    child.expect("› and another thing")
    child.sendintr()  # dropped
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    assert len(llm.requests) == 1
