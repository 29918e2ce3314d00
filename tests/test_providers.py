"""The agent loop through each provider's own wire format in litellm: Ollama, Anthropic, Gemini.

Each server below speaks one provider's HTTP API on 127.0.0.1 closely enough for litellm's
transformation for that provider, and records every request, so a test can check what the provider
would receive: the tool result in its own shape, the key in its own header, Ollama's num_ctx.
"""

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from click.testing import CliRunner
from conftest import run_amas

KEY = "sk-provider-test-key-123"


class WireServer:
    """Scripted streamed replies in one provider's format;
    .requests holds path, headers and body of each."""

    model = ""  # the litellm model string amas is given
    suffix = ""  # appended to the server URL to make api_base
    chat_path = ""  # where litellm posts a chat
    content_type = "text/event-stream"

    def __init__(self, key: str | None = KEY, tools: bool = True):
        self.key, self.tools, self.fail = key, tools, None
        self.script, self.requests = [], []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.api_base = f"http://127.0.0.1:{self.server.server_port}{self.suffix}"
        # polls for shutdown every 20 ms: a quick shutdown
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()

    def reply(self, text: str = "", tool: str | None = None, calls=(), **args):
        """One streamed answer: text, then one tool call (`tool` with **args) or several `calls`."""
        self.script.append((text, [*calls, *([(tool, args)] if tool else [])]))
        return self

    @property
    def chats(self) -> list[dict]:
        return [r["body"] for r in self.requests if r["path"] == self.chat_path]

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def answer(self, path: str, headers, body: dict) -> tuple[int, str, list[str]]:
        """Status, content type and body frames for one request."""
        if path != self.chat_path:
            return 404, "text/plain", ["404 page not found"]
        if self.key and not self.authorized(headers):
            return self.json(*self.unauthorized())
        if self.fail:
            return self.json(*self.fail)
        if body.get("tools") and not self.tools:
            return self.json(*self.no_tools())
        text, calls = self.script.pop(0) if self.script else ("(no scripted reply left)", [])
        return 200, self.content_type, self.frames(text, calls)

    @staticmethod
    def json(status: int, data: dict) -> tuple[int, str, list[str]]:
        return status, "application/json", [json.dumps(data)]

    def _handler(self):
        wire = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(
                    self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}"
                )
                status, content_type, frames = wire.answer(self.path, self.headers, body)
                wire.requests.append(
                    {
                        "path": self.path,
                        "headers": dict(self.headers),
                        "body": body,
                        "status": status,
                    }
                )
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Connection", "close")  # the body ends when the connection does
                self.end_headers()
                for frame in frames:
                    self.wfile.write(frame.encode())
                    self.wfile.flush()
                self.close_connection = True

        return Handler


def pieces(text: str, size: int = 7) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


class Ollama(WireServer):
    """Ollama's /api/chat: NDJSON lines;
    each tool call whole, in its own line, arguments an object, no id."""

    model, chat_path, content_type = (
        "ollama_chat/qwen2.5-coder",
        "/api/chat",
        "application/x-ndjson",
    )

    # a local Ollama asks for no key
    def __init__(self, key: str | None = None, tools: bool = True):
        super().__init__(key, tools)

    def answer(self, path, headers, body):
        if path == "/api/show":  # litellm asks for the model's template and context length
            return self.json(
                200,
                {
                    "template": "{{ if .Tools }}{{ .Tools }}{{ end }}{{ .Prompt }}",
                    "model_info": {"qwen2.context_length": 32768},
                },
            )
        return super().answer(path, headers, body)

    # an Ollama behind a reverse proxy that wants a bearer token
    def authorized(self, headers) -> bool:
        return headers.get("Authorization") == f"Bearer {self.key}"

    def unauthorized(self):
        return 401, {"error": "unauthorized"}

    def no_tools(self):
        return 400, {
            "error": f"registry.ollama.ai/library/{self.model.split('/')[1]} does not support tools"
        }

    def frames(self, text, calls):
        def line(done=False, **message):
            return (
                json.dumps(
                    {
                        "model": self.model.split("/")[1],
                        "created_at": "2025-06-01T12:00:00.000Z",
                        "message": {"role": "assistant", "content": "", **message},
                        "done": done,
                        **(
                            {"done_reason": "stop", "prompt_eval_count": 12, "eval_count": 7}
                            if done
                            else {}
                        ),
                    }
                )
                + "\n"
            )

        return (
            [line(content=p) for p in pieces(text)]
            + [
                line(tool_calls=[{"function": {"name": name, "arguments": args}}])
                for name, args in calls
            ]
            + [line(done=True)]
        )


