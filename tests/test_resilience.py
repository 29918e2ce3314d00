"""Provider trouble and bad model output:
each becomes one clear line or tool result, never a traceback."""

import pytest
from conftest import API_KEY, amas_home, make_config, run_amas

from amas_code import providers


@pytest.mark.parametrize(
    "status, message, line, sent",
    [
        (401, "Incorrect API key", "authentication failed for openai/test-model", 1),
        (403, "forbidden", "access denied (403) for openai/test-model", 1),
        (
            404,
            "The model `test-model` does not exist",
            "model openai/test-model not found (404)",
            1,
        ),
        (429, "Rate limit reached", "rate limited (429) by the provider, even after retries", 3),
        (500, "boom", "failed (5xx), even after a retry", 2),
    ],
)
def test_http_errors_give_one_clear_line(agent, llm, status, message, line, sent):
    for _ in range(sent):
        llm.error(status, message, headers={"Retry-After": "0"})  # the waits: the test below
    with pytest.raises(providers.ProviderError) as err:
        agent.turn("hello")
    assert line in str(err.value)
    assert len(llm.requests) == sent  # 429 and 5xx retried through litellm; auth errors never


@pytest.mark.parametrize("model", ["openai/test-model", "custom_openai/test-model"])
def test_a_rate_limit_waits_what_retry_after_asks(project, llm, monkeypatch, model):
    """A provider that says how long to wait (Retry-After) is waited that long, at most a minute;
    without it, 1 s then 2 s. On both paths (the openai SDK's and litellm's)."""
    from amas_code.agent import Agent

    waited = []
    backoff = providers._backoff
    monkeypatch.setattr(providers, "_backoff", lambda *a: waited.append(backoff(*a)) or 0)
    amas_home.set_trust(project, True)
    agent = Agent(make_config(model=model, api_base=llm.url, api_key=API_KEY), project)
    llm.error(429, "slow down", headers={"Retry-After": "0"})
    llm.error(429, "slow down", headers={"Retry-After": "3600"}).reply(text="hello")
    agent.turn("hi")
    llm.error(429, "slow down").error(429, "slow down").reply(text="hello again")
    agent.turn("hi again")
    assert waited == [0.0, 60.0, 1, 2]


def test_one_shot_error_is_a_line_not_a_traceback(project, llm):
    llm.error(404, "The model `test-model` does not exist")
    result = run_amas("hello", llm=llm, input="")
    assert result.returncode == 1
    assert result.stderr.startswith("✗ model openai/test-model not found (404)")
    assert "Traceback" not in result.stderr + result.stdout


def test_connection_reset_mid_stream_keeps_the_partial_answer(agent, llm, capsys):
    llm.error(200, cut_after="The first half of a long answer")
    with pytest.raises(
        providers.ProviderError, match="closed the connection in the middle of the answer"
    ):
        agent.turn("explain")
    # the answer, and no error, on stdout
    assert capsys.readouterr().out == "The first half of a long answer\n"
    assert agent.messages[-1]["content"].startswith(
        "The first half of a long answer\n\n[connection lost mid-answer"
    )


def test_a_one_shot_cut_mid_answer_fails_with_the_answer_on_stdout_and_the_error_on_stderr(
    project, llm
):
    llm.error(200, cut_after="The first half")
    result = run_amas("explain", llm=llm, input="")
    assert result.returncode == 1 and result.stdout == "The first half\n"
    assert result.stderr.startswith("✗ the server at") and "closed the connection" in result.stderr


def test_context_window_exceeded_compacts_and_retries_once(agent, llm):
    llm.reply(text="first answer " + "words " * 300).reply(text="second answer")
    agent.turn("first question " + "context " * 300)
    agent.turn("second question")
    llm.error(
        400,
        "This model's maximum context length is 8192 tokens. "
        "However, your messages resulted in 9000 tokens. Please reduce the length of the messages.",
    )
    llm.reply(text="summary of earlier work")
    llm.reply(text="third answer")
    agent.turn("third question")
    assert "Summarize this conversation" in llm.requests[3]["messages"][0]["content"]
    assert llm.requests[4]["messages"][-1]["content"] == "third question"
    assert agent.messages[-1]["content"] == "third answer"


def test_network_timeout_is_retried_once_then_reported(agent, llm, monkeypatch):
    monkeypatch.setattr(providers, "TIMEOUT", 0.5)
    llm.reply(text="late", wait=3).reply(text="late again", wait=3)
    with pytest.raises(
        providers.ProviderError, match="no answer from .* in time, even after a retry"
    ):
        agent.turn("hello")
    assert len(llm.requests) == 2


def test_malformed_tool_calls_become_tool_results(agent, llm):
    llm.reply(
        calls=[
            ("read_file", "{broken json"),
            ("read_file", '{"path": {"file": "x"}}'),
            ("edit_file", '{"path": "x"}'),
            ("teleport", "{}"),
        ]
    )
    llm.reply(text="recovered")
    agent.turn("go")
    results = [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert results[0].startswith("Error: arguments for read_file are not a JSON object")
    assert results[1] == (
        'Error: argument \'path\' of read_file must be a string, not {"file": "x"}'
    )
    assert results[2] == "Error: edit_file is missing required argument(s): old_str, new_str"
    assert results[3].startswith("Error: unknown tool 'teleport'")
    assert agent.messages[-1]["content"] == "recovered"


def test_null_optional_arguments_are_their_defaults(agent, llm):
    """Qwen2.5-Coder-1.5B on llama.cpp writes `"limit": null` for every optional argument it does
    not mean: the call runs with the defaults, and the model reads the file."""
    nulls = '{"path": "README.md", "offset": null, "limit": null}'
    llm.reply(
        calls=[("read_file", nulls), ("shell_command", '{"command": "true", "timeout": null}')]
    )
    llm.reply(text="read")
    agent.turn("read the readme")
    results = [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert results[0] == "     1\t# demo" and results[1] == "$ true\n[exit code 0]"
