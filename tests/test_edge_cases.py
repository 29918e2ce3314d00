"""The twelve edge cases of the design notes, one test each, named after them."""

import json

from conftest import run_amas

from amas_code import providers, tools
from amas_code.config import DEFAULT_CONFIG, load


def call(name, **args):
    return tools.execute(name, json.dumps(args))


def test_edge_01_no_git_directory(bare, llm, amas):
    llm.reply(tool="create_file", path="n.txt", content="n\n").reply(text="made")
    assert amas("-y", "make n.txt").exit_code == 0
    assert (bare / "n.txt").exists() and not (bare / ".git").exists()
    assert (bare / ".amas/shadow.git").is_dir()  # checkpoints still work, out of the user's way


def test_edge_02_no_config_file(bare):
    config, warnings = load(bare)
    assert config["model"] == "gemini/gemini-2.5-flash" and config["checkpoint_on_edit"] is True
    assert warnings == []


def test_edge_03_no_api_key(bare):
    result = run_amas("hi", input="", env={"AMAS_MODEL": "anthropic/claude-sonnet-4-5"})
    assert result.returncode == 1
    assert "no API key for anthropic/claude-sonnet-4-5: export ANTHROPIC_API_KEY" in result.stderr
    assert "Traceback" not in result.stderr


def test_edge_04_binary_files(bare):
    tools.setup(bare, dict(DEFAULT_CONFIG))
    (bare / "blob.dat").write_bytes(bytes(range(256)))
    assert call("read_file", path="blob.dat") == "Binary file, cannot display"


def test_edge_05_very_large_files(bare):
    tools.setup(bare, dict(DEFAULT_CONFIG))
    (bare / "huge.log").write_text("y" * 200 + "\n" * 1 + ("z" * 100 + "\n") * 5000)
    out = call("read_file", path="huge.log")
    assert len(out) <= tools.MAX_READ + 200 and "[truncated at 50 KB" in out


def test_edge_06_empty_tool_response(bare, monkeypatch):
    tools.setup(bare, dict(DEFAULT_CONFIG))
    monkeypatch.setitem(tools.HANDLERS, "get_text", lambda selector="body": "")
    assert call("get_text") == "Tool executed successfully (no output)"


def test_edge_07_model_without_tool_support(agent, llm):
    llm.error(400, "registry.ollama.ai/library/tiny does not support tools")
    llm.reply(text='<tool_call>{"name": "list_files", "arguments": {}}</tool_call>').reply(text="README only")
    agent.turn("what files are there?")
    assert "README.md" in llm.requests[2]["messages"][-1]["content"]
    assert agent.config["text_tools"] is True


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
    tools.setup(bare, {**DEFAULT_CONFIG, "auto_accept": True})
    (bare / "f.py").write_text("value = 1\n")
    call("read_file", path="f.py")
    (bare / "f.py").write_text("value = 99\n")  # the user changed it after the model read it
    out = call("edit_file", path="f.py", old_str="value = 1\n", new_str="value = 2\n")
    assert out.startswith("Error: old_str not found in f.py.") and "value = 99" in out
    assert (bare / "f.py").read_text() == "value = 99\n"  # the user's change is not overwritten


def test_edge_11_path_traversal(bare, tmp_path):
    tools.setup(bare, {**DEFAULT_CONFIG, "auto_accept": True})
    secret = tmp_path / "secret.txt"
    secret.write_text("s\n")
    assert call("write_file", path="../secret.txt", content="pwned") == "Edit declined by user."
    assert secret.read_text() == "s\n"
    assert call("read_file", path="../secret.txt").startswith("[warning: this file is outside the project root]")


def test_edge_12_circular_tool_calls(agent, llm, capsys):
    for _ in range(21):
        llm.reply(tool="list_files")
    llm.reply(text="stopped")
    agent.turn("loop forever")
    err = capsys.readouterr().err
    assert "20 tool rounds in this turn" in err and "repeated the same list_files call" in err
    assert agent.messages[-1]["content"] == "stopped" and len(llm.requests) == 22  # warned, never capped