class Anthropic(WireServer):
    """Anthropic Messages: SSE message_start,
    content_block_* (text_delta, tool_use + input_json_delta), stop."""

    model, chat_path = "anthropic/claude-sonnet-4-5", "/v1/messages"

    def authorized(self, headers) -> bool:
        return headers.get("x-api-key") == self.key

    def unauthorized(self):
        return 401, {
            "type": "error",
            "error": {"type": "authentication_error", "message": "invalid x-api-key"},
        }

    def frames(self, text, calls):
        def event(kind, **data):
            return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"

        out = [
            event(
                "message_start",
                message={
                    "id": "msg_01",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 12, "output_tokens": 1},
                },
            )
        ]
        blocks = ([("text", text)] if text else []) + [("tool_use", call) for call in calls]
        for index, (kind, value) in enumerate(blocks):
            if kind == "text":
                out.append(
                    event(
                        "content_block_start",
                        index=index,
                        content_block={"type": "text", "text": ""},
                    )
                )
                out += [
                    event(
                        "content_block_delta", index=index, delta={"type": "text_delta", "text": p}
                    )
                    for p in pieces(value)
                ]
            else:
                name, args = value
                out.append(
                    event(
                        "content_block_start",
                        index=index,
                        content_block={
                            "type": "tool_use",
                            "id": f"toolu_01{name}{index}",
                            "name": name,
                            "input": {},
                        },
                    )
                )
                out += [
                    event(
                        "content_block_delta",
                        index=index,
                        delta={"type": "input_json_delta", "partial_json": p},
                    )
                    for p in pieces(json.dumps(args), 9)
                ]
            out.append(event("content_block_stop", index=index))
        out.append(
            event(
                "message_delta",
                delta={"stop_reason": "tool_use" if calls else "end_turn", "stop_sequence": None},
                usage={"output_tokens": 7},
            )
        )
        return [*out, event("message_stop")]


class Gemini(WireServer):
    """Gemini streamGenerateContent?alt=sse: candidates with text parts, then functionCall parts."""

    model, suffix = "gemini/gemini-2.5-flash", "/v1beta"
    chat_path = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"

    def authorized(self, headers) -> bool:
        return headers.get("x-goog-api-key") == self.key

    def unauthorized(self):  # what Google really answers for a bad key: 400, not 401
        return 400, {
            "error": {
                "code": 400,
                "message": "API key not valid. Please pass a valid API key.",
                "status": "INVALID_ARGUMENT",
                "details": [
                    {
                        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                        "reason": "API_KEY_INVALID",
                        "domain": "googleapis.com",
                    }
                ],
            }
        }

    def frames(self, text, calls):
        def data(parts, finish=None):
            candidate = {
                "content": {"role": "model", "parts": parts},
                "index": 0,
                **({"finishReason": finish} if finish else {}),
            }
            usage = {"promptTokenCount": 12, "candidatesTokenCount": 7, "totalTokenCount": 19}
            return (
                "data: "
                + json.dumps(
                    {
                        "candidates": [candidate],
                        "modelVersion": "gemini-2.5-flash",
                        "responseId": "resp-1",
                        "usageMetadata": usage,
                    }
                )
                + "\r\n\r\n"
            )

        return [data([{"text": p}]) for p in pieces(text)] + [
            data(
                [{"functionCall": {"name": name, "args": args}} for name, args in calls]
                or [{"text": ""}],
                "STOP",
            )
        ]


@pytest.fixture
def serve(project, monkeypatch):
    """Start a provider's server and point amas at it:
    serve(Anthropic, sent="wrong") sends a wrong key."""
    started = []

    def start(cls, model: str | None = None, sent: str | None = None, **kwargs) -> WireServer:
        server = cls(**kwargs)
        started.append(server)
        monkeypatch.setenv("AMAS_MODEL", model or cls.model)
        monkeypatch.setenv("AMAS_API_BASE", server.api_base)
        if sent or server.key:
            monkeypatch.setenv("AMAS_API_KEY", sent or server.key)
        return server

    monkeypatch.setenv("COLUMNS", "100")
    yield start
    for server in started:
        server.close()


