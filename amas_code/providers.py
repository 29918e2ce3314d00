"""The only place litellm is called: one streamed completion, its errors as one clear line."""

import json
import os
import re

USAGE = {"prompt_tokens": 0, "completion_tokens": 0, "cost": 0.0, "cost_known": True}
HINTS = {  # litellm exception class -> what the user should do
    "ContextWindowExceededError": "the conversation is longer than {model}'s context window",
    "AuthenticationError": "authentication failed for {model}: check {env} or `api_key` in .amas/config.yaml",
    "PermissionDeniedError": "access denied (403) for {model}: the key may lack access to this model",
    "NotFoundError": "model {model} not found (404): check the model name (-m) and `api_base`",
    "RateLimitError": "rate limited (429) by the provider, even after a retry: wait, or /model another",
    "Timeout": "no answer from {base} in time, even after a retry",
    "APIConnectionError": "cannot reach {base}: is the server running and the address right?",
    "InternalServerError": "the provider failed with a server error (5xx); try again",
    "ServiceUnavailableError": "the provider is unavailable (503); try again later",
    "BadRequestError": "the provider rejected the request",
}
TIMEOUT = 600  # seconds without an answer before a request counts as timed out (local models are slow)
RETRY = {"TimeoutErrorRetries": 1, "RateLimitErrorRetries": 2, "InternalServerErrorRetries": 1,
         "ServiceUnavailableErrorRetries": 1, "DefaultRetries": 0}  # auth, 404, bad requests: never retried
SYMPTOMS = {"Timeout": re.compile(r"timed out|timeout", re.I),  # litellm often wraps these as 500 or 503
            "APIConnectionError": re.compile(r"connection error|connection refused|name or service not known", re.I)}
STATUS = {401: "AuthenticationError", 403: "PermissionDeniedError"}  # litellm maps Gemini's 403 to BadRequestError
MESSAGE = re.compile(r'"(?:message|error)":\s*"((?:[^"\\]|\\.)*)"')
NO_TOOLS = re.compile(r"does not support tools|tools? (?:are|is) not supported|tool use is not supported", re.I)
TOOL_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.S)


class ProviderError(Exception):
    """A failed model call, with one line saying what to do."""

    def __init__(self, line: str, kind: str = ""):
        super().__init__(line)
        self.kind = kind


class ToolsUnsupported(ProviderError):
    """The model or provider rejected native tool calling."""


def _litellm():
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no price-map fetch at import
    import litellm

    litellm.suppress_debug_info = True  # else "Provider List: ..." lands on stdout
    litellm.drop_params = True  # a provider that lacks an option drops it instead of failing
    return litellm


def native_tools(model: str) -> bool:
    """False when litellm's model map says the model cannot call functions."""
    return _litellm().model_cost.get(model, {}).get("supports_function_calling") is not False


def _kwargs(messages: list[dict], tools: list | None, config: dict) -> dict:
    model = config["model"]
    kwargs = dict(model=model, messages=_outgoing(messages), stream=True, api_key=config.get("api_key"),
                  api_base=config.get("api_base"), stream_options={"include_usage": True},
                  retry_policy=RETRY, retry_strategy="exponential_backoff_retry", timeout=TIMEOUT,
                  max_retries=0)  # the OpenAI SDK would retry on its own; RETRY decides
    if tools:  # the private flag skips litellm's MCP gateway, which needs the absent `mcp` package
        kwargs.update(tools=tools, _skip_mcp_handler=True)
    if model.startswith("ollama"):  # Ollama's default context window is tiny
        kwargs["num_ctx"] = config["max_context_tokens"]
    if model.startswith("openai/") and kwargs["api_base"] and not (kwargs["api_key"] or os.getenv("OPENAI_API_KEY")):
        kwargs["api_key"] = "no-key"  # llama.cpp and LM Studio need no key, but the OpenAI SDK insists on one
    return kwargs


def _outgoing(messages: list[dict]) -> list[dict]:
    """A turn that only called tools goes out with content None, not "": Gemini rejects an empty text
    part, and litellm fills an empty Anthropic text block with a made-up sentence."""
    return [{**m, "content": None} if m.get("tool_calls") and not m.get("content") else m for m in messages]


def explain(e: Exception, config: dict) -> ProviderError:
    """One clear line for a litellm exception, from HINTS."""
    kinds = [c.__name__ for c in type(e).__mro__]
    kind = STATUS.get(getattr(e, "status_code", None)) or next((k for k in kinds if k in HINTS), type(e).__name__)
    kind = next((k for k, pattern in SYMPTOMS.items() if pattern.search(str(e))), kind)
    env = ", ".join(_env_keys(config["model"])) or "AMAS_API_KEY"
    hint = HINTS.get(kind, "the model call failed").format(
        model=config["model"], env=env, base=config.get("api_base") or "the provider")
    detail = re.sub(r"\s+", " ", str(getattr(e, "message", e)))
    found = MESSAGE.search(detail)  # the provider's own words, not litellm's wrapping of its JSON body
    detail = (re.sub(r"\\(.)", r"\1", found.group(1)) if found else detail)[:300]
    cls = ToolsUnsupported if NO_TOOLS.search(detail) else ProviderError
    return cls(f"{hint} ({detail})" if detail else hint, kind)


