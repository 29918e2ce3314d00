"""Resume shows the user's words (issue 42 item 7): the preview after -c, the list of --resume."""

import json

from conftest import history_file, make_config

from amas_code import history, repl

NOTE = "[Note: with /undo the user took back your changes to a.py; read them again before relying]"
RAN = "The user ran a command themselves:\n```\n$ ls\nREADME.md\n[exit code 0]\n```"
ATTACHED = "Attached file a.py:\n```\nx = 1\n```"
CALL = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}


def write(project, entries: list[tuple[str, dict]]) -> None:
    lines = [
        json.dumps({"session": s, "time": 1700000000.0 + n, **m})
        for n, (s, m) in enumerate(entries)
    ]
    history_file(project).write_text("\n".join(lines) + "\n")


def test_continue_previews_what_the_user_typed_and_the_tools_that_ran(project, llm, capsys):
    from amas_code.agent import Agent

    write(project, [
        ("s1", {"role": "user", "content": "first question"}),
        ("s1", {"role": "assistant", "content": "First answer."}),
        ("s1", {"role": "user", "content": f"{NOTE}\n\n{RAN}\n\n{ATTACHED}\n\nexplain a.py"}),
        ("s1", {"role": "assistant", "content": "", "tool_calls": [CALL]}),
        ("s1", {"role": "tool", "tool_call_id": "c1", "content": "x = 1"}),
        ("s1", {"role": "assistant", "content": "It sets x."}),
    ])  # fmt: skip
    agent = Agent(make_config(model="openai/test-model", api_base=llm.url), project, resume=True)
    capsys.readouterr()
    repl.last_exchange(agent)
    shown = capsys.readouterr().err
    assert "user: first question" in shown and "assistant: First answer." in shown
    assert "user: explain a.py" in shown and "tools: read_file" in shown
    assert "It sets x." in shown
    assert "Note:" not in shown and "ran a command" not in shown and "Attached" not in shown


def test_a_compacted_conversation_is_listed_once(project):
    summary = "[Summary of the earlier conversation]\nasked things"
    write(project, [
        ("old", {"role": "user", "content": "how does it work"}),
        ("old", {"role": "assistant", "content": "Like this."}),
        ("new", {"role": "session"}),
        ("new", {"role": "user", "content": summary}),
        ("new", {"role": "assistant", "content": "Understood."}),
        ("new", {"role": "user", "content": "and then?"}),
    ])  # fmt: skip
    listed = history.Log(project).conversations()
    assert [(c["session"], c["first"]) for c in listed] == [("new", "how does it work")]
