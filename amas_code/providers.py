"""Models behind one interface: a Model streams one reply, counts usage, speaks text tool calls when
it must. The only place litellm is called (every provider it knows); a server of the user's own that
speaks OpenAI's API goes the direct path instead (direct.py: the openai SDK, without litellm's
import)."""

import contextlib
import copy
import functools
import ipaddress
import itertools
import json
import math
import os
import re
import socket
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

from . import direct, toolcalls, ui

HINTS = {  # what went wrong -> what the user should do; by HTTP status where there is one
    401: "authentication failed for {model}: check {env} or `api_key` in your config",
    403: "access denied (403) for {model}: the key may lack access to this model",
    404: "model {model} not found (404): check the model name (-m) and `api_base`",
    429: "rate limited (429) by the provider, even after retries: wait, or /model another",
    500: "the server at {base} failed (5xx), even after a retry; try again",
    400: "the provider rejected the request",
    "context": "the conversation is longer than {model}'s context window at {base}{size}, "
    "even compacted: {fix}",
    "timeout": "no answer from {base} in time, even after a retry",
    "connection": "cannot reach {base}: is the server running and the address right?",
    "empty": "the server at {base} sent an empty stream: it failed after accepting the request "
    "(a prompt longer than its context?); check its log",
    "dropped": "the server at {base} closed the connection in the middle of the answer; "
    "check its log",
    "no tools": "{model} has no native tool calling at this server",
    "provider": "unknown model {model!r}: write it as provider/model, e.g. openai/gpt-4.1 or "
    "ollama_chat/qwen2.5-coder",
}
# others never (auth, 404...)
RETRIES = {429: 2, 500: 1, "timeout": 1, "connection": 1, "empty": 1, "dropped": 1}
RETRY_AFTER = 60  # seconds at most of a server's Retry-After that a retry waits
SYMPTOMS = {  # the kind of failure, from the words of litellm's or the server's message
    "context": r"context.{0,20}(length|window|size)|maximum context|too many tokens"
    r"|prompt is too long|maximum model length",
    "timeout": r"timed out|timeout",
    "dropped": r"peer closed connection|incomplete chunked read|connection reset",
    "connection": r"connection (error|refused)|name or service not known|failed to establish",
    "provider": r"LLM Provider NOT provided",
    "no tools": r"does not support tools|tools? (are|is) not supported|tool use is not supported"
    r"|--jinja|auto.tool.choice|Cannot use tools with stream",
}
KEYS = {  # the key variables of the providers the README lists, and a few more, by prefix
    "gemini": ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "xai": ("XAI_API_KEY",),
}
# seconds without an answer before a request counts as timed out (local models are slow)
TIMEOUT = 600
OVERFLOW = (  # the server's context size in the words of its overflow error
    r"n_ctx\W{0,3}(\d+)",  # llama.cpp's error fields ('n_ctx': 4096); LM Studio's (n_ctx: 4096)
    r"context size \((\d+)",  # llama.cpp: request (N tokens) exceeds the available context size
    r"context window of (\d+)",  # llama-cpp-python: Requested tokens (N) exceed context window of
    r"maximum context length is (\d+)",  # vLLM, llama-cpp-python's server (OpenAI's words)
    r"maximum model length of (\d+)",  # vLLM: The decoder prompt (length N) is longer than the …
    r"context length of only (\d+)",  # LM Studio: the model is loaded with context length of only
)
OVER_BY = r"exceeded max context length by (\d+) tokens"  # Ollama says by how much, not the size
# where /v1/models says a model's context: LM Studio, vLLM, LM Studio's largest, others
LISTED = ("loaded_context_length", "max_model_len", "max_context_length", "context_length")
CHARS_PER_TOKEN = 3  # a rough, high-side estimate without a tokenizer
PROBE_TIMEOUT = 60  # seconds for the unstreamed ask after an empty stream
# a reply whose last LOOP characters stand LOOPS times in it is going round in circles (a small
# model repeated one paragraph until max_tokens: 13 minutes at its speed); looked at every LOOK
LOOP = 400
LOOPS = 6
LOOK = 256
# litellm's names for an error before the server's words (litellm.BadRequestError: …Exception - )
WRAPPING = r"^(?:(?:litellm\.)?\w+(?:Error|Exception)(?::| -) )+"
MESSAGE = re.compile(r'"(?:message|error)":\s*"((?:[^"\\]|\\.)*)"')
# reject an empty text part; others reject a null one
NULL_CONTENT = ("gemini/", "vertex_ai/", "anthropic/")
# prefixes that, at an api_base, name a server speaking OpenAI's chat API itself: the direct path.
# Not OpenAI's own API nor OpenRouter (no api_base): litellm's price table and its options for
# reasoning models are worth its import there (docs/models.md#which-path).
DIRECT = ("openai", "hosted_vllm", "lm_studio")
# the sampling temperature asked of a server of your own (api_base): llama-server's default is 0.8,
# at which Qwen2.5-Coder-1.5B answered 5 of 6 coding tasks in prose; at 0 it called a tool in 5 of 6
LOCAL_TEMPERATURE = 0
# where a provider of this machine listens when no api_base is given
DEFAULT_BASES = {"ollama": "http://localhost:11434", "ollama_chat": "http://localhost:11434"}
CONNECT = 3  # seconds for the one connect that tells a local server is listening, before any import


