"""Wording and small cuts the person met (issue 42 items 9 and 10)."""

from conftest import run_amas

from amas_code import repl, ui


def test_a_diff_of_an_absolute_path_has_no_a_slash_slash_header():
    shown = ui.diff("old\n", "new\n", "/tmp/x").plain
    assert "--- /tmp/x\n+++ /tmp/x" in shown and "a//" not in shown
    assert ui.diff_summary(shown) == "1 file changed: 1 line added, 1 removed"


def test_the_command_question_fits_one_line_and_says_each_scope_above_it(monkeypatch):
    asked = []
    monkeypatch.setattr(ui, "_answer", lambda asked_: asked.append(asked_) or ("n", ""))
    always = "this exact command in this project, from now on; /permissions lists it"
    session = "this exact command, until amas exits"
    ui.question("Run `pytest -q tests/test_dates.py`?", None, {"s": session, "a": always})
    prompt, detail = asked[0].prompt.plain, asked[0].detail.plain
    assert "[y]es/[n]o/[s]ession/[a]lways" in prompt and len(prompt) <= 80, prompt
    assert f"[s]ession: {session}\n[a]lways: {always}" in detail  # said on lines of their own
    assert "or type what to do instead" in detail  # the hint moved above: the prompt fits
    ui.question("Apply edit to app.py?", None, {"s": "", "a": "the rest of this session's edits"})
    assert asked[1].prompt.plain.endswith("[y]es/[n]o/[a]lways, or say what instead: ")


def test_compact_refuses_a_summary_that_is_not_one(agent, llm, capsys):
    llm.reply(text="First answer.").reply(text="Second answer.").reply(text="OK.")
    agent.turn("first question")
    agent.turn("second question")
    before = [dict(m) for m in agent.messages]
    capsys.readouterr()
    repl.command(agent, "/compact")
    err = capsys.readouterr().err
    assert "is not a summary; nothing changed" in err and "freed" not in err
    assert agent.messages == before


def test_at_completion_never_offers_git(project):
    from prompt_toolkit.completion import CompleteEvent
    from prompt_toolkit.document import Document

    offered = [c.text for c in repl.completer().get_completions(Document("@."), CompleteEvent())]
    assert not [t for t in offered if t.startswith("git")], offered


def test_a_rate_limit_in_a_one_shot_does_not_suggest_model(project, llm):
    for _ in range(6):
        llm.error(429, "slow down", kind="rate_limit_error", headers={"Retry-After": "0"})
    result = run_amas("hello", llm=llm)
    assert result.returncode == 1 and "429" in result.stderr
    assert "/model" not in result.stderr and "-m another model" in result.stderr


def test_at_path_in_a_one_shot_prompt_attaches_the_file(project, llm):
    (project / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    llm.reply(text="It adds.")
    result = run_amas("explain @calc.py", llm=llm)
    assert result.returncode == 0 and "attached calc.py" in result.stderr
    sent = llm.requests[0]["messages"][-1]["content"]
    assert "Attached file calc.py:\n```\ndef add(a, b):" in sent and sent.endswith(
        "explain @calc.py"
    )


def test_an_at_word_that_names_no_file_is_sent_as_written_in_a_one_shot(project, llm):
    (project / "functools").mkdir()  # a folder by that first name, as a package would have
    llm.reply(text="Use it for pure functions.")
    result = run_amas("should this use @functools.cache? see @nothere.py", llm=llm)
    assert result.returncode == 0, result.stderr
    assert "cannot attach" not in result.stderr and "attached" not in result.stderr
    sent = llm.requests[0]["messages"][-1]["content"]
    assert sent == "should this use @functools.cache? see @nothere.py"
