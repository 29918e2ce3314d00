"""A scripted OpenAI-compatible chat server on 127.0.0.1:
SSE streaming, tool-call deltas, errors."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HELD = 30  # seconds at most a reply waits for its test's event (see ScriptedLLM.reply)


class ScriptedLLM:
    """Enqueue replies with reply()/error(); read what the model received from .requests.
    Set .props to a dict to answer GET /props as llama.cpp's server does, .models to a list for the
    data of GET /v1/models (vLLM's metadata), .lm_studio for LM Studio's GET /api/v0/models, .loaded
    for Ollama's GET /api/ps; .gets lists the GET paths asked for."""

    def __init__(self):
        self.script, self.requests = [], []
        self.props, self.gets, self.authorizations = None, [], []  # Authorization header per POST
        self.models = [{"id": "test-model", "object": "model"}]
        self.lm_studio = None  # a list: LM Studio's GET /api/v0/models data
        # a list: Ollama's GET /api/ps models, listed once a chat request came (a model loads then)
        self.loaded = None
        self.events = []  # what replies wait for, all set at close: no handler is left waiting
        self.probe = None  # what an unstreamed request right after an empty stream gets
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    def reply(
        self,
        text: str = "",
        tool: str | None = None,
        raw_args: str | None = None,
        calls=None,
        delay: float = 0,
        wait: float | threading.Event = 0,
        finish: str | None = None,
        usage: bool = True,
        piece: int = 7,
        hold: threading.Event | None = None,
        **args,
    ):
        """A streamed answer: text, and/or one tool call (`tool` with **args), or several `calls`;
        `delay` seconds before each chunk makes a slow model, `wait` seconds (or until the test
        sets that event) before any answer a hung one, `hold` an answer paused after its first piece
        of text until the test sets that event (what a person types meanwhile, no time guessed);
        `finish` overrides the finish_reason ("length": cut at max_tokens); `usage=False` sends no
        token counts (llama-cpp-python sends none); `piece` is how many characters of text each
        chunk carries (a long text in big pieces spares litellm's per-chunk work)."""
        self.events += [e for e in (wait, hold) if isinstance(e, threading.Event)]
        calls = list(calls or [])
        if tool:
            calls.append((tool, raw_args if raw_args is not None else json.dumps(args)))
        self.script.append(
            {
                "text": text,
                "calls": calls,
                "delay": delay,
                "wait": wait,
                "finish": finish,
                "usage": usage,
                "piece": piece,
                "hold": hold,
            }
        )
        return self

    def reply_from(self, fn):
        """A tool call made from what the model has seen:
        fn(request body) -> (tool name, arguments)."""
        self.script.append({"fn": fn})
        return self

    def empty(self, status: int = 0, body: dict | None = None):
        """A 200 stream that carries no data, as a server that failed after accepting the request
        sends; the same request unstreamed right after it gets an empty answer, or the HTTP error
        `status` with `body` (llama-cpp-python fails inside a stream, and in a plain answer says
        why)."""
        probe = {"status": status, "body": body} if status else {"text": "", "calls": []}
        self.script.append({"empty": True, "text": "", "calls": [], "probe": probe})
        return self

    def error(
        self,
        status: int,
        message: str = "error",
        cut_after: str | None = None,
        delay: float = 0,
        kind: str = "error",
        body: dict | None = None,
        headers: dict | None = None,
    ):
        """An HTTP error (`kind` is the error body's "type", `body` a whole body of the server's own
        shape, `headers` more headers: Retry-After); or with cut_after, stream that text then drop
        the connection mid-body."""
        self.script.append(
            {
                "status": status,
                "message": message,
                "cut_after": cut_after,
                "delay": delay,
                "kind": kind,
                "body": body,
                "headers": headers or {},
            }
        )
        return self

    def close(self):
        for event in self.events:
            event.set()
        self.server.shutdown()
        self.server.server_close()

    def _handler(self):
        llm = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):  # /models and the like
                llm.gets.append(self.path)
                if llm.props is not None and self.path.rstrip("/").endswith("/props"):
                    return self._json(200, llm.props)
                if self.path.startswith("/api/v0/models"):  # LM Studio's own list, when given
                    return self._json(200 if llm.lm_studio else 404, {"data": llm.lm_studio or []})
                if self.path == "/api/ps" and llm.loaded is not None:  # Ollama's running models
                    return self._json(200, {"models": llm.loaded if llm.requests else []})
                self._json(200, {"object": "list", "data": llm.models})

            def do_POST(self):
                body = json.loads(
                    self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}"
                )
                llm.requests.append(body)
                llm.authorizations.append(self.headers.get("Authorization"))
                # the ask after an empty stream
                if llm.probe is not None and not body.get("stream"):
                    step, llm.probe = llm.probe, None
                else:
                    step = (
                        llm.script.pop(0)
                        if llm.script
                        else {"text": "(no scripted reply left)", "calls": []}
                    )
                    llm.probe = step.get("probe")
                if "fn" in step:
                    name, args = step["fn"](body)
                    step = {"text": "", "calls": [(name, json.dumps(args))]}
                _pause(step.get("wait", 0))
                time.sleep(step.get("delay", 0) if step.get("status") else 0)
                if step.get("status") and not step.get("cut_after"):
                    said = {
                        "message": step.get("message"),
                        "type": step.get("kind", "error"),
                        "code": step["status"],
                    }
                    body = step.get("body") or {"error": said}
                    return self._json(step["status"], body, step.get("headers", {}))
                if body.get("stream"):
                    return self._stream(step)
                return self._json(200, completion(step))

            def _json(self, status, data, headers=None):
                raw = json.dumps(data).encode()
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _stream(self, step):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                cut = step.get("cut_after")
                if step.get("empty"):
                    self._send(b": ping\n\n")
                    self._send(b"")
                    self.close_connection = True
                    return
                for n, chunk in enumerate(
                    chunks(cut, [])[:-2]
                    if cut
                    else chunks(
                        step["text"],
                        step.get("calls", []),
                        step.get("finish"),
                        step.get("piece", 7),
                    )[: None if step.get("usage", True) else -1]
                ):
                    time.sleep(step.get("delay", 0))
                    self._send(f"data: {json.dumps(chunk)}\n\n".encode())
                    if n == 1 and step.get("hold"):  # the role's chunk, then the first text
                        _pause(step["hold"])
                if step.get("cut_after"):  # a connection reset mid-answer: no end of body
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                self._send(b"data: [DONE]\n\n")
                self._send(b"")
                self.close_connection = True

            def _send(self, data: bytes):
                try:
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()
                except OSError:  # the client went away (Ctrl+C)
                    pass

        return Handler


