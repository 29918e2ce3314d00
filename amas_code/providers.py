"""The only place litellm is called: a Model streams one reply, counts usage, speaks text tool calls when it must."""

import contextlib
import itertools
import json
import os
import re
import threading
import time

from . import toolcalls, ui

HINTS = {  # what went wrong -> what the user should do; by HTTP status where there is one
    401: "authentication failed for {model}: check {env} or `api_key` in your config",
    403: "access denied (403) for {model}: the key may lack access to this model",
    404: "model {model} not found (404): check the model name (-m) and `api_base`",
    429: "rate limited (429) by the provider, even after retries: wait, or /model another",
    500: "the server at {base} failed (5xx), even after a retry; try again",
    400: "the provider rejected the request",
    "context": "the conversation is longer than {model}'s context window",
    "timeout": "no answer from {base} in time, even after a retry",
    "connection": "cannot reach {base}: is the server running and the address right?",
    "empty": "the server at {base} sent an empty stream: it failed after accepting the request (a prompt longer "
    "than its context?); check its log",
    "dropped": "the server at {base} closed the connection in the middle of the answer; check its log",
    "no tools": "{model} has no native tool calling at this server",
    "provider": "unknown model {model!r}: write it as provider/model, e.g. openai/gpt-4.1 or ollama_chat/qwen2.5-coder",
}
RETRIES = {
    429: 2,
    500: 1,
    "timeout": 1,
    "connection": 1,
    "empty": 1,
    "dropped": 1,
}  # others never (auth, 404...)
SYMPTOMS = {  # the kind of failure, from the words of litellm's or the server's message
    "context": r"context.{0,20}(length|window|size)|maximum context|too many tokens|prompt is too long",
    "timeout": r"timed out|timeout",
    "dropped": r"peer closed connection|incomplete chunked read|connection reset",
    "connection": r"connection (error|refused)|name or service not known|failed to establish",
    "provider": r"LLM Provider NOT provided",
    "no tools": r"does not support tools|tools? (are|is) not supported|tool use is not supported|--jinja"
    r"|auto.tool.choice|Cannot use tools with stream",
}
TIMEOUT = (
    600  # seconds without an answer before a request counts as timed out (local models are slow)
)
MESSAGE = re.compile(r'"(?:message|error)":\s*"((?:[^"\\]|\\.)*)"')
NULL_CONTENT = (
    "gemini/",
    "vertex_ai/",
    "anthropic/",
)  # reject an empty text part; others reject a null one


class ProviderError(Exception):
    """A failed model call, with one line saying what to do."""

    def __init__(self, line: str, kind=None, partial: bool = False):
        super().__init__(line)
        self.kind, self.partial = kind, partial


class NoNativeTools(ProviderError):
    """The model or its server cannot take tools natively: the caller switches to text tool calls."""


def load():
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no price-map fetch at import
    os.environ.setdefault("LITELLM_LOG", "ERROR")  # its WARNING lines are not for our users
    # else it loads a .env found up from its folder (a clone's)
    os.environ.setdefault("LITELLM_MODE", "PRODUCTION")
    import litellm

    litellm.suppress_debug_info = True  # else "Provider List: ..." lands on stdout
    litellm.drop_params = True  # a provider that lacks an option drops it instead of failing
    # else every streamed reply loads tiktoken (+37 MB) to price itself
    litellm.disable_token_counter = True
    # else each streamed chunk is handed to a logging thread that starts an event loop for it: half
    # a long reply's CPU, for callbacks amas never sets (it counts usage itself)
    litellm.disable_streaming_logging = True
    return litellm


# set while no background import of litellm is under way (cleared while preload runs)
LOADED = threading.Event()
LOADED.set()


def preload() -> None:
    """Import what a turn needs in a thread: the reply's spinner and Markdown first (litellm imports
    part of them too, and a turn that started meanwhile imports them itself), then litellm."""
    LOADED.clear()

    def run():
        try:
            ui.warm()
            load()
        finally:
            LOADED.set()

    threading.Thread(target=run, daemon=True).start()