def amas(*args):
    from amas_code.amas import cli

    saved = dict(os.environ)  # amas takes its keys out of its environment: give them back
    try:
        return CliRunner().invoke(cli, list(args), catch_exceptions=True)
    finally:  # and keep what imports set: litellm's TIKTOKEN_CACHE_DIR (else tiktoken downloads)
        os.environ.update(saved)


def function_response(part: dict) -> dict:
    """Gemini accepts the part as functionResponse or function_response (proto JSON);
    litellm sends the latter."""
    return part.get("functionResponse") or part["function_response"]


# -- Ollama ----------------------------------------------------------------------------------------


def test_ollama_tool_call_round_trip_with_num_ctx(serve, project):
    (project / ".amas").mkdir()
    (project / ".amas/config.yaml").write_text("max_context_tokens: 8192\n")
    ollama = serve(Ollama)
    ollama.reply("Creating it.", tool="create_file", path="hello.py", content="print('hi')\n")
    ollama.reply("Created hello.py for you.")
    result = amas("-y", "create hello.py")
    assert result.exit_code == 0, result.output
    assert (project / "hello.py").read_text() == "print('hi')\n"
    assert "Created hello.py for you." in result.output
    first, second = ollama.chats
    assert first["model"] == "qwen2.5-coder" and first["stream"] is True
    # from max_context_tokens
    assert first["options"]["num_ctx"] == second["options"]["num_ctx"] == 8192
    assert {t["function"]["name"] for t in first["tools"]} >= {
        "create_file",
        "read_file",
        "shell_command",
    }
    assert (
        first["messages"][0]["role"] == "system"
        and "You are Amas Code" in first["messages"][0]["content"]
    )
    call, fed_back = second["messages"][-2:]
    assert call["role"] == "assistant" and call["content"] == "Creating it."
    assert call["tool_calls"] == [
        {
            "function": {
                "name": "create_file",  # Ollama's shape: an object, no id
                "arguments": {"path": "hello.py", "content": "print('hi')\n"},
            }
        }
    ]
    assert fed_back["role"] == "tool" and "hello.py" in fed_back["content"]
    # litellm asks only at times
    shows = [r["body"] for r in ollama.requests if r["path"] == "/api/show"]
    assert all(body == {"name": "qwen2.5-coder"} for body in shows)


def test_ollama_calls_in_separate_lines_without_ids_all_run(serve, project):
    ollama = serve(Ollama)  # one call with no arguments, one with: neither may be dropped or merged
    ollama.reply(calls=[("list_files", {}), ("read_file", {"path": "README.md"})]).reply(
        "The project is a demo."
    )
    result = amas("what is this project?")
    assert result.exit_code == 0, result.output
    assert "The project is a demo." in result.output
    second = ollama.chats[1]["messages"]
    assert [c["function"] for c in second[-3]["tool_calls"]] == [
        {"name": "list_files", "arguments": {}},
        {"name": "read_file", "arguments": {"path": "README.md"}},
    ]
    listing, readme = second[-2:]
    assert listing["role"] == readme["role"] == "tool"
    assert "README.md" in listing["content"] and "# demo" in readme["content"]


def test_ollama_model_without_tools_falls_back_to_text_calls(serve, project):
    (project / "notes.txt").write_text("remember the milk\n")
    ollama = serve(Ollama, model="ollama_chat/gemma:2b", tools=False)
    ollama.reply(
        "Let me look.\n"
        '<tool_call>{"name": "read_file", "arguments": {"path": "notes.txt"}}</tool_call>'
    )
    ollama.reply("Your notes say: remember the milk.")
    result = amas("what do my notes say?")
    assert result.exit_code == 0, result.output
    assert "Your notes say: remember the milk." in result.output
    assert result.output.count("no native tool calling") == 1  # told once
    chats = [r for r in ollama.requests if r["path"] == "/api/chat"]
    rejected = [r for r in chats if "tools" in r["body"]]
    assert (
        rejected
        and all(r["status"] == 400 for r in rejected)
        and chats[: len(rejected)] == rejected
    )
    text = [r["body"] for r in chats[len(rejected) :]]
    assert len(text) == 2 and all("tools" not in body for body in text)
    system = text[0]["messages"][0]["content"]
    assert "<tool_call>" in system and "read_file(" in system and "create_file(" in system
    asked, fed_back = text[1]["messages"][-2:]
    assert (
        asked["role"] == "assistant"
        and "tool_calls" not in asked
        and '"name": "read_file"' in asked["content"]
    )
    assert fed_back["role"] == "user" and fed_back["content"].startswith(
        '<tool_response name="read_file">'
    )
    assert "remember the milk" in fed_back["content"]


