"""One-shot runs end to end through real litellm against the scripted server."""

import json

from conftest import API_KEY, git, run_amas


def test_create_file_with_yes(project, llm, amas):
    llm.reply(tool="create_file", path="hello.py", content="print('hello')\n").reply(text="Created **hello.py**.")
    result = amas("-y", "create hello.py that prints hello")
    assert result.exit_code == 0, result.output
    assert (project / "hello.py").read_text() == "print('hello')\n"
    assert "Created hello.py" in result.output
    assert "[amas] create hello.py" in git(project, "log", "--format=%s")
    first, second = llm.requests
    assert first["stream"] is True
    assert first["messages"][0]["role"] == "system" and "You are Amas Code" in first["messages"][0]["content"]
    assert first["messages"][-1] == {"role": "user", "content": "create hello.py that prints hello"}
    assert {t["function"]["name"] for t in first["tools"]} >= {"read_file", "edit_file", "shell_command"}
    assert "_skip_mcp_handler" not in first  # litellm consumed its private flag; `mcp` is not needed
    tool_result = second["messages"][-1]
    assert tool_result["role"] == "tool" and "Create hello.py" in tool_result["content"]
    assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == "create_file"
