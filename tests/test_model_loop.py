"""Issue 15: the model loop against servers that refuse tools, fail after 200, ramble, loop,
or have small contexts."""

import io
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import API_KEY, amas_env, make_config, run_amas

from amas_code import providers, repl, toolcalls, ui
from amas_code.agent import Agent
from amas_code.context import SUMMARY_TOKENS

README_RESPONSE = '<tool_response name="read_file">\n     1\t# demo\n</tool_response>'
BROWSER_TOOLS = {"navigate", "click", "type", "screenshot", "get_text"}


def system(request: dict) -> str:
    return request["messages"][0]["content"]


def words(n: int, seed: int = 0) -> str:
    """Text of about 3 tokens a word, so a few hundred words weigh on a small context."""
    return " ".join(f"w{(i + seed) * 7919 % 10007}" for i in range(n))


def a_big_file(path: Path, n: int) -> None:
    """A text file of n words, ten a line."""
    text = words(n).split()
    path.write_text("".join(" ".join(text[i : i + 10]) + "\n" for i in range(0, n, 10)))


def config_file(root: Path, text: str) -> None:
    (root / ".amas").mkdir(exist_ok=True)
    (root / ".amas/config.yaml").write_text(text)


@pytest.fixture
def text_agent(project, llm):
    """An agent configured with `text_tools: true`, edits auto-accepted."""
    config = make_config(
        model="openai/test-model",
        api_base=llm.url,
        api_key=API_KEY,
        auto_accept=True,
        text_tools=True,
    )
    return Agent(config, project)


# -- what goes out with the tools ------------------------------------------------------------------


def test_tools_go_out_with_tool_choice_auto_and_max_tokens(agent, llm):
    llm.reply(text="hello")
    agent.turn("hi")
    (sent,) = llm.requests
    # llama-cpp-python reads a missing one as "none"
    assert sent["tools"] and sent["tool_choice"] == "auto"
    assert sent["max_tokens"] == 8192  # the default cap on one reply


def test_a_turn_that_only_called_tools_goes_back_with_empty_string_content(agent, llm):
    llm.reply(tool="read_file", path="README.md").reply(text="A demo.")
    agent.turn("what is this?")
    call = llm.requests[1]["messages"][-2]
    assert call["role"] == "assistant" and call["tool_calls"]
    # some chat templates reject a null or missing content
    assert "content" in call and call["content"] == ""


# -- servers that refuse tools ---------------------------------------------------------------------