class ProviderError(Exception):
    """A failed model call, with one line saying what to do."""

    def __init__(self, line: str, kind=None, partial: bool = False):
        super().__init__(line)
        self.kind = kind
        self.partial = partial
        self.said = ""  # the server's own words, whole (the line may cut them)
        self.wait = None  # seconds the server asked to wait before a retry (Retry-After)


class Looping(Exception):
    """The reply repeats itself: `kept` is its text up to the end of the first round."""

    def __init__(self, kept: str):
        super().__init__("the reply repeats itself")
        self.kept = kept


class NoNativeTools(ProviderError):
    """The model or its server cannot take tools natively:
    the caller switches to text tool calls."""


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


def is_direct(model: str, base: str | None) -> bool:
    """Whether a model goes the direct path: a prefix of DIRECT, at an api_base."""
    return bool(base) and model.split("/", 1)[0] in DIRECT and "/" in model


# set while no background import of a model library is under way (cleared while preload runs)
LOADED = threading.Event()
LOADED.set()


def preload(direct_path: bool = False) -> None:
    """Import what a turn needs in a thread: the reply's spinner and Markdown first (litellm imports
    part of them too, and a turn that started meanwhile imports them itself), then the model's
    library: the openai SDK on the direct path, else litellm."""
    LOADED.clear()

    def imported():
        try:
            ui.warm()
            if direct_path:
                direct.load()
            else:
                load()
        finally:
            LOADED.set()

    threading.Thread(target=imported, daemon=True).start()


def preloaded() -> bool:
    """Whether no preload is still importing (a turn waits for it: an import interrupted half way
    may leave its lock held)."""
    return LOADED.is_set()


def take_keys(config: dict) -> dict:
    """Move secret-named variables out of amas's environment into the config (called once, at
    start): no child (command, git, the browser's driver) inherits them, and each model call borrows
    them back (lent)."""
    from amas_code import redact

    kept = redact.without_secrets(config)
    taken = {name: value for name, value in os.environ.items() if name not in kept}
    for name in taken:
        del os.environ[name]
    return {**config, "env_keys": taken}


@contextlib.contextmanager
def lent(keys: dict):
    """The taken keys back in the environment for one model call, where litellm reads its providers'
    variables; amas starts no child meanwhile."""
    os.environ.update(keys)
    try:
        yield
    finally:
        for name in keys:
            os.environ.pop(name, None)


def precheck(config: dict) -> None:
    """What can be known wrong without a model library (litellm's import is ~3 s here, 3-4x that on
    a Pi), said before one loads: a malformed api_base, a local one where nothing listens, an
    unknown provider prefix, no key for a provider whose variables are known. Anything this cannot
    place is left to litellm's own check."""
    model = config["model"]
    base = config.get("api_base")
    if base:
        _check_base(str(base))
    if base or default_base(model):
        _listening(str(base or default_base(model)))
    prefix = ""
    if "/" in model:
        prefix = model.split("/", 1)[0]
    providers = _providers()
    if prefix and providers and prefix not in providers and not base:
        raise ProviderError(HINTS["provider"].format(model=model), "provider")
    names = KEYS.get(prefix) or providers.get(prefix) or ()
    have = {**os.environ, **config.get("env_keys", {})}
    if names and not (config.get("api_key") or base or any(have.get(n) for n in names)):
        raise ProviderError(_no_key(model, names), 401)


