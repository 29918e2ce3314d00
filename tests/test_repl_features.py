"""The REPL as a person uses it (issue 30): !command, @path, what the model is told after /undo,
the folder the user is in, -c showing
where the conversation stood, Ctrl+C keeping a partial answer."""

import time

import pexpect
import pytest
from conftest import run_amas


def last_user(request: dict) -> str:
    return request["messages"][-1]["content"]


def test_bang_runs_a_command_as_the_user_and_the_model_sees_it(repl, project, llm):
    child = repl()
    child.sendline("!echo made-by-the-user > mine.txt && cat mine.txt")
    child.expect("exit code 0")  # after the output
    child.expect("›")
    assert (project / "mine.txt").read_text() == "made-by-the-user\n"  # no question asked
    assert llm.requests == []  # nothing sent until the next message
    llm.reply(text="I see it.")
    child.sendline("what did my command print?")
    child.expect("I see it.")
    sent = last_user(llm.requests[-1])
    assert "The user ran a command themselves" in sent and "made-by-the-user" in sent
    assert sent.endswith("what did my command print?")


def test_at_path_attaches_the_file_and_a_word_that_names_none_stays_text(repl, project, llm):
    (project / "notes.txt").write_text("the notes say 42\n")
    (project / "docs").mkdir()
    llm.reply(text="No such file here.")
    child = repl()
    child.sendline("what is in @missing.txt")  # no file: the message goes as written
    child.expect("No such file here.")
    child.expect("›")
    assert last_user(llm.requests[-1]) == "what is in @missing.txt"
    llm.reply(text="It says 42.")
    child.sendline("summarize @notes.txt please")
    child.expect("attached notes.txt")
    child.expect("It says 42.")
    sent = last_user(llm.requests[-1])
    assert "Attached file notes.txt" in sent and "the notes say 42" in sent
    llm.reply(text="Decorators.")
    child.sendline("tell me about @property decorators and @functools.cache?")  # words, not files
    child.expect("Decorators.")
    assert last_user(llm.requests[-1]) == "tell me about @property decorators and @functools.cache?"
    llm.reply(text="A folder.")
    child.sendline("what is in @docs")  # a folder cannot be attached: said, and sent all the same
    child.expect("not attached @docs: it is a folder")
    child.expect("A folder.")
    assert last_user(llm.requests[-1]) == "what is in @docs"


def test_after_undo_the_next_request_says_what_was_taken_back(repl, project, llm):
    llm.reply(tool="create_file", path="a.txt", content="one\n").reply(text="Created.")
    child = repl("-y")
    child.sendline("make a.txt")
    child.expect("Created.")
    child.expect("›")
    child.sendline("/undo")
    child.expect("undone: a.txt")
    child.expect("›")
    assert not (project / "a.txt").exists()
    llm.reply(text="Noted.")
    child.sendline("carry on")
    child.expect("Noted.")
    sent = last_user(llm.requests[-1])
    assert "with /undo the user took back your changes to a.txt" in sent
    assert sent.endswith("carry on")


def test_the_folder_the_user_is_in_is_in_the_system_prompt(project, llm, monkeypatch):
    (project / "src" / "pkg").mkdir(parents=True)
    monkeypatch.chdir(project / "src" / "pkg")
    llm.reply(text="ok")
    assert run_amas("hello", llm=llm).returncode == 0
    system = llm.requests[0]["messages"][0]["content"]
    assert "The user is in src/pkg/" in system
    monkeypatch.chdir(project)
    llm.reply(text="ok")
    run_amas("hello", llm=llm)
    assert "The user is in" not in llm.requests[1]["messages"][0]["content"]


def test_continue_shows_the_last_exchange_before_the_prompt(repl, project, llm):
    llm.reply(text="The answer is forty-two.")
    assert run_amas("what is the answer?", llm=llm).returncode == 0
    child = repl("-c", wait=False)
    child.expect("user: .*what is the answer\\?")
    child.expect("assistant: .*The answer is forty-two.")
    child.expect("›")


def test_ctrl_c_keeps_the_partial_answer_marked_interrupted(repl, project, llm):
    words = " ".join(f"word{i}" for i in range(200))
    llm.reply(text=words, delay=0.05)
    child = repl()
    child.sendline("talk a lot")
    child.expect("word3")
    child.sendintr()
    child.expect("cancelled")
    child.expect("›")
    llm.reply(text="ok")
    child.sendline("go on")
    child.expect("ok")
    kept = llm.requests[-1]["messages"][-2]
    assert kept["role"] == "assistant" and kept["content"].startswith("word0 word1")
    assert kept["content"].endswith("[interrupted by the user]")


def test_a_secret_typed_at_the_prompt_is_kept_redacted(repl, project, home, llm):
    token = "ghp_" + "a1B2c3D4e5" * 4
    llm.reply(text="ok")
    child = repl()
    child.sendline(f"use the token {token}")
    child.expect("a secret in your message is hidden")
    child.expect("ok")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    stored = [p for p in [*home.rglob("input_history"), *project.rglob("input_history")]]
    assert stored and all(token not in p.read_text() for p in stored)
    assert any("[REDACTED]" in p.read_text() for p in stored)
    assert token not in last_user(llm.requests[-1])


def test_resume_lists_conversations_and_opens_the_chosen_one(repl, project, llm):
    llm.reply(text="First answer.").reply(text="Second answer.")
    assert run_amas("the first question", llm=llm).returncode == 0
    assert run_amas("the second question", llm=llm).returncode == 0
    child = repl("--resume", wait=False)
    child.expect("1\\. .*2 messages.*the second question")
    child.expect("2\\. .*2 messages.*the first question")
    child.expect("Open which")
    child.sendline("2")
    child.expect("assistant: .*First answer.")
    child.expect("›")
    llm.reply(text="ok")
    child.sendline("and then?")
    child.expect("ok")
    said = [m["content"] for m in llm.requests[-1]["messages"][1:]]
    assert said == ["the first question", "First answer.", "and then?"]


@pytest.mark.parametrize("model", ["openai/test-model", "custom_openai/test-model"])
def test_a_request_interrupted_while_waiting_never_answers_the_next_message(
    repl, project, llm, model
):
    """Ctrl+C (or Esc) while the model had not answered yet left litellm's connection in its pool:
    the next message went out on it and got the interrupted request's answer (both paths)."""
    llm.reply(text="Too late.", wait=2)
    llm.reply(text="Fresh answer.")
    child = repl("-m", model)
    child.sendline("first")
    child.expect("thinking")
    deadline = time.monotonic() + 20
    while len(llm.script) == 2 and time.monotonic() < deadline:  # until the server has it
        time.sleep(0.02)
    child.sendintr()
    child.expect("cancelled")
    child.expect("›")
    child.sendline("second")
    child.expect("Fresh answer.")
    assert "Too late." not in child.before