REFUSALS = {
    "llama-server without --jinja": (500, "tools param requires --jinja flag", "server_error"),
    "vLLM without auto tool choice": (
        400,
        '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
        "BadRequestError",
    ),
    "no tools with stream": (500, "Cannot use tools with stream", "invalid_request_error"),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_a_server_that_refuses_tools_gets_text_tool_calls(project, llm, amas, case):
    status, message, kind = REFUSALS[case]
    llm.error(status, message, kind=kind)
    llm.reply(
        text="Let me look.\n"
        '<tool_call>{"name": "read_file", "arguments": {"path": "README.md"}}</tool_call>'
    )
    llm.reply(text="The README is one heading: demo.")
    result = amas("what is in the README?")
    assert result.exit_code == 0, result.output
    assert "The README is one heading: demo." in result.stdout
    assert (
        result.output.count("no native tool calling") == 1
        and "using text tool calls" in result.output
    )
    refused, *text_mode = llm.requests
    assert refused["tools"] and refused["tool_choice"] == "auto"
    # the refusal was not retried: the next request already went without tools
    assert len(text_mode) == 2
    assert all("tools" not in r and "tool_choice" not in r for r in text_mode)
    assert toolcalls.EXAMPLE in system(text_mode[0])
    assert text_mode[1]["messages"][-1] == {"role": "user", "content": README_RESPONSE}
    assert "<tool_call>" not in result.stdout


def test_text_tools_true_writes_calls_as_text_from_the_first_request(project, llm, amas):
    config_file(project, "text_tools: true\n")
    llm.reply(
        text='<tool_call>{"name": "read_file", "arguments": {"path": "README.md"}}</tool_call>'
    )
    llm.reply(text="demo")
    result = amas("read the README")
    assert result.exit_code == 0, result.output
    first, second = llm.requests
    assert "tools" not in first and "tool_choice" not in first
    prompt = system(first)
    # one concrete call, as the model should write it
    example = prompt[prompt.index("<tool_call>") :].split("\n", 1)[0]
    assert example == toolcalls.EXAMPLE
    call = json.loads(example.removeprefix("<tool_call>").removesuffix("</tool_call>"))
    assert f"- {call['name']}(" in prompt and call["arguments"] == {}  # works in any project
    assert second["messages"][-1] == {"role": "user", "content": README_RESPONSE}
    assert "no native tool calling" not in result.output  # configured, not discovered


def test_text_tools_false_makes_a_refusal_an_error(project, llm, amas):
    config_file(project, "text_tools: false\n")
    llm.error(500, "tools param requires --jinja flag", kind="server_error")
    llm.reply(text="never asked for")
    result = amas("hi")
    assert result.exit_code == 1
    assert "openai/test-model has no native tool calling at this server" in result.output
    assert (
        "tools param requires --jinja flag" in result.output
        and "using text tool calls" not in result.output
    )
    # not retried, never re-sent without tools
    assert len(llm.requests) == 1 and llm.requests[0]["tools"]


def test_text_tools_takes_only_auto_true_or_false(project, amas):
    config_file(project, "text_tools: sometimes\n")
    result = amas("hi")
    assert result.exit_code == 1 and "text_tools should be true, false or auto" in result.output


# -- reading calls written as text -----------------------------------------------------------------

WRITTEN = {
    "no closing tag": '<tool_call>{"name": "read_file", "arguments": {"path": "README.md"}}',
    "json code fence": '```json\n{"name": "read_file", "arguments": {"path": "README.md"}}\n```',
    "bare json": '{"name": "read_file", "arguments": {"path": "README.md"}}',
    "parameters": (
        '<tool_call>{"name": "read_file", "parameters": {"path": "README.md"}}</tool_call>'
    ),
    "single quotes": (
        "<tool_call>{'name': 'read_file', 'arguments': {'path': 'README.md'}}</tool_call>"
    ),
    "trailing commas": (
        '<tool_call>{"name": "read_file", "arguments": {"path": "README.md",},}</tool_call>'
    ),
    "tags on their own lines": (
        '<tool_call>\n{"name": "read_file", "arguments": {"path": "README.md"}}\n</tool_call>'
    ),
    "json fence inside the tags": (
        '<tool_call>\n```json\n{"name": "read_file", "arguments": {"path": "README.md"}}\n```\n'
        "</tool_call>"
    ),
}


@pytest.mark.parametrize("written", WRITTEN.values(), ids=WRITTEN.keys())
def test_text_calls_are_read_leniently_and_not_shown(text_agent, llm, capsys, written):
    llm.reply(text=f"Let me look.\n{written}").reply(text="It is a demo.")
    text_agent.turn("what is in the README?")
    assert llm.requests[1]["messages"][-1] == {"role": "user", "content": README_RESPONSE}
    out = capsys.readouterr().out
    assert "Let me look." in out and "It is a demo." in out
    assert (
        "tool_call" not in out and '"name"' not in out and "'name'" not in out and "```" not in out
    )


def test_a_closing_tag_inside_a_string_value_does_not_end_the_call(text_agent, project, llm):
    content = 'TAG = "}</tool_call>"\nprint(TAG)\n'
    call = json.dumps({"name": "create_file", "arguments": {"path": "tag.py", "content": content}})
    llm.reply(text=f"<tool_call>{call}</tool_call>").reply(text="Created.")
    text_agent.turn("make tag.py")
    assert (project / "tag.py").read_text() == content
    assert llm.requests[1]["messages"][-1]["content"].startswith(
        '<tool_response name="create_file">'
    )


def test_a_raw_newline_inside_a_string_value_is_repaired(text_agent, project, llm):
    llm.reply(
        text='<tool_call>{"name": "create_file", "arguments": '
        '{"path": "two.txt", "content": "a\nb\n"}}</tool_call>'
    )
    llm.reply(text="Created.")
    text_agent.turn("make two.txt")
    assert (project / "two.txt").read_text() == "a\nb\n"


def test_a_call_that_cannot_be_read_is_reported_not_run(text_agent, llm):
    llm.reply(text='<tool_call>{"name": "read_file", "arguments": {"path": </tool_call>')
    reply = text_agent.model.complete(
        [{"role": "user", "content": "hi"}], text_agent.tools.schemas()
    )
    assert "tool_calls" not in reply and reply["content"] == ""
    assert reply["unreadable"] == toolcalls.BROKEN_LINE


def test_a_call_that_cannot_be_read_comes_back_saying_how_to_write_it(text_agent, llm, capsys):
    llm.reply(text='<tool_call>{"name": "read_file", "arguments": {"path": </tool_call>').reply(
        text="Sorry."
    )
    text_agent.turn("read the README")
    fed_back = llm.requests[1]["messages"][-1]["content"]
    assert fed_back.startswith(toolcalls.error(text_agent.tools.names))
    out, err = capsys.readouterr()
    assert "tool_call" not in out and toolcalls.BROKEN_LINE in err


def test_native_mode_also_reads_tool_call_tags_in_the_content(agent, llm, capsys):
    llm.reply(
        text="Checking.\n"
        '<tool_call>{"name": "read_file", "arguments": {"path": "README.md"}}</tool_call>'
    )
    llm.reply(text="It is a demo.")
    agent.turn("what is in the README?")
    second = llm.requests[1]
    assert second["tools"] and agent.model.text_tools is False  # still native
    call, result = second["messages"][-2:]
    assert [c["function"]["name"] for c in call["tool_calls"]] == ["read_file"] and call[
        "content"
    ] == "Checking."
    assert result["role"] == "tool" and result["content"] == "     1\t# demo"
    out = capsys.readouterr().out
    assert "Checking." in out and "tool_call" not in out


def test_a_model_repeating_a_text_call_is_stopped(text_agent, llm, capsys):
    for _ in range(6):
        llm.reply(text='<tool_call>{"name": "list_files", "arguments": {}}</tool_call>')
    text_agent.turn("list")
    assert len(llm.requests) == 4
    assert (
        "the model made the same list_files call 4 times in a row; turn ended"
        in capsys.readouterr().err
    )


# -- failures: retried by status, empty streams, cut answers ---------------------------------------


@pytest.mark.parametrize(
    "status, sent, line",
    [(500, 2, "failed (5xx), even after a retry"), (400, 1, "the provider rejected the request")],
)
def test_retries_are_decided_by_status_not_by_the_words_of_the_body(agent, llm, status, sent, line):
    for _ in range(2):
        llm.error(
            status,
            "invalid_request_error: the request could not be processed",
            kind="invalid_request_error",
        )
    with pytest.raises(providers.ProviderError) as err:
        agent.turn("hello")
    assert line in str(err.value)
    assert len(llm.requests) == sent


def test_a_stream_with_no_data_is_an_error_naming_the_server(project, llm, amas):
    for _ in range(4):
        llm.empty()
    result = amas("hi")
    assert result.exit_code == 1, result.output
    port = llm.url.split(":")[-1].split("/")[0]
    errors = [line for line in result.output.splitlines() if line.startswith("✗")]
    assert (
        len(errors) == 1
        and "sent an empty stream" in errors[0]
        and f"127.0.0.1:{port}" in errors[0]
    )
    assert (
        "the model sent an empty reply" not in result.output
        and "text tool calls" not in result.output
    )
    streamed = [r for r in llm.requests if r.get("stream")]
    assert len(streamed) <= 3  # with tools, then without them and one retry: no more
    # each empty stream asked once more unstreamed, for one token, to read the server's own error
    assert all(r["max_tokens"] == 1 for r in llm.requests if not r.get("stream"))


def test_text_tool_calls_that_did_not_help_are_not_kept(agent, llm):
    for _ in range(3):  # with tools, then as text and its one retry
        llm.empty()
    with pytest.raises(providers.ProviderError, match="sent an empty stream"):
        agent.turn("hi")
    assert not agent.model.text_tools
    # the text call is retried once or not at all, as litellm reports an empty stream
    llm.script.clear()
    llm.reply(text="back")
    agent.turn("hi again")
    assert llm.requests[-1]["tools"] and not agent.model.text_tools


def test_max_tokens_is_sent_and_a_cut_answer_says_so(project, llm, amas):
    config_file(project, "max_tokens: 64\n")
    llm.reply(text="It all started when " + "and then " * 20, finish="length")
    llm.reply(text="Short and complete.")
    cut = amas("tell me a story")
    assert cut.exit_code == 0, cut.output
    assert llm.requests[0]["max_tokens"] == 64
    assert "It all started when" in cut.stdout
    assert "the answer was cut at max_tokens (64)" in cut.output
    whole = amas("a short one")
    assert "Short and complete." in whole.stdout and "cut at max_tokens" not in whole.output


# -- context: learnt from the server, compaction, one message too long -----------------------------


def test_llama_cpp_context_from_props_compacts_before_the_server_refuses(agent, llm, capsys):
    # smaller than max_context_tokens (32000)
    llm.props = {"default_generation_settings": {"n_ctx": 4096}}
    first = "first answer " + words(600)
    second = "second answer " + words(600, 1)
    llm.reply(text=first, piece=1024).reply(text=second, piece=1024)  # long: in big chunks
    llm.reply(text="SUMMARY: two questions answered.").reply(text="third answer")
    for question in ("first question", "second question", "third question"):
        agent.turn(question)
    assert "/props" in llm.gets and agent.model.context_limit() == 4096
    first, second, summary, third = llm.requests
    assert (
        "Summarize this conversation" in system(summary) and summary["max_tokens"] == SUMMARY_TOKENS
    )
    assert "SUMMARY: two questions answered." in third["messages"][1]["content"]
    assert third["messages"][-1]["content"] == "third question"
    assert len(json.dumps(third)) < len(json.dumps(second))
    assert "compacted 4 messages" in capsys.readouterr().err


def test_ollamas_openai_api_says_its_context_once_a_request_loaded_the_model(repl, llm):
    """Ollama's /v1 takes no context size per request and silently cuts a longer prompt; its /api/ps
    lists the context a model was loaded with, but only once a request has loaded it: amas asks
    again after the first reply, and plans for that size from then on."""
    loaded = {"name": "test-model:latest", "model": "test-model:latest", "context_length": 4096}
    llm.loaded = [loaded]
    llm.reply(text="Hello there.")
    child = repl()
    child.sendline("hi")
    child.expect("Hello there.")
    child.sendline("/tokens")
    child.expect(r"\(the context is (\d+);")
    assert child.match[1] == "4096"  # not max_context_tokens (32000)
    assert llm.gets.count("/api/ps") == 2  # before the first request, and once after it


def test_a_server_that_says_no_context_is_asked_once(agent, llm):
    llm.reply(text="one").reply(text="two")
    agent.turn("first")
    agent.turn("second")
    assert llm.gets.count("/props") == llm.gets.count("/api/ps") == 1


def test_ollama_context_from_api_show_becomes_num_ctx(project, monkeypatch):
    from click.testing import CliRunner
    from test_providers import Ollama

    from amas_code.amas import cli

    class SmallOllama(Ollama):
        def answer(self, path, headers, body):
            if path == "/api/show":
                return self.json(
                    200, {"template": "{{ .Prompt }}", "model_info": {"qwen2.context_length": 4096}}
                )
            return super().answer(path, headers, body)

    ollama = SmallOllama()
    try:
        monkeypatch.setenv("AMAS_MODEL", ollama.model)
        monkeypatch.setenv("AMAS_API_BASE", ollama.api_base)
        ollama.reply("hello")
        result = CliRunner().invoke(cli, ["hi"])
    finally:
        ollama.close()
    assert result.exit_code == 0, result.output
    (chat,) = ollama.chats
    assert chat["options"]["num_ctx"] == 4096  # the server's window, not max_context_tokens (32000)


def test_one_huge_tool_result_is_cut_to_fit_a_small_server_context(agent, project, llm):
    llm.props = {"default_generation_settings": {"n_ctx": 2048}}
    a_big_file(project / "big.txt", 8000)
    llm.reply(tool="read_file", path="big.txt").reply(text="It is big.")
    agent.turn("what is in big.txt?")
    result = llm.requests[1]["messages"][-1]
    assert result["role"] == "tool" and "characters cut" in result["content"]
    assert len(result["content"]) < 4200  # not the 60,000 characters a large context would take


def test_a_tool_result_too_long_for_the_server_is_shrunk_and_the_call_retried(
    agent, project, llm, capsys
):
    a_big_file(project / "big.txt", 12000)
    llm.reply(tool="read_file", path="big.txt")
    llm.error(
        400,
        "This model's maximum context length is 8192 tokens. However, you requested 15000 tokens.",
    )
    llm.reply(text="It is big.")
    agent.turn("what is in big.txt?")
    too_long, retried = (r["messages"][-1]["content"] for r in llm.requests[1:])
    assert len(retried) < len(too_long) and "characters cut" in retried
    assert agent.messages[-1]["content"] == "It is big."
    assert "cut 1 long tool result so the conversation fits the context" in capsys.readouterr().err


def test_a_minified_file_can_be_read_in_part(agent, project, llm):
    (project / "app.min.js").write_text("var a=1;" * 8000)  # 64 KB on one line
    llm.reply(tool="read_file", path="app.min.js").reply(text="Minified.")
    agent.turn("what is app.min.js?")
    assert "var a=1;var a=1;" in llm.requests[1]["messages"][-1]["content"]


def test_a_message_too_long_for_the_server_does_not_break_the_next_turn(agent, llm):
    llm.error(
        400,
        "This model's maximum context length is 8192 tokens. However, you requested 30000 tokens.",
    )
    with pytest.raises(
        providers.ProviderError, match="longer than openai/test-model's context window"
    ):
        agent.turn("explain this log: " + words(9000))
    llm.reply(text="Ask away.")
    agent.turn("a short question")
    sent = json.dumps(llm.requests[-1]["messages"])
    assert "explain this log" not in sent and agent.messages[-1]["content"] == "Ask away."


def test_compact_command_after_two_long_turns(agent, llm, capsys):
    first = "first answer " + words(600)
    second = "second answer " + words(600, 1)
    llm.reply(text=first, piece=1024).reply(text=second, piece=1024)  # long: in big chunks
    agent.turn("first question")
    agent.turn("second question")
    llm.reply(text="SUMMARY: the first question was answered.")
    repl.command(agent, "/compact")
    summary = llm.requests[2]
    assert (
        "Summarize this conversation" in system(summary) and summary["max_tokens"] == SUMMARY_TOKENS
    )
    assert "first answer" in summary["messages"][1]["content"]
    # the latest turn stays verbatim
    assert "second answer" not in summary["messages"][1]["content"]
    assert "compacted 2 messages" in capsys.readouterr().err
    assert agent.messages[0]["content"].endswith("SUMMARY: the first question was answered.")
    assert agent.messages[-2]["content"] == "second question"


def test_a_summary_that_is_not_shorter_changes_nothing(agent, llm, capsys):
    llm.reply(text="ok").reply(text="fine")
    agent.turn("one")
    agent.turn("two")
    before = [dict(m) for m in agent.messages]
    llm.reply(text="SUMMARY: " + words(500))
    repl.command(agent, "/compact")
    assert (
        "the summary was not shorter than what it would replace; nothing changed"
        in capsys.readouterr().err
    )
    assert agent.messages == before


def test_compact_shows_a_spinner_while_the_model_summarizes(agent, llm, monkeypatch):
    from rich.console import Console

    llm.reply(text="first answer " + words(300)).reply(text="second answer")
    agent.turn("first question")
    agent.turn("second question")
    screen = io.StringIO()  # a terminal's stderr, as the person at it sees it
    monkeypatch.setattr(
        ui, "console", Console(file=screen, force_terminal=True, width=100, highlight=False)
    )
    llm.reply(text="SUMMARY: short.", wait=1)  # a slow summary, so the spinner has time to draw
    repl.command(agent, "/compact")
    shown = screen.getvalue()
    assert "thinking" in shown and "compacted 2 messages" in shown
    assert shown.index("thinking") < shown.index("compacted 2 messages")


# -- what the user sees ----------------------------------------------------------------------------


def test_answers_keep_names_and_unfenced_code_intact(project, llm, amas):
    answer = (
        "Put it in pkg/__init__.py, run it with `python -m pkg`, and keep **kwargs:\n"
        "def main(*args, **kwargs):\n"
        "    return __name__\n"
        "\n"
        'if __name__ == "__main__":\n'
        "    main()"
    )
    llm.reply(text=answer)
    result = amas("where does it go?")
    assert result.exit_code == 0, result.output
    assert answer in result.stdout


DRIVER = """
import json, os, sys
from amas_code.amas import cli
start = dict(os.environ)  # amas takes its keys out of the environment: each run starts afresh
for model, base in json.loads(sys.argv[1]):
    os.environ.update(start, AMAS_MODEL=model, AMAS_API_BASE=base)
    print("=== " + model + " " + base, flush=True)
    try:
        cli(["hi"])
    except SystemExit as e:
        print(f"exit {e.code}", flush=True)
"""


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_no_litellm_warnings_reach_the_screen(project, llm):
    for _ in range(4):
        llm.reply(text="hello there")
    dead = f"http://127.0.0.1:{dead_port()}"
    cases = [
        ("openai/x", llm.url),
        ("hosted_vllm/x", llm.url),
        ("ollama/x", dead),
        ("ollama_chat/x", dead),
        ("gemini/x", dead),
        ("anthropic/x", dead),
    ]
    # as a user runs it: no LITELLM_* variables (amas must keep litellm from fetching its price map,
    # which warns); any request that is not to 127.0.0.1 goes to a dead proxy,
    # so nothing leaves the machine
    clean = {k: v for k, v in amas_env().items() if not k.startswith("LITELLM")}
    proxies = {
        v: dead
        for v in (
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "ALL_PROXY",
            "http_proxy",
            "https_proxy",
            "all_proxy",
        )
    }
    clean.update(proxies, NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    env = {**clean, "AMAS_API_KEY": "fake-key-1234567890"}
    result = (
        subprocess.run(  # one process, as `amas "hi"` once per model: litellm's import is paid once
            [sys.executable, "-c", DRIVER, json.dumps(cases)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=project,
            env=env,
            timeout=120,
        )
    )
    runs = result.stdout.split("=== ")[1:]
    assert len(runs) == len(cases) and result.returncode == 0, result.stdout
    for (model, base), run in zip(cases, runs, strict=True):
        lines = run.splitlines()
        assert (
            lines[0] == f"{model} {base}" and lines[-1] == f"exit {0 if base == llm.url else 1}"
        ), lines
        noise = [
            line
            for line in lines
            if any(word in line for word in ("LiteLLM", "WARNING", "Provider List"))
        ]
        assert not noise and "Traceback" not in run, lines
    assert result.stdout.count("hello there") == 2


def test_without_a_browser_the_browser_tools_and_prompt_are_left_out(project, llm, tmp_path):
    bin_dir, browsers = tmp_path / "bin", tmp_path / "no-browsers"
    bin_dir.mkdir()
    browsers.mkdir()
    (bin_dir / "git").symlink_to(
        subprocess.run(["which", "git"], capture_output=True, text=True).stdout.strip()
    )
    env = {"PATH": str(bin_dir), "PLAYWRIGHT_BROWSERS_PATH": str(browsers)}
    llm.reply(text="done")
    result = run_amas("hi", llm=llm, env=env)
    assert result.returncode == 0, result.stderr
    (sent,) = llm.requests
    offered = {t["function"]["name"] for t in sent["tools"]}
    assert {"read_file", "fetch_url", "search_google"} <= offered and not offered & BROWSER_TOOLS
    assert "# Browser Control" not in system(sent) and "navigate" not in system(sent)