def _no_key(model: str, names) -> str:
    where = "set api_key in ~/.amas/config.yaml (or pick another model with -m)"
    return f"no API key for {model}: export {' or '.join(names)}, or {where}"


def _check_base(base: str) -> None:
    """An api_base that is an http(s) URL with a host (and a port, if any, that is a number)."""
    parts = urlsplit(base)
    try:  # a port that is not a number, or out of range, raises here
        numbered = parts.port is None or parts.port > 0
    except ValueError:
        numbered = False
    fine = numbered and parts.scheme in ("http", "https") and bool(parts.hostname)
    if not fine:
        raise ProviderError(
            f"api_base {_shown(base)!r} is not a URL: write it like http://localhost:11434 or "
            "https://api.example.com/v1",
            "config",
        )


def _shown(base: str) -> str:
    """An api_base as said on the screen: credentials in it hidden, whatever their shape."""
    return re.sub(r"[^/@\s]+@", "[REDACTED]@", base)


def default_base(model: str) -> str:
    """Where a provider that runs on this machine listens when no api_base is given (Ollama's
    11434, as litellm and Ollama itself assume), or ""."""
    return DEFAULT_BASES.get(model.split("/", 1)[0], "")


def _listening(base: str) -> None:
    """One connect to a local api_base (this machine's, or an address of the local network): a
    server that is not running is said now, not after a library's import. A name to look up is
    left to the request (a lookup may take long)."""
    parts = urlsplit(base)
    port = parts.port or {"http": 80, "https": 443}[parts.scheme]
    if not _local(parts.hostname):
        return
    try:
        socket.create_connection((parts.hostname, port), timeout=CONNECT).close()
    except OSError as e:
        shown = base
        if parts.password:  # hidden as the screen hides a secret
            shown = base.replace(f":{parts.password}@", ":[REDACTED]@")
        said = HINTS["connection"].format(base=shown)
        raise ProviderError(f"{said} ({e.strerror or e})", "connection") from None


def _local(host: str) -> bool:
    """localhost, or an address of this machine or the local network."""
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


@functools.cache
def _providers() -> dict[str, tuple[str, ...]]:
    """litellm's provider names, read from its source without importing it (~2 ms): the values of
    its LlmProviders table, and its JSON-configured providers with their key variables. Empty if
    litellm's files are not where they were (the check is then litellm's own)."""
    import importlib.util

    spec = importlib.util.find_spec("litellm")
    if not spec or not spec.submodule_search_locations:
        return {}
    home = Path(spec.submodule_search_locations[0])
    try:
        source = (home / "types" / "utils.py").read_text(encoding="utf-8")
        table = source.split("class LlmProviders(", 1)[1].split("\nclass ", 1)[0]
        listed = json.loads((home / "llms" / "openai_like" / "providers.json").read_text())
    except (OSError, IndexError, ValueError):
        return {}
    found = dict.fromkeys(re.findall(r'^\s+\w+ = "([^"]+)"', table, re.M), ())
    for name, entry in listed.items():
        found[name] = ()
        if entry.get("api_key_env"):
            found[name] = (entry["api_key_env"],)
    if "openai" not in found:
        return {}
    return found


