"""The scripting contract: --output-format json|stream-json and exit codes, through the real CLI."""

import json

from conftest import API_KEY, run_amas


def lines(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines()]


def test_json_prints_one_object_with_the_run(project, llm):
    (project / "app.py").write_text("x = 1\n")
    llm.reply(tool="edit_file", path="app.py", old_str="x = 1", new_str="x = 2")
    llm.reply(text="Changed x to 2.")
    done = run_amas("--output-format", "json", "-y", "set x to 2", llm=llm)
    assert done.returncode == 0, done.stderr
    (result,) = lines(done.stdout)  # exactly one object, nothing else on stdout
    assert result["type"] == "result" and result["result"] == "Changed x to 2."
    assert result["is_error"] is False and result["exit_code"] == 0
    assert result["num_model_calls"] == 2 and result["num_tool_calls"] == 1
    assert result["tool_calls"] == [{"name": "edit_file", "target": "app.py", "status": "ok"}]
    (changed,) = result["files_changed"]
    assert changed["path"] == "app.py" and len(changed["checkpoint"]) == 40
    assert set(result["usage"]) == {"prompt_tokens", "completion_tokens"}
    assert result["session_id"] and result["duration_ms"] >= 0
    assert "● edit_file app.py" in done.stderr  # the work log still goes to stderr
    assert (project / "app.py").read_text() == "x = 2\n"


def test_stream_json_events_in_order(project, llm):
    llm.reply(text="Looking.", tool="shell_command", command="echo hi")
    llm.reply(text="It printed hi.")
    done = run_amas("--output-format", "stream-json", "-y", "say hi", llm=llm)
    assert done.returncode == 0, done.stderr
    events = lines(done.stdout)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "start" and kinds[-1] == "result"
    assert kinds.index("tool_call") < kinds.index("tool_result") < len(kinds) - 1
    call = next(e for e in events if e["type"] == "tool_call")
    assert call["name"] == "shell_command" and call["arguments"] == {"command": "echo hi"}
    result = next(e for e in events if e["type"] == "tool_result")
    assert result["status"] == "ok" and "hi" in result["content"]
    assert [e["text"] for e in events if e["type"] == "text"] == ["Looking.", "It printed hi."]
    assert events[0]["model"] == "openai/test-model"


def test_declined_without_a_terminal_exits_2(project, llm):
    (project / "app.py").write_text("x = 1\n")
    llm.reply(tool="edit_file", path="app.py", old_str="x = 1", new_str="x = 2").reply(text="ok")
    done = run_amas("--output-format", "json", "set x to 2", llm=llm)
    assert done.returncode == 2
    (result,) = lines(done.stdout)
    assert result["exit_code"] == 2 and result["is_error"] is False
    assert result["tool_calls"][0]["status"] == "declined"
    assert result["files_changed"] == []
    assert (project / "app.py").read_text() == "x = 1\n"
    plain = run_amas(
        "set x to 2",
        llm=llm.reply(tool="edit_file", path="app.py", old_str="x = 1", new_str="x = 2").reply(
            text="ok"
        ),
    )
    assert plain.returncode == 2  # text mode too


def test_errors_are_json_too(project, llm):
    llm.error(401, "invalid api key")
    done = run_amas("--output-format", "json", "hello", llm=llm)
    assert done.returncode == 1
    (result,) = lines(done.stdout)
    assert result["is_error"] is True and result["exit_code"] == 1
    assert "authentication failed" in result["result"]
    assert "Traceback" not in done.stderr


def test_piped_input_and_secrets_redacted_in_events(project, llm):
    llm.reply(tool="shell_command", command=f"echo {API_KEY}")
    llm.reply(text=f"The key is {API_KEY}")
    done = run_amas("--output-format", "stream-json", "-y", "show it", llm=llm, input="a log\n")
    assert done.returncode == 0, done.stderr
    assert API_KEY not in done.stdout and "[REDACTED]" in done.stdout
    assert "a log" in llm.requests[0]["messages"][-1]["content"]


def test_a_bad_config_is_a_json_error(project, llm):
    (project / ".amas").mkdir()
    (project / ".amas" / "config.yaml").write_text("shell_timeout: soon\n")
    done = run_amas("--output-format", "json", "hello", llm=llm)
    assert done.returncode == 1
    (result,) = lines(done.stdout)
    assert result["is_error"] is True and "shell_timeout" in result["result"]
