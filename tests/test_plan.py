"""Plan mode changes nothing, and a one-shot's --max-turns bounds a script (issue 54)."""

import json

import pytest
from conftest import git, history_file, run_amas

from amas_code import sandbox


def tool_results(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def test_plan_mode_reads_runs_tests_read_only_and_changes_nothing(project, llm):
    if sandbox.probe():
        pytest.skip(f"no sandbox here: {sandbox.probe()}")
    (project / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    llm.reply(tool="read_file", path="calc.py")
    llm.reply(tool="edit_file", path="calc.py", old_str="a - b", new_str="a + b")
    llm.reply(tool="shell_command", command="python3 -c 'print(1 + 1)'; touch made.txt")
    llm.reply(text="Plan: 1. in calc.py, return a + b. 2. run the tests.")
    result = run_amas("--yes", "--plan", "--output-format", "json", "fix add", llm=llm)
    offered = [t["function"]["name"] for t in llm.requests[0]["tools"]]
    assert "edit_file" not in offered and "write_file" not in offered and "read_file" in offered
    assert "## Plan mode" in llm.requests[0]["messages"][0]["content"]
    read, edit, command = tool_results(llm.requests[3])
    assert "return a - b" in read
    assert edit.startswith("Error: plan mode: edit_file changes something")
    assert command.startswith("$ python3") and "\n2\n" in command  # it ran
    assert "made.txt" in command and "Read-only file system" in command  # but wrote nothing
    assert (project / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"
    assert not (project / "made.txt").exists()
    assert git(project, "status", "--porcelain") == "?? calc.py\n"
    said = json.loads(result.stdout.splitlines()[-1])
    assert said["mode"] == "plan" and said["exit_code"] == 0 and said["files_changed"] == []
    assert said["result"].startswith("Plan: 1.")


def test_plan_in_the_repl_then_go_carries_it_out(repl, project, llm):
    llm.reply(text="Plan: write hello.txt.")
    llm.reply(tool="create_file", path="hello.txt", content="hi\n")
    llm.reply(text="Done.")
    child = repl("--yes")
    child.sendline("/plan")
    child.expect("plan mode: reading tools only")
    child.expect("plan ›")
    child.sendline("make a hello file")
    child.expect("Plan: write hello.txt.")
    child.expect("plan ›")  # the turn is over: "go" typed ahead would be held as an answer word
    assert "create_file" not in [t["function"]["name"] for t in llm.requests[0]["tools"]]
    child.sendline("go")
    child.expect("plan mode off")
    child.expect("Done.")
    assert (project / "hello.txt").read_text() == "hi\n"
    second = llm.requests[1]
    assert "create_file" in [t["function"]["name"] for t in second["tools"]]
    assert any("Plan: write hello.txt." in str(m.get("content")) for m in second["messages"])


def test_max_turns_stops_after_that_many_requests_with_exit_code_3(project, llm):
    for _ in range(5):
        llm.reply(tool="list_files", path=".")
    result = run_amas(
        "--yes", "--max-turns", "2", "--output-format", "json", "look around", llm=llm
    )
    assert result.returncode == 3 and len(llm.requests) == 2
    assert "stopped after 2 model requests: --max-turns 2; `amas -c` resumes it" in result.stderr
    said = json.loads(result.stdout.splitlines()[-1])
    assert said["exit_code"] == 3 and said["num_model_calls"] == 2
    kept = [json.loads(line) for line in history_file(project).read_text().splitlines()]
    calls = [c["id"] for e in kept for c in e.get("tool_calls") or []]
    answered = [e["tool_call_id"] for e in kept if e["role"] == "tool"]
    assert calls and calls == answered  # every call answered: `amas -c` can go on


def test_max_turns_takes_a_positive_number(project, llm):
    result = run_amas("--max-turns", "0", "hello", llm=llm)
    assert result.returncode == 2 and "--max-turns" in result.stderr and not llm.requests