def _env_keys(model: str) -> list[str]:
    try:
        return [k for k in _litellm().validate_environment(model)["missing_keys"] if "KEY" in k]
    except Exception:
        return []


def complete(messages: list[dict], tools: list | None, config: dict, on_chunk=None) -> dict:
    """Stream one reply; return the assistant message dict (content, tool_calls)."""
    litellm = _litellm()
    if config.get("text_tools"):
        messages, tools = to_text_protocol(messages), None
    if not config.get("api_key") and not config.get("api_base") and _env_keys(config["model"]):
        keys = " or ".join(_env_keys(config["model"]))
        raise ProviderError(f"no API key for {config['model']}: export {keys}, or set api_key in "
                            ".amas/config.yaml (or pick another model with -m)", "AuthenticationError")
    chunks, partial = [], None
    try:
        for chunk in litellm.completion(**_kwargs(messages, tools, config)):
            chunks.append(chunk)
            text = chunk.choices[0].delta.content if chunk.choices else None
            if text and on_chunk:
                on_chunk(text)
    except Exception as e:
        if not any(c.choices and c.choices[0].delta.content for c in chunks):
            raise explain(e, config) from None
        partial = explain(e, config)
        if on_chunk:
            on_chunk(f"\n\n[connection lost mid-answer: {partial}]")
    return _message(litellm, chunks, messages, config, partial)


def _message(litellm, chunks: list, messages: list[dict], config: dict, partial) -> dict:
    if config["model"].startswith("ollama"):
        _number_calls(chunks)
    built = litellm.stream_chunk_builder(chunks, messages=messages)
    msg = built.choices[0].message
    _count(litellm, built)
    reply = {"role": "assistant", "content": msg.content or ""}
    calls = [] if partial else [{"id": c.id or f"call_{i}", "type": "function",
                                 "function": {"name": c.function.name, "arguments": c.function.arguments or ""}}
                                for i, c in enumerate(msg.tool_calls or [])]
    if config.get("text_tools"):
        calls = parse_tool_calls(reply["content"])
    if calls:
        reply["tool_calls"] = calls
    if partial:
        reply["content"] += f"\n\n[connection lost mid-answer: {partial}]"
    return reply


def _number_calls(chunks: list) -> None:
    """Ollama streams each tool call whole, with no index and no id (litellm adds an id only when there
    are arguments): without this, calls in separate chunks merge into one and a call with no arguments
    is dropped by stream_chunk_builder."""
    calls = [c for chunk in chunks if chunk.choices for c in chunk.choices[0].delta.tool_calls or []]
    for i, call in enumerate(calls):
        call.index, call.id = i, call.id or f"call_{i}"


def _count(litellm, built) -> None:
    usage = getattr(built, "usage", None)
    USAGE["prompt_tokens"] += getattr(usage, "prompt_tokens", 0) or 0
    USAGE["completion_tokens"] += getattr(usage, "completion_tokens", 0) or 0
    try:
        USAGE["cost"] += litellm.completion_cost(completion_response=built) or 0.0
    except Exception:  # unknown models have no price
        USAGE["cost_known"] = False


def token_count(model: str, messages: list[dict]) -> int:
    """Tokens in messages, by litellm's counter for the model."""
    try:
        return _litellm().token_counter(model=model, messages=messages)
    except Exception:  # tool-call shapes some counters reject: estimate from characters
        return len(json.dumps(messages)) // 4


def to_text_protocol(messages: list[dict]) -> list[dict]:
    """Rewrite native tool calls and results as text, for models without tool calling."""
    out, names = [], {}
    for m in messages:
        if m["role"] == "tool":
            name = names.get(m.get("tool_call_id"), "")
            out.append({"role": "user", "content": f'<tool_response name="{name}">\n{m["content"]}\n</tool_response>'})
        elif m.get("tool_calls"):
            names.update({c["id"]: c["function"]["name"] for c in m["tool_calls"]})
            calls = "\n".join(
                "<tool_call>" + json.dumps({"name": c["function"]["name"],
                                            "arguments": _loads(c["function"]["arguments"])}) + "</tool_call>"
                for c in m["tool_calls"])
            out.append({"role": "assistant", "content": f"{m.get('content') or ''}\n{calls}".strip()})
        else:
            out.append(m)
    return out


def _loads(raw: str):
    try:
        return json.loads(raw or "{}")
    except ValueError:
        return raw


def parse_tool_calls(text: str) -> list[dict]:
    """The <tool_call>{...}</tool_call> blocks in a model's text, as native tool_calls."""
    calls = []
    for i, raw in enumerate(TOOL_CALL.findall(text or "")):
        data = _loads(raw)
        name = data.get("name", "") if isinstance(data, dict) else ""
        args = data.get("arguments", {}) if isinstance(data, dict) else raw
        calls.append({"id": f"text_call_{i}", "type": "function",
                      "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}})
    return calls
