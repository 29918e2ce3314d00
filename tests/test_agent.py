"""The agent loop in-process: the system prompt it sends, compaction, text tool calls, Ctrl+C."""

import json

from conftest import count_tokens, history_file, make_config

from amas_code import home as amas_home
from amas_code import repomap
from amas_code.agent import Agent
from amas_code.context import PROMPT_BUDGET


def system(request) -> str:
    return request["messages"][0]["content"]


def test_prompt_has_rules_skills_and_map(agent, project, llm, home):
    (project / ".amas/skills").mkdir(parents=True)
    (project / ".amas/rules.md").write_text("Always use tabs in Makefiles.\n")
    (project / "AGENTS.md").write_text("Run pytest before you finish.\n")
    (project / ".amas/skills/docker.md").write_text(
        "---\nname: docker\ndescription: Build and run containers\n"
        "keywords: [docker, container]\n---\n"
        "Use multi-stage builds and pin base images.\n"
    )
    (project / ".amas/skills/release-notes.md").write_text(
        "# Write release notes\nGroup by Added/Fixed.\n"
    )
    (home / ".amas/skills").mkdir(parents=True)
    (home / ".amas/skills/sql.md").write_text(
        "---\ndescription: SQL style\n---\nUppercase keywords.\n"
    )
    (project / "src").mkdir()
    (project / "src/app.py").write_text("import os\n\n\ndef main():\n    return 0\n")
    repomap.init(project, [])
    amas_home.set_trust(project, True)  # rules and skills come from a folder the user trusts
    agent = Agent(agent.config, project)  # what steers is read at the start, once
    llm.reply(text="ok")
    agent.turn("please fix the Docker build")
    prompt = system(llm.requests[0])
    assert prompt.startswith("You are Amas Code, an elite AI coding assistant")
    assert "Always use tabs in Makefiles." in prompt and "Run pytest before you finish." in prompt
    assert "### Skill: docker\nUse multi-stage builds and pin base images." in prompt
    assert (
        "- release-notes: Write release notes" in prompt and "Group by Added/Fixed." not in prompt
    )
    assert "- sql: SQL style" in prompt and "Uppercase keywords." not in prompt
    assert "src/app.py\n  def main()" in prompt
    assert "# Browser Control & Web Interaction" in prompt


def test_prompt_stays_under_budget_with_a_huge_map(agent, project, llm):
    (project / "pkg").mkdir()
    for i in range(600):
        (project / f"pkg/module_{i}.py").write_text(
            "".join(f"def function_{i}_{j}(a, b):\n    pass\n" for j in range(8))
        )
    repomap.init(project, [])
    llm.reply(text="ok")
    agent.turn("look at pkg/module_599.py please")
    prompt = system(llm.requests[0])
    assert count_tokens(prompt) <= PROMPT_BUDGET
    # the file the user mentioned is ranked first
    assert "pkg/module_599.py\n  def function_599_" in prompt


def test_compact_summarizes_and_next_request_is_smaller(agent, llm):
    for i in range(3):
        llm.reply(text=f"answer {i} " + "words " * 400, piece=1024)  # long: in big chunks
        agent.turn(f"question {i} " + "context " * 400)
    llm.reply(text="SUMMARY: three questions were answered.")
    freed = agent.compact()
    assert freed > 0
    summary_request = llm.requests[3]
    assert "Summarize this conversation" in summary_request["messages"][0]["content"]
    assert (
        "question 0" in summary_request["messages"][1]["content"] and "tools" not in summary_request
    )
    llm.reply(text="fine")
    agent.turn("question 3")
    after = llm.requests[4]["messages"]
    assert "SUMMARY: three questions were answered." in after[1]["content"]
    assert after[-1]["content"] == "question 3"
    assert any(m["content"].startswith("question 2") for m in after)  # the last turns stay verbatim
    assert len(json.dumps(after)) < len(json.dumps(llm.requests[2]["messages"]))


def test_auto_compaction_past_max_context_tokens(agent, llm):
    agent.config["max_context_tokens"] = 1500
    for i in range(3):
        long = " ".join(f"word{n}" for n in range(600))  # long (no loop), in big chunks
        llm.reply(text=long, piece=1024)
        agent.turn(f"turn {i}")
    summaries = [
        r for r in llm.requests if "Summarize this conversation" in r["messages"][0]["content"]
    ]
    assert summaries, "no summarization request was sent"