def check_model(model: str) -> None:
    """Refuse a model string litellm cannot place, with one line; a known provider prefix is read
    from its files (no import), only a model without one is asked of litellm."""
    if model.split("/", 1)[0] in _providers() and "/" in model:
        return
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
    """One model endpoint as configured: streamed completions, usage, and the text tool protocol
    when it is the text variant (as_text). The wire under it is litellm's or the direct path's."""

    def __init__(self, config: dict, usage: dict | None = None, known: dict | None = None):
        """usage and known are shared by the models of one session: the tokens and cost so far,
        and (api_base, model) -> the context size a server's overflow error said."""
        self.config = config
        self.name = config["model"]
        self.text_tools = config.get("text_tools") is True
        self.context = None
        self.asked = 0  # times the server was asked its context size (see context_limit)
        self.unloaded = False  # Ollama listed the model as not loaded yet (see reply)
        # the tools offered in this request, by name: the text reader reads only these
        self.names = {}
        self.known = {} if known is None else known
        # the context size a server's overflow error gave: for the session, and every Model on it
        self.learned = self.known.get(self.server())
        self.usage = usage or {
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "cost": 0.0,
            "cost_known": True,
        }
        self.wire = Litellm(config)
        if is_direct(self.name, config.get("api_base")):
            self.wire = direct.Direct(config)

    def as_text(self, text: bool = True) -> "Model":
        """The same model (its usage, what it learned, its client), with tool calls written as text
        in the prompt and read from the answer; as_text(False): native calls again."""
        variant = copy.copy(self)
        variant.text_tools = text
        return variant

    def complete(self, messages: list[dict], tools: list | None = None, on_text=None) -> dict:
        """Stream one reply: {"role", "content", "tool_calls"?, "stopped"?}; retried by status,
        never after text."""
        automatic = self.config.get("text_tools") is not False
        if tools and not self.text_tools and automatic and not self.wire.native(self.name):
            said = f"{self.name} has no native tool calling in litellm's model list"
            raise NoNativeTools(said, "no tools")
        self.names = {t["function"]["name"]: t for t in tools or []}
        if self.text_tools:
            messages = toolcalls.to_text(messages)
            tools = None
        with lent(self.config.get("env_keys", {})):
            for attempt in itertools.count():
                try:
                    return self.stream(messages, tools, on_text)
                except ProviderError as e:
                    if e.partial or attempt >= RETRIES.get(e.kind, 0):
                        raise
                    time.sleep(_backoff(e, attempt))

    def stream(self, messages: list[dict], tools: list | None, on_text) -> dict:
        """One streamed reply, its text shown as it comes; a failure after text keeps that text."""
        self.wire.ready(self.name)
        shown = Shown(on_text, self.is_call)
        try:
            answer = self.wire.stream(self.body(messages, tools), shown)
        except Looping as loop:  # the stream is closed; the first round is the answer
            answer = {"content": loop.kept, "calls": [], "finish": "loop", "carried": True}
        except Exception as e:
            error = self.explain(e, messages)
            if not shown.size:
                raise error from None
            error.partial = True
            return self.reply({"content": shown.text(), "calls": []}, messages, error)
        self.check_answered(answer, messages, tools)
        return self.reply(answer, messages, None)

    def is_call(self, text: str) -> bool:
        """Whether a text is a call of this model's tools, as its reply's text is read."""
        return bool(self.names and toolcalls.read(text, self.names, model=self.name)[0])

    def check_answered(self, answer: dict, messages: list[dict], tools: list | None) -> None:
        """Refuse a stream in which the server itself sent nothing, with the server's own error when
        an unstreamed ask gets one."""
        if answer["carried"]:
            return
        self.probe(messages, tools)
        # llama-cpp-python fails inside a stream when the model picks a tool: text calls work
        if tools:
            raise NoNativeTools(
                f"{self.config.get('api_base')} sent nothing back when offered tools"
            )
        raise ProviderError(self.hint("empty", ""), "empty")

    def probe(self, messages: list[dict], tools: list | None) -> None:
        """After an empty stream, the same request once unstreamed, for one token: a server that
        fails inside a stream (llama-cpp-python past its context) answers it with its error, raised
        here when it is an overflow. Only for a server of the user's own (api_base): a provider's
        would bill the prompt again."""
        if not self.config.get("api_base"):
            return
        request = self.body(messages, tools)
        del request["stream_options"]
        request.update(stream=False, max_tokens=1, timeout=PROBE_TIMEOUT)
        try:
            self.wire.ask(request)
        except Exception as e:
            found = self.explain(e, messages)
            if found.kind == "context":
                raise found from None

    def body(self, messages: list[dict], tools: list | None) -> dict:
        """One streamed reply's request, as both wires take it."""
        body = dict(model=self.name, messages=self.sent(messages), stream=True, timeout=TIMEOUT)
        body.update(stream_options={"include_usage": True}, max_tokens=self.answer_room())
        if tools:
            body.update(tools=tools, tool_choice="auto")
        if self.name.startswith("ollama"):  # Ollama's default context window is tiny
            body["num_ctx"] = self.context_limit()
        if self.config.get("api_base"):  # a server of your own: a small model, calls made reliably
            body["temperature"] = LOCAL_TEMPERATURE
        return body

    def answer_room(self) -> int | None:
        """max_tokens as sent: the configured cap, and once a server's overflow told its context, at
        most the quarter of it that the conversation leaves free (vLLM counts max_tokens in)."""
        cap = self.config.get("max_tokens")
        if self.learned is None:
            return cap
        return min(cap or self.learned, self.learned // 4)

    def sent(self, messages: list[dict]) -> list[dict]:
        """The messages as sent:
        a turn that only called tools gets the content each template accepts."""
        content = ""
        if self.name.startswith(NULL_CONTENT):
            content = None
        return [_with_content(m, content) for m in messages]

    def hint(self, kind, detail: str) -> str:
        env = ", ".join(self.wire.key_names(self.name)) or "the provider's API key variable"
        base = self.config.get("api_base") or default_base(self.name) or "the provider"
        size, fix = self.overflow_advice()
        line = HINTS.get(kind, "the model call failed")
        line = line.format(model=self.name, env=env, base=base, size=size, fix=fix)
        if detail:
            return f"{line} ({detail})"
        return line

    def overflow_advice(self) -> tuple[str, str]:
        """For an overflow amas could not fix: the size the server said, the setting to change."""
        if self.learned:
            size = f" ({self.learned:,} tokens, as the server said)"
            fix = "send less at once, or start the server with a larger context "
            return size, fix + "(`max_context_tokens` caps what amas then uses)"
        planned = self.context or self.config.get("max_context_tokens") or 0
        fix = (
            f"set `max_context_tokens` to the server's context size (amas planned for {planned:,})"
        )
        return "", fix

    def explain(self, e: Exception, messages: list[dict] | None = None) -> ProviderError:
        """One clear line for a failure: its kind from the HTTP status, else from the words of the
        message; an overflow's words teach the context size."""
        text = re.sub(r"\s+", " ", str(getattr(e, "message", e)))
        text = _body_said(e, text)
        kind = _kind(e, text)
        if kind == "context":
            self.learn(text, messages or [])
        cls = ProviderError
        if kind == "no tools" and self.config.get("text_tools") is not False:
            cls = NoNativeTools
        error = cls(self.hint(kind, _detail(text)[:300]), kind)
        error.said = text
        error.wait = _retry_after(e)
        return error

    def learn(self, said: str, messages: list[dict]) -> None:
        """The context size in a server's overflow error (or, from Ollama's excess, the request's
        size less it), kept for the session: Context.limit plans for it from now on."""
        size = _said_size(said)
        over = re.search(OVER_BY, said, re.I)
        if size is None and over and messages:
            counted = self.count_tokens(messages) or estimate(json.dumps(messages))
            size = counted - int(over[1])
        if size and size >= 64:  # below that, not a context anyone runs
            self.learned = min(size, self.learned or size)
            self.known[self.server()] = self.learned
            self.context = min(self.context_limit(), self.learned)

    def count_tokens(self, messages: list[dict]) -> int | None:
        """Tokens in messages by the wire's tokenizer (litellm's loads one: call it only when
        needed); None where there is none."""
        return self.wire.count_tokens(self.name, messages)

    def reply(self, answer: dict, messages: list[dict], partial) -> dict:
        """The reply as the agent takes it, from what the wire put together. Ollama lists a model's
        context in /api/ps only once a request has loaded it: asked once more after the first."""
        if self.unloaded and self.asked == 1:
            self.context = None
        self.count(answer, messages)
        calls = answer["calls"]
        content = answer["content"]
        unreadable = None
        if partial:  # the text so far is the answer; the caller says what went wrong
            calls = []
        elif not calls and self.names:  # text mode, or a native server that left a call in the text
            calls, content, unreadable = toolcalls.read(content, self.names, model=self.name)
        stopped = {"length": "cut", "loop": "looped"}.get(answer.get("finish"), "")
        reply = {"role": "assistant", "content": content, "tool_calls": calls}
        reply |= {"unreadable": unreadable, "stopped": stopped, "lost": partial}
        return {k: v for k, v in reply.items() if v or k == "content"}  # only what is there

    def count(self, answer: dict, messages: list[dict]) -> None:
        """Tokens and cost of one reply: the server's counts, else estimates (marked as such)."""
        usage = answer.get("usage") or {}
        prompt = usage.get("prompt_tokens") or 0
        completion = usage.get("completion_tokens") or 0
        if not prompt:  # the server sent no usage (llama-cpp-python, some proxies)
            said = answer["content"] + str(answer["calls"] or "")
            # the tools count too where they go as schemas (as text, they are in the messages)
            offered = list(self.names.values())
            if self.text_tools:
                offered = []
            prompt = estimate(json.dumps(self.sent(messages)) + json.dumps(offered))
            completion = estimate(said)
            self.usage["estimated"] = True
        self.usage["prompt_tokens"] += prompt
        self.usage["completion_tokens"] += completion
        cost = answer.get("cost")
        if cost is None:  # unknown models have no price
            self.usage["cost_known"] = False
        else:
            self.usage["cost"] += cost

    def server(self) -> tuple[str, str]:
        """Which server and model: what a learned context size belongs to."""
        return self.config.get("api_base") or "", self.name

    def context_limit(self) -> int:
        """Tokens the conversation may use:
        max_context_tokens, or less if the server says its window is smaller."""
        if self.context is None:
            self.asked += 1
            said = self.learned or self.server_context() or 10**9
            self.context = min(self.config["max_context_tokens"], said)
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
            if self.name.startswith(("openai/", "hosted_vllm/", "lm_studio/")):
                return self.props_context(base) or self.listed_context(base)
        except Exception:  # not a server that tells: the configured size stands
            return None
        return None

    def props_context(self, base: str) -> int | None:
        """llama.cpp's /props: its slots' context size."""
        try:
            props = _get_json(base.removesuffix("/v1") + "/props")
        except Exception:  # not llama.cpp
            return None
        return props.get("default_generation_settings", props).get("n_ctx")

    def listed_context(self, base: str) -> int | None:
        """The model's entry in the server's model list, where it says its context: vLLM's
        max_model_len in /v1/models, LM Studio's loaded_context_length or max_context_length in its
        /api/v0/models, the context_length Ollama loaded a model with in /api/ps (llama-cpp-python
        says none)."""
        root = base.removesuffix("/v1")
        for url in (root + "/v1/models", root + "/api/v0/models", root + "/api/ps"):
            with contextlib.suppress(Exception):  # not a list this server has
                answer = _get_json(url)
                size = self.listed_size(answer)
                if size:
                    return size
                self.unloaded = self.unloaded or "models" in answer
        return None

    def listed_size(self, answer: dict) -> int | None:
        """The context size in this model's entry of a list: OpenAI's `data` (its only entry, if
        none has its name) or Ollama's running `models` (by name: `qwen2.5-coder` is loaded as
        `qwen2.5-coder:latest`)."""
        wanted = self.name.split("/", 1)[1]
        listed = answer.get("data") or []
        entry = next((m for m in listed if m.get("id") == wanted), {})
        if not entry and len(listed) == 1:
            entry = listed[0]
        running = answer.get("models") or []
        names = (wanted, f"{wanted}:latest")
        entry = entry or next((m for m in running if m.get("name") in names), {})
        for key in LISTED:
            if isinstance(entry.get(key), int):
                return entry[key]
        return None

    def tool_prompt(self, tools: list[dict]) -> str:
        """The tools described in the system prompt, when calls are written as text."""
        if not self.text_tools:
            return ""
        return toolcalls.describe(tools)


class Litellm:
    """Every provider litellm knows, through litellm.completion; its import (~3 s here) waits for
    the first request."""

    def __init__(self, config: dict):
        self.config = config

    def native(self, name: str) -> bool:
        """False when litellm's model map says the model cannot call functions."""
        return load().model_cost.get(name, {}).get("supports_function_calling") is not False

    def ready(self, name: str) -> None:
        """Refuse a model litellm cannot place, or whose key is missing."""
        check_model(name)
        if self.config.get("api_key") or self.config.get("api_base"):
            return
        keys = self.key_names(name)
        if keys:
            raise ProviderError(_no_key(name, keys), 401)

    def key_names(self, name: str) -> list[str]:
        """The key variables litellm looks for and does not find."""
        try:
            return [k for k in load().validate_environment(name)["missing_keys"] if "KEY" in k]
        except Exception:
            return []

    def count_tokens(self, name: str, messages: list[dict]) -> int | None:
        return token_count(name, messages)

    def stream(self, request: dict, on_text) -> dict:
        """One streamed reply, its text shown as it comes, put together by litellm's builder."""
        litellm = load()
        chunks = []
        streamed = None
        try:
            streamed = litellm.completion(**self.kwargs(request))
            _gather(streamed, chunks, on_text)
        finally:
            _close(streamed)
        return _answer(litellm, chunks, request)

    def ask(self, request: dict) -> None:
        """The request unstreamed; what fails raises."""
        load().completion(**self.kwargs(request))

    def kwargs(self, request: dict) -> dict:
        """litellm.completion's arguments for a request."""
        kwargs = {**request, "max_retries": 0}
        kwargs.update(api_key=self.config.get("api_key"), api_base=self.config.get("api_base"))
        if request.get("tools"):  # the private flag skips litellm's MCP gateway (it needs `mcp`)
            kwargs["_skip_mcp_handler"] = True
        return kwargs


class Shown:
    """A reply's text as it streams: passed on to be shown, and looked at for a loop every LOOK
    characters. Tool calls written as text that repeat are no loop here (the agent's MAX_CALLS and
    its same-call notes bound them): once a round is a call, it is not looked at again."""

    def __init__(self, on_text, is_call):
        self.pieces = []
        self.size = 0
        self.looked = 0  # the size when it was last looked at
        self.on_text = on_text
        self.is_call = is_call

    def __call__(self, text: str) -> None:
        self.pieces.append(text)
        if self.on_text:
            self.on_text(text)
        self.size += len(text)
        if self.size - self.looked >= LOOK:
            self.looked = self.size
            self.look()

    def look(self) -> None:
        """Looping raised when the text goes round in circles."""
        found = _rounds(self.text())
        if found is None:
            return
        kept, round_ = found
        if self.is_call(round_.strip().strip(",").strip()):  # one of a list of calls
            self.looked = math.inf
            return
        raise Looping(kept)

    def text(self) -> str:
        return "".join(self.pieces)


def _rounds(text: str) -> tuple[str, str] | None:
    """When the text's last LOOP characters stand LOOPS times in it: the text up to the end of its
    first round, and that round (the repeats begin where each character equals the one a round
    later); else None."""
    tail = text[-LOOP:]
    if len(text) < LOOP * LOOPS or text.count(tail) < LOOPS:
        return None
    start = text.find(tail)
    period = text.find(tail, start + 1) - start
    while start > 0 and text[start - 1] == text[start - 1 + period]:
        start -= 1
    return text[: start + period], text[start : start + period]


def _backoff(error: ProviderError, attempt: int) -> float:
    """Seconds before a retry: what the server's Retry-After asks (at most RETRY_AFTER), else for a
    rate limit longer each time, and for anything else a moment."""
    if error.wait is not None:
        return error.wait
    if error.kind == 429:
        return 2**attempt
    return 0.2


def _retry_after(e: Exception) -> float | None:
    """The seconds a failed response's Retry-After header asks for (as a number: an HTTP date is
    left to the usual backoff), within 0 and RETRY_AFTER; None when it says none. litellm keeps
    the headers apart (its exception's response is one it made)."""
    headers = getattr(e, "litellm_response_headers", None)
    headers = headers or getattr(getattr(e, "response", None), "headers", None) or {}
    try:
        asked = float(headers.get("retry-after", ""))
    except (TypeError, ValueError):
        return None
    return min(max(asked, 0.0), RETRY_AFTER)


def _with_content(message: dict, content) -> dict:
    """A message as sent: one that only called tools gets the content its template accepts."""
    if message.get("tool_calls") and not message.get("content"):
        return {**message, "content": content}
    return message


def _said_size(said: str) -> int | None:
    """The context size a server's overflow error states, in the words of the first that match."""
    for pattern in OVERFLOW:
        if found := re.search(pattern, said, re.I):
            return int(found[1])
    return None


def _answer(litellm, chunks: list, request: dict) -> dict:
    """A stream's chunks put together by litellm's builder, as direct.Answer.value() says them."""
    if not any(_carries(chunk) for chunk in chunks):
        return {"content": "", "calls": [], "carried": False}
    if request["model"].startswith("ollama"):
        _number_calls(chunks)
    built = litellm.stream_chunk_builder(chunks, messages=request["messages"])
    message = built.choices[0].message
    calls = [
        toolcalls.native(c.function.name, c.function.arguments or "", c.id or f"call_{i}")
        for i, c in enumerate(message.tool_calls or [])
    ]
    usage = getattr(built, "usage", None)
    counts = {k: getattr(usage, k, 0) or 0 for k in ("prompt_tokens", "completion_tokens")}
    finish = built.choices[0].finish_reason
    answer = {"content": message.content or "", "calls": calls, "finish": finish}
    return answer | {"usage": counts, "carried": True, "cost": _cost(litellm, built)}


def _cost(litellm, built) -> float | None:
    """A reply's price by litellm's table; None for a model it has none for."""
    try:
        return litellm.completion_cost(completion_response=built) or 0.0
    except Exception:
        return None


def _kind(e: Exception, text: str):
    """A failure's kind: from the words of its message (SYMPTOMS), else its HTTP status (5xx as
    one)."""
    found = re.search(r"Error code: (\d{3})", text)
    status = getattr(e, "status_code", None)
    if found:
        status = int(found[1])
    kind = next((k for k, words in SYMPTOMS.items() if re.search(words, text, re.I)), None)
    if kind:
        return kind
    if status and status >= 500:
        return 500
    return status


def _detail(text: str) -> str:
    """The provider's own words: the message in its JSON body, else the text without a library's
    names for the error before it."""
    found = MESSAGE.search(text)
    if found:
        return re.sub(r"\\(.)", r"\1", found[1])
    return re.sub(WRAPPING, "", text)


def estimate(text: str) -> int:
    """Tokens, roughly and on the high side, without loading a tokenizer."""
    return len(text) // CHARS_PER_TOKEN


def _body_said(e: Exception, text: str) -> str:
    """The error's text with the server's own body, where litellm's message left it out."""
    body = getattr(e, "body", None)
    with contextlib.suppress(Exception):  # a streamed response not read has no text
        body = body or e.response.text
    if isinstance(body, (dict, list)):
        body = json.dumps(body)
    body = re.sub(r"\s+", " ", str(body or ""))[:2000]
    if not body or body in text:
        return text
    return f"{text} {body}"


def _get_json(url: str, data: bytes | None = None):
    """A local server's JSON answer
    (urllib, not httpx: a client builds an SSL context, ~0.15 s, first)."""
    import urllib.request

    with urllib.request.urlopen(url, data, timeout=3) as answer:
        return json.load(answer)


def _gather(streamed, chunks: list, on_text) -> None:
    """The stream's chunks added to chunks, each one's text shown as it comes, up to the cap."""
    for chunk in streamed:
        chunks.append(chunk)
        if _past_the_cap(chunk):  # the rest is not read: bounded time and memory
            return
        if not chunk.choices:
            continue
        text = chunk.choices[0].delta.content
        if text and on_text:
            on_text(text)


def _past_the_cap(chunk) -> bool:
    """A chunk that starts a tool call past toolcalls.MAX_CALLS (so one more than the cap is kept:
    the agent sees that the reply held more)."""
    if not chunk.choices:
        return False
    calls = getattr(chunk.choices[0].delta, "tool_calls", None) or []
    return any((getattr(c, "index", 0) or 0) >= toolcalls.MAX_CALLS for c in calls)


def _close(streamed) -> None:
    """End the HTTP response under a stream now, read to its end or not: closed by the garbage
    collector inside the next request, it waits for the pool lock that request holds, forever
    (httpcore issue 990)."""
    inner = getattr(streamed, "completion_stream", None)
    # litellm's own iterators; the SDKs' streams
    for stream in (getattr(inner, "streaming_response", None), inner):
        with contextlib.suppress(Exception):
            stream.close()


def _carries(chunk) -> bool:
    """A streamed chunk from the server itself: counts, or a delta with something in it (litellm
    adds an empty one of its own to a stream with no data)."""
    if getattr(chunk, "usage", None):
        return True
    if not chunk.choices:
        return False
    delta = chunk.choices[0].delta
    return bool(delta.role or delta.content or delta.tool_calls)


def _number_calls(chunks: list) -> None:
    """Ollama streams each tool call whole, with no index and no id: without this, calls in separate
    chunks merge into one, and a call with no arguments is dropped by stream_chunk_builder."""
    calls = [
        c for chunk in chunks if chunk.choices for c in chunk.choices[0].delta.tool_calls or []
    ]
    for i, call in enumerate(calls):
        call.index = i
        call.id = call.id or f"call_{i}"
