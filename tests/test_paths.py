"""The direct path and the litellm path (issue 53) hold the same conversations the same way.

Each scenario runs twice, in a project of its own, against the same scripted server: once as
`openai/test-model` (a server of the user's own: the openai SDK, no litellm) and once as
`custom_openai/test-model` (the same server through litellm). What the server was sent and what the
user saw must be the same, up to the project's folder and the server's made-up call ids. So the
litellm path's tool calls also show that litellm consumed its private `_skip_mcp_handler` (SPEC §9:
the `mcp` package is not needed): its requests equal the direct path's, which has no such option.
"""

import json
import re

import pexpect
import pytest
from conftest import amas_argv, amas_env, git, run_amas

from amas_code import home as amas_home

PATHS = {"direct": "openai/test-model", "litellm": "custom_openai/test-model"}
KEY = "sk-paths-test-12345"
LLAMA_OVERFLOW = {  # llama-server's words for a request past its context
    "error": {
        "code": 400,
        "message": "request (5010 tokens) exceeds the available context size (4096 tokens), try "
        "increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 5010,
        "n_ctx": 4096,
    }
}


def make_project(tmp_path, name: str):
    root = tmp_path / name
    root.mkdir()
    (root / "README.md").write_text("# demo\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "-qm", "initial")
    return root


def stable(text: str, root) -> str:
    """Text with the project's folder, the model's name and the server's call ids (they carry a
    clock) made the same."""
    text = re.sub(r"call_(\d+)_\d+", r"call_\1", text.replace(str(root), "<root>"))
    return re.sub(r"\b(custom_)?openai/test-model\b", "<model>", text)


def both(tmp_path, monkeypatch, llm, script, *args, files=None) -> dict:
    """`amas -y ARGS` once per path, each in a fresh project with `files`, the server scripted by
    script(llm) before each; per path: (the requests as sent, stdout, stderr, exit code)."""
    seen = {}
    for path, model in PATHS.items():
        root = make_project(tmp_path, path)
        for name, text in (files or {}).items():
            (root / name).write_text(text)
        monkeypatch.chdir(root)
        llm.requests.clear()
        script(llm)
        env = {"AMAS_MODEL": model, "AMAS_API_KEY": KEY}
        done = run_amas("-y", *args, llm=llm, input="", env=env)
        sent = stable(json.dumps(llm.requests, sort_keys=True), root)
        seen[path] = (json.loads(sent), stable(done.stdout, root), stable(done.stderr, root))
        seen[path] += (done.returncode,)
    return seen


def same(seen: dict):
    """The direct path's run, after checking the litellm path's was the same."""
    assert seen["direct"] == seen["litellm"]
    return seen["direct"]


def test_a_streamed_answer(tmp_path, monkeypatch, llm, home):
    seen = both(tmp_path, monkeypatch, llm, lambda s: s.reply(text="Hello **there**."), "hi")
    sent, out, err, code = same(seen)
    assert code == 0 and out == "Hello **there**.\n" and err == ""
    (request,) = sent
    assert request["model"] == "test-model" and request["stream"] is True
    assert request["stream_options"] == {"include_usage": True} and request["tool_choice"] == "auto"
    assert request["messages"][-1] == {"role": "user", "content": "hi"}


def test_native_tool_calls_and_the_answer(tmp_path, monkeypatch, llm, home):
    def script(server):
        server.reply("Reading.", calls=[("read_file", '{"path": "README.md"}'), ("list_files", "")])
        server.reply(text="A demo project.")

    sent, out, err, code = same(both(tmp_path, monkeypatch, llm, script, "what is this?"))
    assert code == 0 and out.endswith("A demo project.\n")
    assert "● read_file README.md" in err and "● list_files {}" in err
    call, read, listed = sent[1]["messages"][-3:]
    assert call["content"] == "Reading." and [c["id"] for c in call["tool_calls"]] == [
        "call_0",
        "call_1",
    ]
    # no arguments go back as an empty object (litellm's builder's way: templates parse them)
    assert call["tool_calls"][1]["function"] == {"name": "list_files", "arguments": "{}"}
    assert read["tool_call_id"] == "call_0" and "# demo" in read["content"]
    assert listed["tool_call_id"] == "call_1" and "README.md" in listed["content"]


def test_a_server_that_refuses_tools_gets_text_tool_calls(tmp_path, monkeypatch, llm, home):
    def script(server):
        server.error(400, "registry.ollama.ai/library/tiny does not support tools")
        server.reply(
            '<tool_call>{"name": "read_file", "arguments": {"path": "README.md"}}</tool_call>'
        )
        server.reply(text="It says demo.")

    sent, out, err, code = same(both(tmp_path, monkeypatch, llm, script, "read the readme"))
    assert code == 0 and out.endswith("It says demo.\n")
    assert err.count("does not support tools); using text tool calls for this session") == 1
    refused, asked, answered = sent
    assert "tools" in refused and "tools" not in asked and "tools" not in answered
    assert "<tool_call>" in asked["messages"][0]["content"]
    fed_back = answered["messages"][-1]
    assert fed_back["role"] == "user" and fed_back["content"].startswith(
        '<tool_response name="read_file">'
    )


def test_an_overflow_teaches_the_context_and_the_retry_fits(tmp_path, monkeypatch, llm, home):
    """The server's error says its size (4,096): the long tool result is cut to fit it, the request
    sent once more, and a reply's max_tokens is a quarter of it from then on."""

    def script(server):
        server.reply(tool="read_file", path="big.txt")
        server.error(400, body=LLAMA_OVERFLOW)
        server.reply(text="Read it.")

    big = {"big.txt": "".join(f"line {i} of a long file\n" for i in range(1500))}
    seen = both(tmp_path, monkeypatch, llm, script, "read big.txt", files=big)
    sent, out, err, code = same(seen)
    assert code == 0 and out.endswith("Read it.\n")
    assert "cut 1 long tool result so the conversation fits the context" in err
    first, overflowed, retried = sent
    assert first["max_tokens"] == overflowed["max_tokens"] == 8192 and retried["max_tokens"] == 1024
    cut, whole = retried["messages"][-1]["content"], overflowed["messages"][-1]["content"]
    assert len(cut) < len(whole)


def test_a_server_error_is_retried_once_then_one_line(tmp_path, monkeypatch, llm, home):
    def script(server):
        server.error(500, "the model crashed").error(500, "the model crashed")

    sent, out, err, code = same(both(tmp_path, monkeypatch, llm, script, "hi"))
    assert code == 1 and out == "" and len(sent) == 2
    assert err.splitlines() == [
        f"✗ the server at {llm.url} failed (5xx), even after a retry; try again (the model crashed)"
    ]


@pytest.mark.parametrize("path", PATHS)
def test_ctrl_c_mid_stream_keeps_the_partial_answer(tmp_path, llm, home, path):
    """In the REPL, as a person: Ctrl+C in the middle of a slow answer; the next request carries
    what was shown, marked, on either path."""
    root = make_project(tmp_path, path)
    amas_home.set_trust(root, True)
    words = " ".join(f"word{i}" for i in range(200))
    llm.reply(text=words, delay=0.05).reply(text="ok")
    env = amas_env(llm, AMAS_MODEL=PATHS[path], AMAS_API_KEY=KEY, PROMPT_TOOLKIT_NO_CPR="1")
    env.update(TERM="xterm", NO_COLOR="1", COLUMNS="120", LINES="40")
    argv = amas_argv(env=env)
    child = pexpect.spawn(argv[0], argv[1:], cwd=str(root), env=env, encoding="utf-8", timeout=60)
    try:
        child.expect("›")
        child.sendline("talk a lot")
        child.expect("word3")
        child.sendintr()
        child.expect("cancelled; the conversation is kept")
        child.expect("›")
        child.sendline("go on")
        child.expect("ok")
    finally:
        child.close(force=True)
    kept = llm.requests[-1]["messages"][-2]
    assert kept["role"] == "assistant" and kept["content"].startswith("word0 word1 word2 word3")
    assert kept["content"].endswith("[interrupted by the user]")