def test_the_summary_request_fits_a_small_context(agent, llm):
    """A 4k local server: the conversation to summarise is longer than its context, so the
    summary request keeps the transcript's head and tail within it (with room for the summary)."""
    agent.config["max_context_tokens"] = 4096
    for i in range(4):
        llm.reply(text=f"answer {i} " + "words " * 600)
        agent.turn(f"question {i} " + "context " * 300)
    llm.reply(text="SUMMARY: four questions were answered.")
    assert agent.compact() > 0
    summary = next(r for r in llm.requests if "Summarize this" in r["messages"][0]["content"])
    asked = count_tokens(json.dumps(summary["messages"]))
    assert asked + summary["max_tokens"] <= 4096, asked
    assert "question 0" in summary["messages"][1]["content"]  # its head, and its end
    assert "answer 2" in summary["messages"][1]["content"]


def test_text_tool_fallback_when_tools_are_rejected(agent, project, llm, capsys):
    llm.error(400, "model 'tiny' does not support tools")
    llm.reply(
        text="Let me look.\n"
        '<tool_call>{"name": "read_file", "arguments": {"path": "README.md"}}</tool_call>'
    )
    llm.reply(text="The README says demo.")
    llm.reply(text="second turn")
    agent.turn("what is in the README?")
    retry, after_tool = llm.requests[1], llm.requests[2]
    assert "tools" in llm.requests[0] and "tools" not in retry
    assert "<tool_call>" in system(retry)
    assert "- read_file(path: string, offset?: integer, limit?: integer)" in system(retry)
    response = '<tool_response name="read_file">\n     1\t# demo\n</tool_response>'
    assert after_tool["messages"][-1] == {"role": "user", "content": response}
    assert "<tool_call>" in after_tool["messages"][-2]["content"]
    agent.turn("again")
    assert "tools" not in llm.requests[3]  # the fallback holds for the session
    assert capsys.readouterr().err.count("no native tool calling") == 1


def test_ctrl_c_during_a_tool_keeps_messages_valid(agent, llm, monkeypatch):
    llm.reply(calls=[("read_file", '{"path": "README.md"}'), ("list_files", "{}")])
    real = agent.act.outcome

    def outcome(call):
        if call.name == "list_files":
            raise KeyboardInterrupt
        return real(call)

    monkeypatch.setattr(agent.act, "outcome", outcome)
    assert agent.turn("look around") is False
    calls = agent.messages[1]["tool_calls"]
    results = {m["tool_call_id"]: m["content"] for m in agent.messages if m["role"] == "tool"}
    assert set(results) == {c["id"] for c in calls}
    assert results[calls[1]["id"]] == "Cancelled by the user."
    llm.reply(text="ready")
    agent.turn("continue")
    assert llm.requests[-1]["messages"][-1]["content"] == "continue"


def test_repeated_identical_calls_are_pointed_out_then_end_the_turn(agent, llm, capsys):
    for _ in range(6):
        llm.reply(tool="list_files")
    agent.turn("list")
    assert (
        "you have made this same call 3 times in a row"
        in llm.requests[3]["messages"][-1]["content"]
    )
    assert len(llm.requests) == 4  # the fourth identical call ended the turn: no fifth request
    assert (
        "the model made the same list_files call 4 times in a row; turn ended"
        in capsys.readouterr().err
    )
    assert agent.messages[-1]["role"] == "tool"  # every call answered: the next request is valid


def test_near_identical_calls_count_as_repeats_but_different_ones_do_not(agent, llm, capsys):
    # the same up to case and spaces: the model is stuck
    for pattern in (
        "TODO",
        " TODO",
        "todo ",
        "./TODO",
    ):
        llm.reply(tool="search_files", pattern=pattern)
    agent.turn("search")
    assert len(llm.requests) == 4 and "turn ended" in capsys.readouterr().err
    for name in ("read_file", "list_files", "read_file", "list_files", "read_file"):
        llm.reply(tool=name, **({"path": "README.md"} if name == "read_file" else {}))
    llm.reply(text="done")
    agent.turn("alternate")
    assert agent.messages[-1]["content"] == "done" and "turn ended" not in capsys.readouterr().err


def test_empty_reply_is_reported_and_asked_again_once(agent, llm, capsys):
    """After three failed edits and amas's note, the real 1.5B model's reply was empty: the run
    ended with "result": "" and exit 0. Asked once more, it may go on."""
    llm.reply(text="   ").reply(text="")
    assert agent.turn("hi") is True
    assert capsys.readouterr().err.count("the model sent an empty reply") == 2
    assert len(llm.requests) == 2  # once more, not twice
    assert llm.requests[1]["messages"][-1]["content"].startswith("[Your reply was empty.")
    assert [m["role"] for m in agent.messages] == ["user", "assistant", "user"]


def test_attach_puts_files_in_the_next_message(agent, project, llm):
    from amas_code import repl

    (project / "src").mkdir()
    (project / "src/a.py").write_text("A = 1\n")
    (project / "src/b.py").write_text("B = 2\n")
    repl.command(agent, "/attach src/*.py")
    llm.reply(text="seen")
    agent.turn("review these")
    content = llm.requests[0]["messages"][-1]["content"]
    assert (
        "Attached file src/a.py:\n```\nA = 1\n" in content and "Attached file src/b.py" in content
    )
    assert content.endswith("review these")