def preloaded() -> bool:
    """Whether no preload is still importing (a turn waits for it: an import interrupted half way
    may leave its lock held)."""
    return LOADED.is_set()


def take_keys(config: dict) -> dict:
    """Move secret-named variables out of amas's environment into the config (called once, at start): no child
    (command, git, the browser's driver) inherits them, and each model call borrows them back (lent)."""
    from amas_code import redact

    kept = redact.child_env(config)
    taken = {name: value for name, value in os.environ.items() if name not in kept}
    for name in taken:
        del os.environ[name]
    return {**config, "env_keys": taken}


@contextlib.contextmanager
def lent(keys: dict):
    """The taken keys back in the environment for one model call, where litellm reads its providers' variables;
    amas starts no child meanwhile."""
    os.environ.update(keys)
    try:
        yield
    finally:
        for name in keys:
            os.environ.pop(name, None)


def check(model: str) -> None:
    """Refuse a model string litellm cannot place, with one line."""
    try:
        load().get_llm_provider(model)
    except Exception:
        raise ProviderError(HINTS["provider"].format(model=model), "provider") from None


def token_count(model: str, messages: list[dict]) -> int | None:
    """Tokens in messages by litellm's counter for the model (which loads a tokenizer: call it only
    when needed); None when the counter cannot take them."""
    litellm = load()
    litellm.disable_token_counter = False
    try:
        return litellm.token_counter(model=model, messages=messages)
    except Exception:  # tool-call shapes some counters reject
        return None
    finally:
        litellm.disable_token_counter = True