# -- Anthropic -------------------------------------------------------------------------------------


def test_anthropic_tool_use_round_trip(serve, project):
    anthropic = serve(Anthropic)
    anthropic.reply("Reading it.", tool="read_file", path="README.md").reply(tool="list_files")
    anthropic.reply("The README is one heading: demo.")
    result = amas("what is in README.md?")
    assert result.exit_code == 0, result.output
    assert "The README is one heading: demo." in result.output
    first, second, third = anthropic.chats
    assert all(r["headers"]["x-api-key"] == KEY for r in anthropic.requests)
    assert first["model"] == "claude-sonnet-4-5" and first["stream"] is True
    assert "You are Amas Code" in first["system"][0]["text"]
    assert {t["name"] for t in first["tools"]} >= {
        "read_file",
        "edit_file",
    } and "input_schema" in first["tools"][0]
    call, fed_back = second["messages"][-2:]
    assert call == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Reading it."},
            {
                "type": "tool_use",
                "id": "toolu_01read_file1",
                "name": "read_file",
                "input": {"path": "README.md"},
            },
        ],
    }
    (block,) = fed_back["content"]
    assert fed_back["role"] == "user" and block["type"] == "tool_result"
    assert block["tool_use_id"] == "toolu_01read_file1" and "# demo" in json.dumps(block["content"])
    # a call with no text: no placeholder text block is made up
    call, fed_back = third["messages"][-2:]
    assert call["content"] == [
        {"type": "tool_use", "id": "toolu_01list_files0", "name": "list_files", "input": {}}
    ]
    assert fed_back["content"][0]["tool_use_id"] == "toolu_01list_files0"
    assert "README.md" in json.dumps(fed_back["content"][0]["content"])


# -- Gemini ----------------------------------------------------------------------------------------


def test_gemini_function_call_round_trip(serve, project):
    gemini = serve(Gemini)
    gemini.reply(tool="create_file", path="notes/todo.md", content="- ship it\n").reply(
        "Wrote notes/todo.md."
    )
    result = amas("-y", "write a todo list")
    assert result.exit_code == 0, result.output
    assert (project / "notes/todo.md").read_text() == "- ship it\n"
    assert "Wrote notes/todo.md." in result.output
    # the base URL override reached: {api_base}/models/{model}:streamGenerateContent
    first, second = gemini.chats
    assert all(r["headers"]["x-goog-api-key"] == KEY for r in gemini.requests)
    assert "You are Amas Code" in first["system_instruction"]["parts"][0]["text"]
    assert {f["name"] for f in first["tools"][0]["function_declarations"]} >= {
        "create_file",
        "read_file",
    }
    call, fed_back = second["contents"][-2:]
    # no empty text part beside the call: Gemini rejects {"text": ""} with a 400
    assert call["role"] == "model"
    assert [p.get("functionCall") or p.get("function_call") for p in call["parts"]] == [
        {"name": "create_file", "args": {"path": "notes/todo.md", "content": "- ship it\n"}}
    ]
    response = function_response(fed_back["parts"][0])
    assert fed_back["role"] == "user" and response["name"] == "create_file"
    assert "notes/todo.md" in json.dumps(response["response"])


@pytest.mark.parametrize("cls", [Anthropic, Gemini, Ollama], ids=lambda cls: cls.__name__)
def test_an_answer_leaves_no_response_open_in_the_shared_pool(serve, cls):
    """litellm stops reading these streams at their last event; the response it leaves open was
    closed by the garbage collector, which can run inside the next request while it holds the pool's
    lock: the CI run of this suite, like a REPL's next message, then waited forever (httpcore issue
    990)."""
    import litellm

    server = serve(cls)
    server.reply("First.").reply("Second.")
    first, second = amas("one"), amas("two")
    assert (
        (first.exit_code, second.exit_code) == (0, 0)
        and "First." in first.output
        and "Second." in second.output
    )
    assert [r["status"] for r in server.requests if r["path"] == server.chat_path] == [200, 200]
    pool = litellm.module_level_client.client._transport._pool
    chats = [
        url
        for url in (r.request.url for r in pool._requests)
        if (url.port, url.target.decode()) == (server.server.server_port, server.chat_path)
    ]
    assert chats == []  # none in flight, none left over (after a reply from Ollama, litellm's
    # cost bookkeeping may still be asking /api/show for the model's facts in a thread of its own)


