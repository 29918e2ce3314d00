"""The REPL in a real pseudo-terminal, typed at as a person would."""

import pexpect
from conftest import git, history_file


def test_edit_yes_edit_no_help_undo_quit(repl, project, llm):
    llm.reply(tool="edit_file", path="README.md", old_str="# demo", new_str="# Demo Project")
    llm.reply(text="Renamed the title.")
    llm.reply(tool="edit_file", path="README.md", old_str="# Demo Project", new_str="# Nope")
    llm.reply(text="Left it alone.")
    child = repl()
    child.sendline("rename the title")
    # \S*: a style
    child.expect(r"Apply edit to README\.md\?\S* \[y\]es/\[n\]o/\[a\]lways.*instead:")
    child.sendline("y")
    child.expect("Renamed the title.")
    child.expect("›")
    assert (project / "README.md").read_text() == "# Demo Project\n"

    child.sendline("rename it again")
    child.expect(r"Apply edit to README\.md\?")
    child.sendline("n")
    child.expect("Left it alone.")
    child.expect("›")
    assert (project / "README.md").read_text() == "# Demo Project\n"
    assert llm.requests[3]["messages"][-1]["content"] == "Edit declined by user."

    child.sendline("/help")
    child.expect("/undo")
    child.expect("/redo")
    child.expect("›")
    child.sendline("/checkpoint")
    child.expect("edit README.md")
    child.expect("›")
    child.sendline("/und")  # a unique prefix selects the command
    child.expect("undone: README.md")
    child.expect("›")
    assert (project / "README.md").read_text() == "# demo\n"
    child.sendline("/redo")
    child.expect("redone: README.md")
    child.sendline("/nonsense")
    child.expect("unknown command /nonsense, /help lists them")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert (project / "README.md").read_text() == "# Demo Project\n"
    # checkpoints live outside the user's repository
    assert git(project, "log", "--format=%s") == "initial\n"


def test_always_accepts_rest_of_session_and_ctrl_d_quits(repl, project, llm):
    llm.reply(tool="create_file", path="a.txt", content="a\n").reply(
        tool="create_file", path="b.txt", content="b\n"
    ).reply(text="Both made.")
    child = repl()
    child.sendline("make two files")
    child.expect(r"Apply create to a\.txt\?")
    child.sendline("a")
    child.expect("Both made.")
    child.expect("›")
    assert (project / "b.txt").read_text() == "b\n"
    child.sendeof()
    child.expect(pexpect.EOF)


def test_continue_sees_previous_turn_and_history_is_jsonl(repl, project, llm):
    import json

    llm.reply(text="The answer is 42.")
    child = repl()
    child.sendline("what is the answer?")
    child.expect("The answer is 42.")
    child.expect("›")
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    lines = history_file(project).read_text().splitlines()
    entries = [json.loads(line) for line in lines]
    assert [e["role"] for e in entries] == ["user", "assistant"]
    assert len({e["session"] for e in entries}) == 1 and all(e["time"] > 0 for e in entries)

    history_file(project).open("a").write("{corrupt\n")
    llm.reply(text="You asked about the answer.")
    child = repl("--continue")
    child.sendline("what did I ask?")
    child.expect("You asked about the answer.")
    messages = llm.requests[-1]["messages"]
    assert [m["content"] for m in messages[1:]] == [
        "what is the answer?",
        "The answer is 42.",
        "what did I ask?",
    ]


def test_up_arrow_history_persists(repl, project, llm):
    llm.reply(text="first reply")
    child = repl()
    child.sendline("remember this line")
    child.expect("first reply")
    child.expect("›")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    assert "remember this line" in history_file(project, "input_history").read_text()


def test_other_commands_multiline_and_completion(repl, project, llm):
    (project / "notes.md").write_text("attached content\n")
    (project / ".amas/skills").mkdir(parents=True, exist_ok=True)
    (project / ".amas/skills/deploy.md").write_text(
        "---\ndescription: Ship it\n---\nUse the deploy script.\n"
    )
    llm.reply(text="Got both lines.").reply(text="after clear")
    child = repl()
    # Tab completes the slash command (drawn in pieces, with cursor codes between)
    child.send("/he\t")
    child.expect(r"/he(\x1b\[[0-9;?]*[a-zA-Z])*lp")
    child.sendline("")
    child.expect("/attach")
    child.expect("›")
    child.sendline("/attach missing.txt")
    child.expect("cannot attach missing.txt: no such file")
    child.send("/attach not\t")  # Tab completes a file path too
    child.expect("es.md")
    child.sendline("")
    child.expect("attached notes.md")
    child.send("line one\x1b\r")  # Esc-Enter: a new line, not sent yet
    child.sendline("line two about deploy")
    child.expect("Got both lines.")
    child.expect("›")
    assert llm.requests[0]["messages"][-1]["content"] == (
        "Attached file notes.md:\n```\nattached content\n\n```\n\nline one\nline two about deploy"
    )
    child.sendline("/skills")
    child.expect("active")
    child.expect("deploy")
    child.sendline("/tokens")
    child.expect(r"prompt 10 \+ completion 5 tokens")
    child.sendline("/model openai/other-model")
    child.expect("model: openai/other-model")
    child.sendline("/clear")
    child.expect("new conversation")
    child.sendline("fresh start")
    child.expect("after clear")
    assert llm.requests[1]["model"] == "other-model"
    assert [m["role"] for m in llm.requests[1]["messages"]] == ["system", "user"]
    child.sendline("/init")
    child.expect("mapped")
    child.expect("›")
    assert (project / ".amas/project_map.md").is_file()
    child.sendline("/quit")
    child.expect(pexpect.EOF)


def test_a_ctrl_c_while_waiting_for_the_preload_leaves_the_next_wait_waiting(agent, monkeypatch):
    """Python 3.11's Thread.join, interrupted by Ctrl+C while the thread runs, releases that
    thread's lock and marks it finished: the next turn then imported litellm beside the preload
    thread still importing it, and hung. The wait now holds until the preload is really done."""
    import _thread
    import signal
    import threading
    import time

    from amas_code import providers

    finished = threading.Event()
    monkeypatch.setattr(providers, "load", lambda: time.sleep(1) or finished.set())
    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # as amas runs
    try:
        providers.preload()
        threading.Timer(0.3, _thread.interrupt_main).start()
        try:
            agent.wait_for_preload()
        except KeyboardInterrupt:
            pass
        assert not finished.is_set()  # the Ctrl+C came while it was still loading
        agent.wait_for_preload()
    finally:
        signal.signal(signal.SIGINT, before)
    assert finished.is_set()
