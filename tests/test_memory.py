"""Memory that lasts across sessions (issue 54): the user's notes in ~/.amas, two tiers (long-term,
and short-term notes that expire), /remember and /memory in the REPL, the model's memory tool asked
every time, the relevant notes in the system prompt."""

import datetime
import json

from conftest import amas_home, run_amas

NOTE = "the tests run with make check"


def system(request: dict) -> str:
    return request["messages"][0]["content"]


def memory_file(project):
    return amas_home.state_file(project, "memory.md")


def test_a_note_remembered_in_one_session_steers_the_next_until_forgotten(repl, project, llm):
    child = repl()
    child.sendline(f"/remember {NOTE}")
    child.expect("remembered")
    child.sendline("# the user prefers tabs")  # the one-line shortcut
    child.expect("remembered the user prefers tabs")
    child.sendline("/quit")
    child.expect("bye")
    assert f"- {NOTE}\n" in memory_file(project).read_text()  # plain Markdown a person can edit
    llm.reply(text="ok")
    run_amas("how do I run the tests?", llm=llm)
    assert f"- {NOTE}" in system(llm.requests[-1]) and "### Memory" in system(llm.requests[-1])
    child = repl()
    child.sendline("/memory")
    child.expect("2. the user prefers tabs")
    child.sendline("/memory forget make check")
    child.expect(f"forgotten: {NOTE}")
    child.sendline("/quit")
    child.expect("bye")
    llm.reply(text="ok")
    run_amas("how do I run the tests?", llm=llm)
    assert NOTE not in system(llm.requests[-1]) and "prefers tabs" in system(llm.requests[-1])


def test_a_short_term_note_expires(project, llm, amas):
    yesterday = datetime.date.today() - datetime.timedelta(days=1)
    tomorrow = datetime.date.today() + datetime.timedelta(days=1)
    path = memory_file(project)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"- the demo is today (until {yesterday})\n- the release is Friday (until {tomorrow})\n"
    )
    llm.reply(text="ok")
    amas("what is coming?")
    assert "the demo is today" not in system(llm.requests[0])
    assert f"the release is Friday [until {tomorrow}]" in system(llm.requests[0])
    assert "the demo is today" not in path.read_text()  # dropped at start


def test_remember_for_some_days_and_for_every_project(repl, project, home, llm):
    child = repl()
    child.sendline("/remember --days 3 the staging server is down")
    soon = datetime.date.today() + datetime.timedelta(days=3)
    child.expect(f"remembered the staging server is down \\[until {soon}\\]")
    child.sendline("/remember --user I write British English")
    child.expect("remembered I write British English \\[yours, every project\\]")
    child.sendline("/quit")
    child.expect("bye")
    assert "- I write British English\n" in (home / ".amas" / "memory.md").read_text()


def test_the_models_store_is_asked_every_time_and_declined_without_a_terminal(project, llm):
    llm.reply(
        tool="memory",
        raw_args=json.dumps({"action": "store", "text": "deploys go through make deploy"}),
    )
    llm.reply(text="noted")
    result = run_amas("--yes", "--output-format", "json", "remember how we deploy", llm=llm)
    said = [m for m in llm.requests[1]["messages"] if m["role"] == "tool"][-1]["content"]
    assert said.startswith("Memory change declined (no terminal to ask the user on)")
    assert not memory_file(project).exists()  # --yes never answers it
    assert json.loads(result.stdout.splitlines()[-1])["exit_code"] == 2


def test_the_models_store_is_shown_and_asked_in_a_terminal(repl, project, llm):
    llm.reply(
        tool="memory",
        raw_args=json.dumps({"action": "store", "text": "deploys go through make deploy"}),
    )
    llm.reply(text="noted")
    child = repl("--yes")
    child.sendline("remember how we deploy")
    child.expect("Keep this note for later sessions")
    child.expect(r"\[y\]es/\[n\]o")  # its question, never by --yes
    child.sendline("y")
    child.expect("noted")
    assert "- deploys go through make deploy\n" in memory_file(project).read_text()
    llm.reply(tool="memory", raw_args=json.dumps({"action": "forget", "text": "make deploy"}))
    llm.reply(text="forgotten")
    child.sendline("forget it")
    child.expect("Forget these notes")
    child.sendline("n")
    child.expect("forgotten")
    assert "make deploy" in memory_file(project).read_text()  # declined: kept


def test_a_note_with_a_key_in_it_is_stored_redacted(repl, project, llm):
    key = "sk-proj-" + "Ab3dE5gH7jK9mN1pQ3sT5vX7zB9"
    llm.reply(tool="memory", raw_args=json.dumps({"action": "search", "text": "deploy"}))
    llm.reply(text="ok")
    child = repl()
    child.sendline(f"/remember the deploy key is {key}")
    child.expect("remembered the deploy key is \\[REDACTED\\]")
    child.sendline("what do you know about deploy?")
    child.expect("ok")
    assert key not in memory_file(project).read_text()
    result = [m for m in llm.requests[1]["messages"] if m["role"] == "tool"][-1]["content"]
    assert result == "- the deploy key is [REDACTED]"


def test_the_prompt_carries_the_relevant_notes_within_its_share(project, llm, amas):
    path = memory_file(project)
    path.parent.mkdir(parents=True, exist_ok=True)
    notes = [f"- note {n} about topic{n} " + "x" * 60 for n in range(40)]
    path.write_text("\n".join([*notes, "- the parser lives in src/parse.py"]) + "\n")
    llm.reply(text="ok")
    amas("where is the parser?")
    prompt = system(llm.requests[0])
    memory = prompt.split("### Memory", 1)[1]
    assert memory.splitlines()[1] == "- the parser lives in src/parse.py"  # its words first
    assert "more: search them with the memory tool" in memory
    assert len(memory) < 2000 // 8 * 3 + 200  # an eighth of the budget, about


def test_memory_edit_opens_the_editor_and_says_plainly_when_it_cannot(
    repl, project, tmp_path, monkeypatch
):
    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\necho "- written in the editor" >> "$1"\n')
    editor.chmod(0o755)
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", str(editor))
    child = repl()
    child.sendline("/memory edit")
    child.expect("saved; the next request reads it")
    assert "- written in the editor\n" in memory_file(project).read_text()
    child.sendline("/quit")
    child.expect("bye")
    monkeypatch.setenv("EDITOR", str(tmp_path / "no-such-editor"))
    child = repl()
    child.sendline("/memory edit")
    child.expect("cannot start the editor")
    child.expect("›")
    said = " ".join(child.before.split())
    assert "No such file or directory" in said and "FileNotFoundError" not in said
    assert "memory.md" in "".join(said.split())  # the file, to edit by hand (a long path wraps)
