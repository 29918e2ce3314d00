"""The twelve edge cases of the design notes, one test each, named after them."""

import json

from conftest import run_amas, toolbox

from amas_code import providers, tools
from amas_code.config import load


def call(box, name, **args):
    return box.execute(name, json.dumps(args))


def test_edge_01_no_git_directory(bare, home, llm, amas):
    llm.reply(tool="create_file", path="n.txt", content="n\n").reply(text="made")
    assert amas("-y", "make n.txt").exit_code == 0
    assert (bare / "n.txt").exists() and not (bare / ".git").exists()
    # checkpoints still work
    shadows = [p for p in (home / ".amas/checkpoints").iterdir() if p.is_dir()]
    assert len(shadows) == 1 and shadows[0].name.startswith("proj-")


def test_edge_02_no_config_file(bare):
    config, warnings, ignored = load(bare)
    assert config["model"] == "gemini/gemini-2.5-flash" and config["checkpoint_on_edit"] is True
    assert warnings == [] and ignored == []


def test_edge_03_no_api_key(bare):
    result = run_amas("hi", input="", env={"AMAS_MODEL": "anthropic/claude-sonnet-4-5"})
    assert result.returncode == 1
    assert "no API key for anthropic/claude-sonnet-4-5: export ANTHROPIC_API_KEY" in result.stderr
    assert "Traceback" not in result.stderr


def test_edge_04_binary_files(bare):
    (bare / "blob.dat").write_bytes(bytes(range(256)))
    assert call(toolbox(bare), "read_file", path="blob.dat") == "Binary file, cannot display"


def test_edge_05_very_large_files(bare):
    (bare / "huge.log").write_text("y" * 200 + "\n" * 1 + ("z" * 100 + "\n") * 5000)
    out = call(toolbox(bare), "read_file", path="huge.log")
    assert len(out) <= tools.MAX_READ + 200 and "[truncated at 50 KB" in out


def test_edge_06_empty_tool_response(bare, monkeypatch):
    box = toolbox(bare)
    monkeypatch.setattr(box.tools, "list_files", lambda path=".": "")
    assert call(box, "list_files") == "Tool executed successfully (no output)"


def test_edge_07_model_without_tool_support(agent, llm):
    llm.error(400, "registry.ollama.ai/library/tiny does not support tools")
    llm.reply(text='<tool_call>{"name": "list_files", "arguments": {}}</tool_call>').reply(
        text="README only"
    )
    agent.turn("what files are there?")
    assert "README.md" in llm.requests[2]["messages"][-1]["content"]
    assert agent.model.text_tools is True


def test_edge_08_network_timeout(agent, llm, monkeypatch):
    monkeypatch.setattr(providers, "TIMEOUT", 0.5)
    llm.reply(text="slow", wait=3).reply(text="quick")
    agent.turn("hello")  # the first attempt timed out; litellm retried once
    assert len(llm.requests) == 2 and agent.messages[-1]["content"] == "quick"


def test_edge_09_ctrl_c_during_generation(repl, llm):
    llm.reply(text="word " * 400, delay=0.05)  # a slow stream, interrupted
    llm.reply(text="Still here.")
    child = repl()
    child.sendline("write a lot")
    child.expect("word")
    child.sendintr()
    child.expect("cancelled")
    child.expect("›")
    child.sendline("are you there?")
    child.expect("Still here.")
    assert llm.requests[-1]["messages"][-1]["content"] == "are you there?"


def test_edge_10_concurrent_file_edit(bare):
    box = toolbox(bare, auto_accept=True)
    (bare / "f.py").write_text("value = 1\n")
    call(box, "read_file", path="f.py")
    (bare / "f.py").write_text("value = 99\n")  # the user changed it after the model read it
    out = call(box, "edit_file", path="f.py", old_str="value = 1\n", new_str="value = 2\n")
    assert out.startswith("Error: old_str not found in f.py, which changed since you last read it")
    assert "     1\tvalue = 99" in out
    assert (bare / "f.py").read_text() == "value = 99\n"  # the user's change is not overwritten


def test_edge_11_path_traversal(bare, tmp_path):
    box = toolbox(bare, auto_accept=True)
    secret = tmp_path / "secret.txt"
    secret.write_text("s\n")
    assert call(box, "write_file", path="../secret.txt", content="pwned") == (
        f"Error: access to {secret} (outside the project) was declined: "
        "no terminal to ask the user on"
    )
    assert secret.read_text() == "s\n"
    # reading asks; --yes accepts it
    assert call(box, "read_file", path="../secret.txt") == "     1\ts"


def test_edge_12_circular_tool_calls(agent, llm, capsys):
    for n in range(21):
        # busy, but never the same call
        llm.reply(tool="read_file", path="README.md", offset=n % 2, limit=n)
    llm.reply(text="stopped")
    agent.turn("loop forever")
    assert "20 tool rounds in this turn" in capsys.readouterr().err
    # warned, never capped
    assert agent.messages[-1]["content"] == "stopped" and len(llm.requests) == 22