def _pause(wait: float | threading.Event) -> None:
    """Seconds slept, or an event waited for (at most HELD seconds)."""
    if isinstance(wait, threading.Event):
        wait.wait(HELD)
    else:
        time.sleep(wait)


def _chunk(delta: dict, finish=None) -> dict:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": "test-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def chunks(text: str, calls: list, finish: str | None = None, piece: int = 7) -> list[dict]:
    """Text in small pieces, then each tool call's arguments split across several deltas."""
    out = [_chunk({"role": "assistant", "content": ""})]
    out += [_chunk({"content": text[i : i + piece]}) for i in range(0, len(text), piece)]
    for n, (name, args) in enumerate(calls):
        out.append(
            _chunk(
                {
                    "tool_calls": [
                        {
                            "index": n,
                            "id": f"call_{n}_{int(time.time() * 1000) % 100000}",
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                }
            )
        )
        out += [
            _chunk({"tool_calls": [{"index": n, "function": {"arguments": args[i : i + 9]}}]})
            for i in range(0, len(args), 9)
        ]
    out.append(_chunk({}, finish or ("tool_calls" if calls else "stop")))
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    out.append({**_chunk({}), "choices": [], "usage": usage})
    return out


def completion(step: dict) -> dict:
    calls = [
        {"id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": args}}
        for n, (name, args) in enumerate(step.get("calls", []))
    ]
    message = {"role": "assistant", "content": step.get("text", "")}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "test-model",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