class Model:
    """One model endpoint as configured: streamed completions, usage, and the text tool protocol when switched on."""

    def __init__(self, config: dict, usage: dict | None = None):
        self.config, self.name = config, config["model"]
        self.text_tools, self.context = config.get("text_tools") is True, None
        self.names = {}  # the tools offered in this request, by name: the text reader reads only these
        self.usage = usage or {
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "cost": 0.0,
            "cost_known": True,
        }

    def complete(self, messages: list[dict], tools: list | None = None, on_text=None) -> dict:
        """Stream one reply: {"role", "content", "tool_calls"?, "cut"?}; retried by status, never after text."""
        if (
            tools
            and not self.text_tools
            and self.config.get("text_tools") is not False
            and not self.native()
        ):
            raise NoNativeTools(
                f"{self.name} has no native tool calling in litellm's model list", "no tools"
            )
        self.names = {t["function"]["name"]: t for t in tools or []}
        if self.text_tools:
            messages, tools = toolcalls.to_text(messages), None
        with lent(self.config.get("env_keys", {})):
            for attempt in itertools.count():
                try:
                    return self.stream(messages, tools, on_text)
                except ProviderError as e:
                    if e.partial or attempt >= RETRIES.get(e.kind, 0):
                        raise
                    time.sleep(2**attempt if e.kind == 429 else 0.2)

    def native(self) -> bool:
        """False when litellm's model map says the model cannot call functions."""
        return load().model_cost.get(self.name, {}).get("supports_function_calling") is not False

    def stream(self, messages: list[dict], tools: list | None, on_text) -> dict:
        """One streamed reply, its text shown as it comes; a failure after text keeps that text."""
        litellm, chunks, partial, streamed = load(), [], None, None
        check(self.name)
        self.check_key()
        try:
            streamed = litellm.completion(**self.kwargs(messages, tools))
            for chunk in streamed:
                chunks.append(chunk)
                text = chunk.choices[0].delta.content if chunk.choices else None
                if text and on_text:
                    on_text(text)
        except Exception as e:
            partial = self.explain(e)
            if not any(c.choices and c.choices[0].delta.content for c in chunks):
                raise partial from None
            partial.partial = True
        finally:
            _close(streamed)
        self.check_answered(chunks, tools)
        return self.reply(litellm, chunks, messages, partial)

    def check_answered(self, chunks: list, tools: list | None) -> None:
        """Refuse a stream in which the server itself sent nothing."""
        if any(
            getattr(c, "usage", None) or c.choices and _carries(c.choices[0].delta) for c in chunks
        ):
            return
        # llama-cpp-python fails inside a stream when the model picks a tool: text calls work
        if tools:
            raise NoNativeTools(
                f"{self.config.get('api_base')} sent nothing back when offered tools"
            )
        raise ProviderError(self.hint("empty", ""), "empty")

    def check_key(self) -> None:
        keys = [] if self.config.get("api_key") or self.config.get("api_base") else self.env_keys()
        if keys:
            where = f"export {' or '.join(keys)}, or set api_key in ~/.amas/config.yaml (or pick another model with -m)"
            raise ProviderError(f"no API key for {self.name}: {where}", 401)

    def env_keys(self) -> list[str]:
        try:
            return [k for k in load().validate_environment(self.name)["missing_keys"] if "KEY" in k]
        except Exception:
            return []

    def kwargs(self, messages: list[dict], tools: list | None) -> dict:
        """litellm.completion's arguments for one streamed reply."""
        base, key = self.config.get("api_base"), self.config.get("api_key")
        kwargs = dict(model=self.name, messages=self.sent(messages), stream=True, timeout=TIMEOUT)
        kwargs.update(api_key=key, api_base=base, stream_options={"include_usage": True})
        kwargs.update(max_retries=0, max_tokens=self.config.get("max_tokens"))
        if tools:  # the private flag skips litellm's MCP gateway (it needs the `mcp` package)
            kwargs.update(tools=tools, tool_choice="auto", _skip_mcp_handler=True)
        if self.name.startswith("ollama"):  # Ollama's default context window is tiny
            kwargs["num_ctx"] = self.context_limit()
        if self.name.startswith("openai/") and base and not (key or os.getenv("OPENAI_API_KEY")):
            kwargs["api_key"] = "no-key"  # llama.cpp needs none, but the OpenAI SDK insists on one
        return kwargs

    def sent(self, messages: list[dict]) -> list[dict]:
        """The messages as sent: a turn that only called tools gets the content each template accepts."""
        silent = {"content": None if self.name.startswith(NULL_CONTENT) else ""}
        return [
            {**m, **silent} if m.get("tool_calls") and not m.get("content") else m for m in messages
        ]

    def hint(self, kind, detail: str) -> str:
        env = ", ".join(self.env_keys()) or "the provider's API key variable"
        base = self.config.get("api_base") or "the provider"
        line = HINTS.get(kind, "the model call failed").format(model=self.name, env=env, base=base)
        return f"{line} ({detail})" if detail else line

    def explain(self, e: Exception) -> ProviderError:
        """One clear line for a failure: its kind from the HTTP status, else from the words of the message."""
        text = re.sub(r"\s+", " ", str(getattr(e, "message", e)))
        found = re.search(r"Error code: (\d{3})", text)
        status = int(found[1]) if found else getattr(e, "status_code", None)
        kind = next((k for k, words in SYMPTOMS.items() if re.search(words, text, re.I)), None)
        kind = kind or (500 if status and status >= 500 else status)
        # the provider's own words, not litellm's wrapping of its JSON body
        detail = MESSAGE.search(text)
        detail = (re.sub(r"\\(.)", r"\1", detail[1]) if detail else text)[:300]
        cls = (
            NoNativeTools
            if kind == "no tools" and self.config.get("text_tools") is not False
            else ProviderError
        )
        return cls(self.hint(kind, detail), kind)

    def reply(self, litellm, chunks: list, messages: list[dict], partial) -> dict:
        if self.name.startswith("ollama"):
            _number_calls(chunks)
        built = litellm.stream_chunk_builder(chunks, messages=messages)
        self.count(litellm, built)
        msg, finish = built.choices[0].message, built.choices[0].finish_reason
        calls = [
            _native(c.id or f"call_{i}", c.function.name, c.function.arguments or "")
            for i, c in enumerate(msg.tool_calls or [])
        ]
        content, unreadable = msg.content or "", None
        if partial:  # the text so far is the answer; the caller says what went wrong
            calls = []
        elif not calls and self.names:  # text mode, or a native server that left a call in the text
            calls, content, unreadable = toolcalls.read(content, self.names)
        reply = {"role": "assistant", "content": content, "tool_calls": calls}
        reply |= {"unreadable": unreadable, "cut": finish == "length", "lost": partial}
        return {k: v for k, v in reply.items() if v or k == "content"}  # only what is there

    def count(self, litellm, built) -> None:
        usage = getattr(built, "usage", None)
        self.usage["prompt_tokens"] += getattr(usage, "prompt_tokens", 0) or 0
        self.usage["completion_tokens"] += getattr(usage, "completion_tokens", 0) or 0
        try:
            self.usage["cost"] += litellm.completion_cost(completion_response=built) or 0.0
        except Exception:  # unknown models have no price
            self.usage["cost_known"] = False

    def context_limit(self) -> int:
        """Tokens the conversation may use: max_context_tokens, or less if the server says its window is smaller."""
        if self.context is None:
            self.context = min(self.config["max_context_tokens"], self.server_context() or 10**9)
        return self.context

    def server_context(self) -> int | None:
        """The context size a local server reports: llama.cpp's /props, Ollama's /api/show."""
        base = (self.config.get("api_base") or "").rstrip("/")
        if not base.startswith(("http://", "https://")):
            return None
        try:
            if self.name.startswith("ollama"):
                ask = json.dumps({"name": self.name.split("/", 1)[1]}).encode()
                info = _get_json(f"{base}/api/show", ask)
                return next(
                    v
                    for k, v in info.get("model_info", {}).items()
                    if k.endswith(".context_length")
                )
            if self.name.startswith(("openai/", "hosted_vllm/")):
                props = _get_json(base.removesuffix("/v1") + "/props")
                return props.get("default_generation_settings", props).get("n_ctx")
        except Exception:  # not a server that tells: the configured size stands
            return None
        return None

    def tool_prompt(self, tools: list[dict]) -> str:
        """The tools described in the system prompt, when calls are written as text."""
        return toolcalls.describe(tools) if self.text_tools else ""