# -- OpenAI-compatible servers (llama.cpp, LM Studio, vLLM) ----------------------------------------


def test_openai_compatible_server_needs_no_key(project, llm, monkeypatch):
    # llama.cpp's server: api_base, no key at all
    monkeypatch.setenv("AMAS_MODEL", "openai/qwen2.5-coder")
    monkeypatch.setenv("AMAS_API_BASE", llm.url)
    llm.reply(tool="read_file", path="README.md").reply(text="A demo project.")
    result = amas("what is this project?")
    assert result.exit_code == 0, result.output
    assert "A demo project." in result.output
    call, fed_back = llm.requests[1]["messages"][-2:]
    assert not call.get("content") and call["tool_calls"][0]["function"]["name"] == "read_file"
    assert fed_back["role"] == "tool" and "# demo" in fed_back["content"]


# -- errors ----------------------------------------------------------------------------------------

GEMINI_403 = (
    403,
    {
        "error": {
            "code": 403,
            "status": "PERMISSION_DENIED",
            "message": "Generative Language API has not been used in project 1234 "
            "or it is disabled.",
        }
    },
)
ANTHROPIC_403 = (
    403,
    {
        "type": "error",
        "error": {
            "type": "permission_error",
            "message": "Your API key does not have permission to use this resource.",
        },
    },
)
AUTH_CASES = {  # server, server options, the line the user must see
    "ollama-401": (
        Ollama,
        {"key": "proxy-token"},
        "authentication failed for ollama_chat/qwen2.5-coder",
        "(unauthorized)",
    ),
    "anthropic-401": (
        Anthropic,
        {},
        "authentication failed for anthropic/claude-sonnet-4-5: check ANTHROPIC_API_KEY",
        "(invalid x-api-key)",
    ),
    "anthropic-403": (
        Anthropic,
        {"fail": ANTHROPIC_403},
        "access denied (403) for anthropic/claude-sonnet-4-5",
        "does not have permission",
    ),
    "gemini-bad-key": (
        Gemini,
        {},
        "authentication failed for gemini/gemini-2.5-flash: check GOOGLE_API_KEY",
        "(API key not valid. Please pass a valid API key.)",
    ),
    "gemini-403": (
        Gemini,
        {"fail": GEMINI_403},
        "access denied (403) for gemini/gemini-2.5-flash",
        "Generative Language API has not been used",
    ),
}


@pytest.mark.parametrize("case", AUTH_CASES)
def test_auth_error_is_one_clear_line(serve, case):
    cls, options, line, detail = AUTH_CASES[case]
    options = dict(options)
    fail = options.pop("fail", None)
    server = serve(cls, sent=None if fail else "wrong-key", **options)
    server.fail = fail
    result = amas("hello")
    # not a crash
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert line in result.output and detail in result.output
    assert "Traceback" not in result.output and "litellm." not in result.output
    # the provider's own endpoint
    chats = [r for r in server.requests if r["path"] == server.chat_path]
    assert chats and all(r["status"] in (400, 401, 403) for r in chats)


def test_auth_errors_in_a_real_process_exit_1_without_traceback(project, home):
    """Each run is its own process (forked from the tests' fork server, litellm imported)."""
    servers = [Ollama(key="proxy-token"), Anthropic(), Gemini()]
    try:
        for server in servers:
            env = {"AMAS_MODEL": server.model, "AMAS_API_BASE": server.api_base}
            run = run_amas("hello", env={**env, "AMAS_API_KEY": "wrong-key"}, timeout=90)
            assert run.returncode == 1, run.stderr
            assert f"authentication failed for {server.model}" in run.stderr
            assert "Traceback" not in run.stdout + run.stderr
            assert len(run.stderr.strip().splitlines()) == 1, run.stderr  # one clear line
    finally:
        for server in servers:
            server.close()