def test_text_tools_when_litellm_says_the_model_cannot_call_functions(agent, llm, capsys):
    # supports_function_calling: false in litellm's map
    from amas_code.agent import Agent

    agent = Agent({**agent.config, "model": "deepseek/deepseek-reasoner"}, agent.root)
    llm.reply(text='<tool_call>{"name": "list_files", "arguments": {}}</tool_call>').reply(
        text="listed"
    )
    agent.turn("list the files")
    first = llm.requests[0]
    assert "tools" not in first and "<tool_call>" in system(first)
    assert "README.md" in llm.requests[1]["messages"][-1]["content"]
    assert "deepseek/deepseek-reasoner has no native tool calling" in capsys.readouterr().err


def test_resumed_session_killed_mid_tool_is_repaired(project, llm):
    from amas_code.agent import Agent

    call = {
        "id": "call_9",
        "type": "function",
        "function": {"name": "list_files", "arguments": "{}"},
    }
    history_file(project).write_text(
        json.dumps({"session": "s1", "time": 1.0, "role": "user", "content": "list"})
        + "\n"
        + json.dumps(
            {"session": "s1", "time": 2.0, "role": "assistant", "content": "", "tool_calls": [call]}
        )
        + "\n"
    )
    config = make_config(model="openai/test-model", api_base=llm.url, api_key="k" * 12)
    agent = Agent(config, project, resume=True)  # killed mid-tool: resumed with every call answered
    llm.reply(text="resumed")
    agent.turn("go on")
    sent = llm.requests[0]["messages"]
    assert sent[3] == {
        "role": "tool",
        "tool_call_id": "call_9",
        "content": "Cancelled by the user.",
    }
    assert sent[4]["content"] == "go on" and agent.session == "s1"


def test_browser_unused_for_a_whole_turn_is_closed(agent, llm, monkeypatch, capsys):
    from amas_code import repl

    closed = []

    class FakeBrowser:  # the real one is tested in test_browser.py; here only its lifetime matters
        def __init__(self, config, visit, known):
            pass

        def navigate(self, url):
            return f"Title\n{url}"

        def close(self):
            closed.append(True)

    monkeypatch.setattr("amas_code.browser.Browser", FakeBrowser)
    llm.reply(tool="navigate", url="http://127.0.0.1:1/").reply(text="opened")
    agent.turn("open the page")
    assert closed == [] and agent.tools.browser is not None  # used this turn: kept for the next
    repl.command(agent, "/browser open")  # a command it does not have leaves it open
    assert closed == [] and "/browser takes only close, not 'open'" in capsys.readouterr().err
    llm.reply(text="no browsing here")
    agent.turn("just talk")
    assert closed == [True] and agent.tools.browser is None


def test_attach_takes_quoted_globs_and_names_with_spaces(agent, project, llm):
    from amas_code import repl

    (project / "docs").mkdir()
    for name in ("docs/a.md", "docs/b.md", "my file.txt"):
        (project / name).write_text(f"{name}\n")
    repl.command(agent, "/attach 'docs/*.md' \"my file.txt\"")
    assert [path for path, _ in agent.attachments] == ["docs/a.md", "docs/b.md", "my file.txt"]


def test_model_back_to_the_configured_provider_gets_its_address_and_key_back(agent, llm):
    from amas_code import repl

    repl.command(agent, "/model anthropic/claude-sonnet-4-5")
    assert agent.model.config["api_base"] is None and agent.model.config["api_key"] is None
    repl.command(agent, "/model openai/other-model")
    assert (
        agent.model.config["api_base"] == llm.url
        and agent.model.config["api_key"] == agent.config["api_key"]
    )


def test_a_damaged_history_is_resumed_without_its_bad_lines(project, llm, capsys):
    from amas_code.agent import Agent

    good = {"session": "s1", "time": 1.0, "role": "user", "content": "kept"}
    bad = [
        {**good, "time": "x"},
        {**good, "content": ["a"]},
        {**good, "role": "assistant", "tool_calls": "notalist"},
        {**good, "role": "assistant", "tool_calls": [{"function": "x"}]},
    ]
    history_file(project).write_text(
        "".join(json.dumps(e) + "\n" for e in [good, *bad]) + "{broken\n"
    )
    agent = Agent(
        make_config(model="openai/test-model", api_base=llm.url, api_key="k" * 12),
        project,
        resume=True,
    )
    llm.reply(text="resumed")
    agent.turn("go on")
    assert [m["content"] for m in llm.requests[0]["messages"][1:]] == ["kept", "go on"]
