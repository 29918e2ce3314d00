"""Bounds the agent keeps on what the model asks for (issue 29 item 6)."""

import json

from conftest import run_amas


def test_more_than_fifty_calls_in_one_reply_are_asked_about_first(project, llm):
    calls = [("shell_command", json.dumps({"command": f"touch f{i}"})) for i in range(51)]
    llm.reply(calls=calls).reply(text="done")
    (project / ".amas").mkdir(exist_ok=True)
    (project / ".amas" / "config.yaml").write_text("permissions: {allow: ['touch *']}\n")
    done = run_amas("--trust", "make files", llm=llm)
    assert done.returncode == 2  # declined: no one to ask
    assert "51 tool calls in one reply" in done.stderr
    assert not list(project.glob("f*"))
    results = [m for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert len(results) == 51 and all(m["content"].startswith("Cancelled") for m in results)


def test_fifty_calls_run_unasked_when_the_rules_allow_them(project, llm, home):
    (home / ".amas").mkdir()  # outside the box: this is about asking, and 50 boxes take 10 s
    (home / ".amas" / "config.yaml").write_text("sandbox: off\n")
    calls = [("shell_command", json.dumps({"command": f"touch f{i}"})) for i in range(50)]
    llm.reply(calls=calls).reply(text="done")
    (project / ".amas").mkdir(exist_ok=True)
    (project / ".amas" / "config.yaml").write_text("permissions: {allow: ['touch *']}\n")
    assert run_amas("--trust", "make files", llm=llm).returncode == 0
    assert len(list(project.glob("f*"))) == 50


def test_a_timeout_over_the_users_limit_is_never_granted_by_an_allow_rule(project, llm):
    """An allow rule lets the command run, never the longer time: with no one to ask, it runs
    within shell_timeout, and the model is told."""
    (project / ".amas").mkdir(exist_ok=True)
    (project / ".amas" / "config.yaml").write_text("permissions: {allow: ['touch *']}\n")
    llm.reply(tool="shell_command", command="touch slow", timeout=600).reply(text="ok")
    done = run_amas("--trust", "touch", llm=llm)
    assert done.returncode == 0 and (project / "slow").exists()
    said = llm.requests[1]["messages"][-1]["content"]
    assert "[run within shell_timeout's 30 s, not the 600 s asked" in said
    llm.reply(tool="shell_command", command="touch quick", timeout=20).reply(text="ok")
    assert run_amas("--trust", "touch", llm=llm).returncode == 0
    assert (project / "quick").exists()


def test_a_reply_of_ten_thousand_calls_is_cut_with_one_note(project, llm):
    """Bounded work per reply: the calls past agent.MAX_CALLS are not run, nor answered one by one;
    the reply the model sees again holds only those answered, and one line says the rest were cut.
    (10,000 calls still take litellm's stream builder and the text-call reader minutes: theirs.)"""
    calls = [("read_file", json.dumps({"path": "README.md", "offset": i})) for i in range(10_000)]
    llm.reply(calls=calls).reply(text="done")
    done = run_amas("-y", "read it all", llm=llm)
    assert done.returncode == 0, done.stderr
    assert (
        "the model sent more than 200 tool calls in one reply; at most 200 are run" in done.stderr
    )
    messages = llm.requests[1]["messages"]
    asked = [m for m in messages if m.get("tool_calls")]
    results = [m for m in messages if m["role"] == "tool"]
    assert len(asked[0]["tool_calls"]) == len(results) == 200
    cut = [m["content"] for m in messages if "more than 200 tool calls" in str(m["content"])]
    assert cut == [
        "[your reply held more than 200 tool calls: only the first 200 were considered; "
        "the rest were not run. Make fewer calls at a time.]"
    ]


def test_a_text_reply_of_ten_thousand_calls_is_read_in_bounded_time(project, llm):
    """In text mode the reader took the square of a long JSON list (1,500 calls: 36 s). The text
    comes in 4 KB chunks: in 7-character ones litellm's per-chunk work took 35 s of CPU, and the
    reader reads the whole text once, however it arrived."""
    (project / ".amas").mkdir()
    (project / ".amas" / "config.yaml").write_text("text_tools: true\n")
    calls = [{"name": "read_file", "arguments": {"path": "README.md"}} for _ in range(10_000)]
    llm.reply(text=json.dumps(calls), piece=4096).reply(text="done")
    done = run_amas("-y", "read it all", llm=llm, timeout=150)
    assert done.returncode == 0, done.stderr
    assert "the model sent 10000 tool calls in one reply; at most 200 are run" in done.stderr
