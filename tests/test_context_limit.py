"""Issue 39 item 4: the context size learned from the server (its model metadata, or the number in
its overflow error, in each server's words), then one compaction and one retry; an overflow amas
cannot fix names the setting; /tokens marks estimates when the server sends no counts."""

import json

import pytest
from conftest import make_config

from amas_code import providers, repl
from amas_code.agent import Agent

LEARNED = 4096  # the server's context in every phrasing below; amas plans for 32,000 by default
# each server's overflow error, as its body reads (the phrasings found in their code and issues)
PHRASINGS = {
    "llama.cpp": {
        "error": {
            "code": 400,
            "message": "request (16761 tokens) exceeds the available context size (4096 tokens), "
            "try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 16761,
            "n_ctx": 4096,
        }
    },
    "llama.cpp, message alone": {
        "error": {
            "code": 400,
            "message": "input (16761 tokens) is larger than the max context size (4096 tokens). "
            "skipping",
            "type": "exceed_context_size_error",
        }
    },
    "llama-cpp-python": {  # its server's words; the Llama class raises the ones in the next case
        "error": {
            "message": "This model's maximum context length is 4096 tokens. However, you requested "
            "16761 tokens (16761 in the messages, 0 in the completion). Please reduce the length "
            "of the messages or completion.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    },
    "llama-cpp-python, raw": {
        "error": {"message": "Requested tokens (16761) exceed context window of 4096"}
    },
    "vLLM": {
        "object": "error",
        "message": "This model's maximum context length is 4096 tokens. However, you requested "
        "16761 tokens (8569 in the messages, 8192 in the completion). Please reduce the length of "
        "the messages or completion.",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    },
    "vLLM, prompt alone": {
        "object": "error",
        "message": "The decoder prompt (length 16761) is longer than the maximum model length of "
        "4096. Make sure that `max_model_len` is no smaller than the number of text tokens.",
        "type": "BadRequestError",
        "code": 400,
    },
    "LM Studio": {
        "error": "The number of tokens to keep from the initial prompt is greater than the context "
        "length (n_keep: 16761>= n_ctx: 4096). Try to load the model with a larger context length, "
        "or provide a shorter input."
    },
    "LM Studio, older": {
        "error": "Trying to keep the first 16761 tokens when context the overflows. However, the "
        "model is loaded with context length of only 4096 tokens, which is not enough. Try to load "
        "the model with a larger context length, or provide a shorter input."
    },
}


def words(n: int, seed: int = 0) -> str:
    return " ".join(f"w{(i + seed) * 7919 % 10007}" for i in range(n))


def long_first_turn(agent, llm) -> None:
    """One turn whose answer alone is more than a 4,096-token context allows (streamed in 1 KB
    chunks: in 7-character ones litellm's per-chunk work took half a second of every test)."""
    llm.reply(text="first answer " + words(1500), piece=1024)
    agent.turn("first question")


def overflow_then_fit(agent, llm, **error) -> tuple[dict, dict, dict]:
    """The second turn overflows once, is compacted and sent again: the three requests."""
    long_first_turn(agent, llm)
    llm.error(400, **error)
    llm.reply(text="SUMMARY: one long answer.").reply(text="second answer")
    agent.turn("second question")
    overflowed, summary, retried = llm.requests[1:]
    assert "Summarize this conversation" in summary["messages"][0]["content"]
    # the summary, too, is asked within what was learned
    assert summary["max_tokens"] == agent.model.context_limit() // 4
    assert agent.messages[-1]["content"] == "second answer"
    return overflowed, summary, retried


@pytest.mark.parametrize("server", PHRASINGS)
def test_an_overflow_in_each_servers_words_teaches_the_context_and_is_retried_once(
    agent, llm, capsys, server
):
    overflowed, summary, retried = overflow_then_fit(agent, llm, body=PHRASINGS[server])
    assert agent.model.context_limit() == LEARNED and agent.context.limit() == 3072
    assert overflowed["max_tokens"] == 8192 and retried["max_tokens"] == LEARNED // 4
    assert "SUMMARY: one long answer." in retried["messages"][1]["content"]
    assert len(json.dumps(retried["messages"])) // 3 < 3072  # fits what the server said, estimated
    assert "compacted 2 messages" in capsys.readouterr().err
    llm.reply(text="third answer")
    agent.turn("third question")  # the learned size stays for the session
    assert llm.requests[-1]["max_tokens"] == LEARNED // 4
    model = agent.model.name
    agent.switch_model("openai/other-model")  # another model on the same server learns its own
    assert agent.model.context_limit() != LEARNED
    agent.switch_model(model)  # and this one's, learned, stays for the session
    assert agent.model.context_limit() == LEARNED


def test_ollama_says_only_by_how_much_and_the_request_less_that_is_learned(agent, llm):
    message = "prompt too long; exceeded max context length by 1000 tokens"
    overflowed, _, retried = overflow_then_fit(agent, llm, message=message, kind="api_error")
    size = agent.model.count_tokens(overflowed["messages"]) - 1000  # by its path's tokenizer
    assert abs(agent.model.context_limit() - size) < 20
    assert retried["max_tokens"] == agent.model.context_limit() // 4


def test_an_empty_stream_is_asked_again_unstreamed_to_read_the_servers_overflow(agent, llm):
    """llama-cpp-python fails inside a stream past its context (200, no data) and says why in a
    plain answer: that answer is read, not 'sent an empty stream'."""
    long_first_turn(agent, llm)
    llm.empty(400, PHRASINGS["llama-cpp-python"])
    llm.reply(text="SUMMARY: one long answer.").reply(text="second answer")
    agent.turn("second question")
    streamed, probe, summary, retried = llm.requests[1:]
    assert streamed["stream"] and not probe.get("stream") and probe["max_tokens"] == 1
    assert probe["messages"] == streamed["messages"]
    assert agent.model.context_limit() == LEARNED and retried["max_tokens"] == LEARNED // 4
    assert agent.messages[-1]["content"] == "second answer"


def test_metadata_in_v1_models_gives_the_context_before_any_request(agent, llm):
    llm.models = [{"id": "test-model", "object": "model", "max_model_len": 4096}]  # vLLM
    assert agent.model.context_limit() == 4096 and "/v1/models" in llm.gets


@pytest.mark.parametrize(
    "entry",
    [
        {"loaded_context_length": 8192, "max_context_length": 131072},  # LM Studio: as loaded
        {"max_context_length": 8192},
    ],
)
def test_lm_studio_metadata_gives_the_loaded_context(project, llm, entry):
    config = make_config(model="lm_studio/test-model", api_base=llm.url, api_key="k")
    llm.models = [{"id": "other"}, {"id": "test-model", "object": "model", **entry}]
    assert Agent(config, project).model.context_limit() == 8192


def test_lm_studio_own_list_gives_the_loaded_context(agent, llm):
    """LM Studio's /v1/models lists names only; its /api/v0/models has the sizes."""
    entry = {"id": "test-model", "loaded_context_length": 4096, "max_context_length": 32768}
    llm.lm_studio = [{"id": "other", "max_context_length": 2048}, entry]
    assert agent.model.context_limit() == 4096 and "/api/v0/models" in llm.gets


def test_a_server_that_says_nothing_keeps_the_configured_size(agent, llm):
    assert agent.model.context_limit() == 32000  # llama-cpp-python: /v1/models has no size


def test_an_overflow_that_cannot_be_fixed_names_the_size_and_the_setting(agent, llm):
    llm.error(400, body=PHRASINGS["llama-cpp-python, raw"])
    with pytest.raises(providers.ProviderError) as raised:
        agent.turn("explain this log: " + words(9000))
    said = str(raised.value)
    assert "longer than openai/test-model's context window" in said
    assert "4,096 tokens, as the server said" in said and "max_context_tokens" in said


def test_an_overflow_without_a_number_says_to_set_max_context_tokens(agent, llm):
    llm.error(400, "the request exceeds the available context size, try increasing it")
    with pytest.raises(providers.ProviderError, match="set `max_context_tokens` to the server's"):
        agent.turn("explain this log: " + words(9000))
    assert agent.model.context_limit() == 32000  # nothing learned


def test_tokens_are_estimated_and_marked_when_the_server_sends_no_counts(agent, llm, capsys):
    llm.reply(text="an answer of a few words", usage=False)
    agent.turn("a question")
    repl.command(agent, "/tokens")
    shown = capsys.readouterr().err
    assert "(estimated: the server sends no counts)" in shown and "prompt ~0 " not in shown
    assert agent.model.usage["prompt_tokens"] > 100  # the system prompt, at least


def test_tokens_the_server_counts_are_shown_as_counted(agent, llm, capsys):
    llm.reply(text="an answer")
    agent.turn("a question")
    repl.command(agent, "/tokens")
    shown = capsys.readouterr().err
    assert "prompt 10 + completion 5 tokens" in shown and "estimated" not in shown


def test_ollama_native_overflow_lowers_num_ctx_for_the_retry(project):
    """Through Ollama's own /api/chat: its error is {"error": "prompt too long; …"}; the retry
    after compaction asks for the learned window as num_ctx."""
    from test_providers import Ollama

    class Overflowing(Ollama):
        overflowed = False

        def answer(self, path, headers, body):
            if path == self.chat_path and len(self.chats) == 1 and not self.overflowed:
                self.overflowed = True
                return self.json(
                    400, {"error": "prompt too long; exceeded max context length by 1000 tokens"}
                )
            return super().answer(path, headers, body)

    ollama = Overflowing(key=None)
    try:
        config = make_config(model=ollama.model, api_base=ollama.api_base)
        agent = Agent(config, project)
        ollama.reply("first answer " + words(1500))
        agent.turn("first question")
        ollama.reply("SUMMARY: one long answer.").reply("second answer")
        agent.turn("second question")
    finally:
        ollama.close()
    first, overflowed, summary, retried = ollama.chats
    learned = agent.model.context_limit()
    assert first["options"]["num_ctx"] == overflowed["options"]["num_ctx"] == 32000
    assert learned < 32000 and retried["options"]["num_ctx"] == learned
    assert retried["options"]["num_predict"] == learned // 4
    assert agent.messages[-1]["content"] == "second answer"


def test_the_servers_body_is_read_where_the_message_leaves_it_out():
    class Refused(Exception):
        status_code = 400
        body = {"error": {"message": "Requested tokens (9000) exceed context window of 2048"}}

    config = make_config(model="openai/x", api_base="http://127.0.0.1:9/v1", max_tokens=8192)
    model = providers.Model(config)
    error = model.explain(Refused("Error code: 400"))
    assert error.kind == "context" and model.learned == 2048
    assert "exceed context window of 2048" in str(error)


def test_a_small_context_gets_a_smaller_first_request(agent, llm):
    """A small local model reads every token of the first request before it can answer (~15 a
    second on a Pi): under 16,000 tokens of context the browser's tools are not offered and the
    system prompt's budget shrinks with the context (its map's share first)."""
    if "navigate" not in agent.tools.names:
        pytest.skip("no browser here: its tools are never offered")
    assert agent.context.budget() == 2000  # 32,000 tokens: the whole budget, the browser's tools
    assert "navigate" in [t["function"]["name"] for t in agent.context.offered(agent.tools)]
    agent.model.context = None  # as a new session would find it: the server is asked
    llm.props = {"default_generation_settings": {"n_ctx": 4096}}
    llm.reply(text="ok")
    agent.turn("hello")
    sent = llm.requests[0]
    names = [t["function"]["name"] for t in sent["tools"]]
    assert "navigate" not in names and "fetch_url" not in names and "read_file" in names
    assert "# Browser Control" not in sent["messages"][0]["content"]
    assert agent.context.budget() == agent.context.limit() // 8 == 384  # 4,096 less the answer's
