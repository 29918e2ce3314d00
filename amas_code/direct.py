"""The direct path: a model at an OpenAI-compatible api_base (llama.cpp, LM Studio, vLLM, Ollama's
/v1) called through the openai SDK, without litellm, whose import (3 s of CPU and 170 MB here, 10-14
s on a Pi) would be most of a one-shot. Its own module: the SDK's import and the reading of its
stream are this path's alone, and providers.py keeps what both paths share."""

import importlib.util
import json
import os
import sys
from pathlib import Path

from amas_code import toolcalls

# the key each prefix reads from the environment when the config gives none
KEY_NAMES = {"openai": "OPENAI_API_KEY", "hosted_vllm": "HOSTED_VLLM_API_KEY"}
KEY_NAMES["lm_studio"] = "LM_STUDIO_API_KEY"
NO_KEY = "no-key"  # llama.cpp needs none, but the SDK insists on one


def load():
    """The openai SDK's client and stream classes. Its package's __init__ imports every type the API
    has (0.3 s of CPU and 17 MB here): where openai is not imported yet, it and its types package
    are entered without their __init__ (see _entered), and the client's own modules import alone."""
    if "openai" not in sys.modules:
        _entered("openai")
        _entered("openai.types")
    from openai._client import OpenAI
    from openai._streaming import Stream

    return OpenAI, Stream


def _entered(name: str) -> None:
    """A package put in sys.modules with its __init__ not run: its submodules import as usual, and
    the first other name asked of it runs __init__ then, so litellm (`from openai import OpenAI`),
    or anything else that imports openai, still gets the whole package."""
    spec = importlib.util.find_spec(name)
    package = importlib.util.module_from_spec(spec)

    def whole(attribute: str):
        # a submodule's name is asked first by `from . import _exceptions`: it is imported, not this
        if importlib.util.find_spec(f"{name}.{attribute}"):
            raise AttributeError(attribute)
        del package.__getattr__
        spec.loader.exec_module(package)
        return getattr(package, attribute)

    package.__getattr__ = whole
    sys.modules[name] = package
    parent, _, child = name.rpartition(".")
    if parent:  # as the import system binds a subpackage on its parent
        setattr(sys.modules[parent], child, package)


class Direct:
    """One OpenAI-compatible server, its client made at the first request and kept."""

    def __init__(self, config: dict):
        self.config = config
        self.client = None

    def native(self, name: str) -> bool:
        """Tools are offered: a server that cannot take them says so, and amas switches to text."""
        return True

    def ready(self, name: str) -> None:
        """Nothing to check before the request: a server of your own needs no key."""

    def key_names(self, name: str) -> list[str]:
        """The variable a key comes from when the config gives none."""
        return [KEY_NAMES[name.split("/", 1)[0]]]

    def count_tokens(self, name: str, messages: list[dict]) -> int | None:
        """Tokens in messages by cl100k, as litellm counts a model it has no tokenizer for
        (tiktoken, +35 MB: asked only when the conversation nears the context); None without it."""
        encoding = _encoding()
        if encoding is None:
            return None
        return len(encoding.encode(json.dumps(messages), disallowed_special=()))

    def stream(self, request: dict, on_text) -> dict:
        """One streamed reply, its text shown as it comes (see Streamed)."""
        streamed = self.post(request)
        answer = Streamed(on_text)
        try:
            for chunk in streamed:
                if not answer.add(chunk):
                    break
        finally:  # read to its end or not: the response is ended now, not by the garbage collector
            streamed.close()
        return answer.value()

    def ask(self, request: dict) -> None:
        """The request unstreamed; what fails raises."""
        self.post(request)

    def post(self, request: dict):
        """The SDK's request to /chat/completions; its chunks and answer plain dicts
        (`cast_to=object`: no model class is built for each of a long reply's chunks)."""
        client, stream = load()
        body = {k: v for k, v in request.items() if v is not None and k != "timeout"}
        body["model"] = request["model"].split("/", 1)[1]
        options = {"timeout": request["timeout"]}
        chat = self.connect(client)
        kwargs = dict(body=body, cast_to=object, options=options, stream=body["stream"])
        return chat.post("/chat/completions", stream_cls=stream[object], **kwargs)

    def connect(self, client):
        """The client, made once: amas retries by its own table (RETRIES), the SDK never."""
        if self.client is None:
            names = self.key_names(self.config["model"])
            key = self.config.get("api_key") or os.environ.get(names[0]) or NO_KEY
            base = self.config["api_base"]
            self.client = client(api_key=key, base_url=base, max_retries=0)
        return self.client


def _encoding():
    """tiktoken's cl100k encoding, read from the copy litellm ships (as litellm's own import points
    tiktoken at it: without it tiktoken would download it); None where either is missing."""
    litellm = importlib.util.find_spec("litellm")
    if litellm and litellm.submodule_search_locations:
        shipped = Path(litellm.submodule_search_locations[0], "litellm_core_utils", "tokenizers")
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(shipped))
    try:
        import tiktoken

        return tiktoken.get_encoding("cl100k_base")
    except Exception:  # not installed, or no copy of the encoding and no network
        return None


class Streamed:
    """A streamed reply put together as it comes: its text shown as it grows, its calls joined by
    index (id and name as last given, the arguments' pieces in order, as litellm's builder joins
    them). value() is what both paths return: content, calls, finish, usage, carried, cost."""

    def __init__(self, on_text):
        self.on_text = on_text
        self.text = []
        self.calls = {}  # index -> {"id", "name", "arguments"}
        self.finish = None
        self.usage = None
        self.carried = False  # the server itself sent something: a role, text, a call or counts

    def add(self, chunk: dict) -> bool:
        """One chunk taken in; False once a call past toolcalls.MAX_CALLS starts (it is kept, so
        the agent sees the reply held more; the rest is not read: bounded time and memory)."""
        self.usage = chunk.get("usage") or self.usage
        choice = (chunk.get("choices") or [{}])[0]
        self.finish = choice.get("finish_reason") or self.finish
        delta = choice.get("delta") or {}
        said = delta.get("role") or delta.get("content") or delta.get("tool_calls")
        self.carried = self.carried or bool(said or self.usage)
        for piece in delta.get("tool_calls") or []:
            if not self.join(piece):
                return False
        text = delta.get("content")
        if text:
            self.text.append(text)
            self.on_text(text)
        return True

    def join(self, piece: dict) -> bool:
        """A piece of a call added to the call of its index (a piece without one starts a call when
        it has an id, else goes on the last); False for a call past the cap."""
        index = piece.get("index")
        if index is None and piece.get("id"):
            index = len(self.calls)
        if index is None:
            index = max(self.calls, default=0)
        call = self.calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
        function = piece.get("function") or {}
        call["id"] = piece.get("id") or call["id"]
        call["name"] = function.get("name") or call["name"]
        arguments = function.get("arguments") or ""
        if not isinstance(arguments, str):  # an object, as some servers send it
            arguments = json.dumps(arguments)
        call["arguments"] += arguments
        return index < toolcalls.MAX_CALLS

    def value(self) -> dict:
        calls = []
        for i, (_, call) in enumerate(sorted(self.calls.items())):
            cid = call["id"] or f"call_{i}"
            # no arguments are sent back as an empty object: a chat template parses them as JSON
            arguments = call["arguments"] or "{}"
            calls.append(toolcalls.native(call["name"], arguments, cid))
        return {
            "content": "".join(self.text),
            "calls": calls,
            "finish": self.finish,
            "usage": self.usage or {},
            "carried": self.carried,
            "cost": None,  # no price table on this path: a server of your own
        }