def _get_json(url: str, data: bytes | None = None):
    """A local server's JSON answer (urllib, not httpx: a client builds an SSL context, ~0.15 s, first)."""
    import urllib.request

    with urllib.request.urlopen(url, data, timeout=3) as answer:
        return json.load(answer)


def _close(streamed) -> None:
    """End the HTTP response under a stream now, read to its end or not: closed by the garbage collector inside the
    next request, it waits for the pool lock that request holds, forever (httpcore issue 990)."""
    inner = getattr(streamed, "completion_stream", None)
    for stream in (
        getattr(inner, "streaming_response", None),
        inner,
    ):  # litellm's own iterators; the SDKs' streams
        with contextlib.suppress(Exception):
            stream.close()


def _carries(delta) -> bool:
    """A streamed delta from the server itself (litellm adds an empty one of its own to a stream with no data)."""
    return bool(delta.role or delta.content or delta.tool_calls)


def _number_calls(chunks: list) -> None:
    """Ollama streams each tool call whole, with no index and no id: without this, calls in separate chunks merge
    into one, and a call with no arguments is dropped by stream_chunk_builder."""
    calls = [
        c for chunk in chunks if chunk.choices for c in chunk.choices[0].delta.tool_calls or []
    ]
    for i, call in enumerate(calls):
        call.index, call.id = i, call.id or f"call_{i}"


def _native(cid: str, name: str, args) -> dict:
    """A tool call in OpenAI's shape."""
    args = args if isinstance(args, str) else json.dumps(args)
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
