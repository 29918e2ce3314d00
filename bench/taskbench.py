"""Task bench (issue 52): small real tasks for amas, Aider and mini-swe-agent, one small model.

    python bench/taskbench.py                   # all tasks: amas, aider, mini; the 1.5B model
    python bench/taskbench.py --agents amas amas-text --tasks rename run-tests --limit 300
    python bench/taskbench.py --server-args "--temp 0"           # llama-server's defaults changed
    python bench/taskbench.py --api-base http://127.0.0.1:8089/v1   # a server already running
    python bench/taskbench.py --combine /tmp/tb-amas /tmp/tb-peers  # one table from earlier runs
    python bench/taskbench.py --transcript /tmp/tb-amas/amas-rename-XXXX   # one run's conversation

The recorded run (docs/performance.md, 2026-11-29), one --out folder per agent:

    python bench/taskbench.py --agents amas --out /tmp/tb-amas1    # and amas-text, amas-init,
    python bench/taskbench.py --agents aider --out /tmp/tb-aider1  # mini, mini-text
    python bench/taskbench.py --agents amas amas-text --server-args "--temp 0" --out /tmp/tb-temp0
    python bench/taskbench.py --combine /tmp/tb-*

The model is Qwen2.5-Coder-1.5B-Instruct Q4_K_M, assembled from its PyPI parts and served by
llama-server on 127.0.0.1 with one thread, `--jinja` and one slot of 16,384 tokens
(bench/realmodel.py says how). Every agent reaches it through a recording proxy on 127.0.0.1, which
keeps each request and answer: the requests, and the prompt tokens as the server counted them
(llama-server's `timings`: `prompt_n` tokens evaluated, `cache_n` reused from the previous
request). Each task (bench/taskset.py) runs in a fresh git repository with a fresh HOME, bounded by
--limit seconds (the agent's process group is killed then), and is judged by its check: the
project's tests, hidden calls, greps; never the agent's word. The agents, as configured here:

- `amas`: `python -m amas_code --yes --output-format json -m openai/MODEL --api-base PROXY "TASK"`,
  this worktree's code (PYTHONPATH), no config file: native tool calls (`text_tools: auto`);
- `amas-text`: the same with `text_tools: true` in ~/.amas/config.yaml (tool calls written as
  text);
- `amas-init`: `amas init` first (the project map in the prompt), then the same as `amas`;
- `aider`: aider-chat 0.86.2 from its own venv, `aider --model openai/MODEL --openai-api-base PROXY
  --openai-api-key none --message "TASK" --yes-always --no-check-update --no-analytics
  --no-show-release-notes --no-show-model-warnings --no-pretty --no-fancy-input`: Aider's defaults
  otherwise (its edit format for a model it does not know, its repo map, auto-commits; no
  --test-cmd, so it runs no tests of its own);
- `mini`: mini-swe-agent 2.4.6 from its own venv, `mini --model openai/MODEL --task "TASK" --yolo
  --exit-immediately` with the proxy as litellm's api_base (`-c` a config file beside the default
  one, cost tracking off: the model has no price), its default agent otherwise (bash commands
  only);
- `mini-text`: the same with mini's own `mini_textbased.yaml` and `--model-class litellm_textbased`
  (the command in a fenced block, for models without tool calls).

Temperature: Aider sends 0; amas and mini send none, so llama-server's default applies (0.8, or
what --server-args sets).

Peers live in venvs OUTSIDE the repository, --peers (default /work/peers-tasks):
`<peers>/aider/bin/aider`, `<peers>/mini/bin/mini`; one not installed is skipped and said so. Each
run's stdout, stderr, the exchanges with the server (JSON lines) and the check's findings go to
--out (default a new /tmp/taskbench-*); the table (markdown) is printed and written there as
table.md.
"""

import argparse
import datetime
import http.client
import json
import os
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench")]
import realmodel  # noqa: E402
import taskset  # noqa: E402

LIMIT = 480  # seconds for one agent on one task
SETTLE = 10  # seconds for the server to drop a killed agent's request before it is restarted
# the model's name in the agents' -m (llama-server serves its one model whatever the name)
NAME = "qwen2.5-coder-1.5b-instruct"
PEERS = Path("/work/peers-tasks")  # the peers' venvs, outside the repository
MINI_CONFIG = """model:
  model_kwargs:
    api_base: {base}
    api_key: none
  cost_tracking: ignore_errors
"""


class Recorder:
    """A proxy on 127.0.0.1 in front of the model server: relays each request and its answer
    (streamed chunk by chunk) and keeps both as an exchange: {path, request, status, answer,
    seconds}."""

    def __init__(self, upstream: str):
        self.upstream = urlsplit(upstream.rstrip("/").removesuffix("/v1"))
        self.exchanges = []
        self.open = set()  # connections to the upstream now in use
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Relay)
        self.server.daemon_threads = True
        self.server.recorder = self
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def take(self) -> list[dict]:
        """The exchanges so far, and a fresh start."""
        taken = self.exchanges
        self.exchanges = []
        return taken

    def cut(self) -> None:
        """Close every request still open upstream: a killed agent's last request is not left to
        run on (a streamed one then fails at its next chunk; an unstreamed one has none to fail on,
        and runs on: see settle)."""
        for connection in list(self.open):
            if connection.sock is not None:
                connection.sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Relay(BaseHTTPRequestHandler):
    """One request passed on to the recorder's upstream, its answer passed back as it comes."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.relay()

    def do_POST(self):
        self.relay()

    def relay(self):
        recorder = self.server.recorder
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        record = {"path": self.path, "request": parse_json(raw), "status": None, "answer": ""}
        recorder.exchanges.append(record)
        began = time.monotonic()
        target = recorder.upstream
        upstream = http.client.HTTPConnection(target.hostname, target.port, timeout=LIMIT * 2)
        recorder.open.add(upstream)
        try:
            headers = {"Content-Type": self.headers.get("Content-Type") or "application/json"}
            upstream.request(self.command, self.path, body=raw or None, headers=headers)
            self.pass_on(upstream.getresponse(), record)
        except OSError as e:  # the agent went away (killed at its limit), or the server did
            record["answer"] += f"\n(relay stopped: {e})"
        finally:
            recorder.open.discard(upstream)
            upstream.close()
            record["seconds"] = round(time.monotonic() - began, 2)

    def pass_on(self, answer, record: dict) -> None:
        record["status"] = answer.status
        self.send_response(answer.status)
        self.send_header("Content-Type", answer.getheader("Content-Type") or "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        kept = bytearray()
        try:
            while piece := answer.read1(65536):
                kept += piece
                self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        finally:  # decoded whole: a chunk may end inside a character
            record["answer"] = kept.decode(errors="replace")
        self.close_connection = True


def parse_json(raw: bytes):
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


def counts(exchange: dict) -> dict:
    """A chat exchange's tokens as the server counted them: prompt (all of it), evaluated (not from
    the cache), completion. llama-server's `timings` say prompt_n (evaluated) and cache_n; else
    `usage`."""
    last = {}
    for line in exchange["answer"].splitlines():
        body = line.removeprefix("data: ").strip()
        if body.startswith("{"):
            data = parse_json(body.encode())
            if isinstance(data, dict) and (data.get("timings") or data.get("usage")):
                last = data
    timings = last.get("timings") or {}
    usage = last.get("usage") or {}
    if timings:
        evaluated = timings.get("prompt_n", 0)
        prompt = evaluated + timings.get("cache_n", 0)
        return {
            "prompt": prompt,
            "evaluated": evaluated,
            "completion": timings.get("predicted_n", 0),
        }
    prompt = usage.get("prompt_tokens", 0)
    return {"prompt": prompt, "evaluated": prompt, "completion": usage.get("completion_tokens", 0)}


def said(exchange: dict) -> str:
    """What the model answered in an exchange, streamed or not: its text, then each tool call."""
    text, calls = [], {}
    for line in exchange["answer"].splitlines():
        data = parse_json(line.removeprefix("data: ").strip().encode())
        if not isinstance(data, dict):
            continue
        for choice in data.get("choices") or []:
            part = choice.get("delta") or choice.get("message") or {}
            text.append(part.get("content") or "")
            for call in part.get("tool_calls") or []:
                add_call(calls, call)
    return "".join(text) + "".join(f"\n[call] {name} {args}" for name, args in calls.values())


def add_call(calls: dict, call: dict) -> None:
    """A streamed tool call's piece added to what came before it at its index."""
    index = call.get("index", 0)
    name, args = calls.get(index, ("", ""))
    function = call.get("function") or {}
    calls[index] = (name + (function.get("name") or ""), args + (function.get("arguments") or ""))


def transcript(exchanges: list[dict]) -> str:
    """The conversation as the server saw it: each request's messages new since the last, then the
    answer."""
    lines, seen = [], 0
    for n, exchange in enumerate(chats(exchanges)):
        messages = exchange["request"].get("messages", [])
        if len(messages) < seen:
            seen = 0
        for message in messages[seen:]:
            lines.append(f"--- {message.get('role')}: {shown(message)}")
        seen = len(messages) + 1
        lines.append(
            f"=== answer {n + 1} ({counts(exchange)}, {exchange.get('seconds')} s): "
            f"{said(exchange)}"
        )
    return "\n".join(lines)


def shown(message: dict) -> str:
    text = message.get("content") or ""
    if isinstance(text, list):
        text = " ".join(part.get("text", "") for part in text)
    calls = [
        c["function"]["name"] + " " + c["function"]["arguments"]
        for c in message.get("tool_calls") or []
    ]
    return text + "".join(f"\n[call] {c}" for c in calls)


def chats(exchanges: list[dict]) -> list[dict]:
    return [x for x in exchanges if x["path"].rstrip("/").endswith("chat/completions")]


# -- the agents -----------------------------------------------------------------------------------
def clean_env(home: Path) -> dict:
    """The environment an agent starts with: this one without keys, API bases or amas's
    variables, a fresh HOME, litellm's price map from its package (no download), a git identity."""
    env = {}
    for key, value in os.environ.items():
        secret = key.endswith(("_API_KEY", "_API_BASE")) or key.startswith(("AMAS_", "OPENAI_"))
        if not secret:
            env[key] = value
    env["HOME"] = str(home)
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    env["GIT_AUTHOR_NAME"] = env["GIT_COMMITTER_NAME"] = "Bench"
    env["GIT_AUTHOR_EMAIL"] = env["GIT_COMMITTER_EMAIL"] = "bench@example.com"
    return env


def amas_command(prompt: str, base: str, home: Path, peers: Path) -> tuple[list, dict]:
    """amas from this worktree, native tool calls where the server takes them."""
    argv = [sys.executable, "-m", "amas_code", "--yes", "--output-format", "json"]
    argv += ["-m", f"openai/{NAME}", "--api-base", base, prompt]
    env = clean_env(home)
    env["PYTHONPATH"] = str(ROOT)
    return argv, env


def amas_text_command(prompt: str, base: str, home: Path, peers: Path) -> tuple[list, dict]:
    """amas with tool calls written as text (`text_tools: true` in the user's config)."""
    (home / ".amas").mkdir()
    (home / ".amas" / "config.yaml").write_text("text_tools: true\n")
    return amas_command(prompt, base, home, peers)


def amas_init_command(prompt: str, base: str, home: Path, peers: Path) -> tuple[list, dict]:
    """amas after `amas init` (the project map in its prompt), the README's first step."""
    argv, env = amas_command(prompt, base, home, peers)
    script = '"$0" -m amas_code init >/dev/null && exec "$0" "$@"'
    return ["sh", "-c", script, argv[0], *argv[1:]], env


def aider_command(prompt: str, base: str, home: Path, peers: Path) -> tuple[list, dict]:
    argv = [str(peers / "aider" / "bin" / "aider"), "--model", f"openai/{NAME}"]
    argv += ["--openai-api-base", base, "--openai-api-key", "none", "--message", prompt]
    argv += ["--yes-always", "--no-check-update", "--no-analytics", "--no-show-release-notes"]
    argv += ["--no-show-model-warnings", "--no-pretty", "--no-fancy-input"]
    return argv, clean_env(home)


def mini_command(prompt: str, base: str, home: Path, peers: Path) -> tuple[list, dict]:
    """mini-swe-agent with its default config (native bash tool calls)."""
    config = home / "mini-model.yaml"
    config.write_text(MINI_CONFIG.format(base=base))
    argv = [str(peers / "mini" / "bin" / "mini"), "--model", f"openai/{NAME}", "--task", prompt]
    argv += ["--yolo", "--exit-immediately", "-c", "mini.yaml", "-c", str(config)]
    env = clean_env(home)
    env["MSWEA_COST_TRACKING"] = "ignore_errors"
    env["MSWEA_CONFIGURED"] = "true"
    return argv, env


def mini_text_command(prompt: str, base: str, home: Path, peers: Path) -> tuple[list, dict]:
    """mini-swe-agent with its text-based config: the command in a fenced block, no tool calls."""
    argv, env = mini_command(prompt, base, home, peers)
    argv[argv.index("mini.yaml")] = "mini_textbased.yaml"
    return [*argv, "--model-class", "litellm_textbased"], env


AGENTS = {
    "amas": amas_command,
    "amas-text": amas_text_command,
    "amas-init": amas_init_command,
    "aider": aider_command,
    "mini": mini_command,
    "mini-text": mini_text_command,
}
PEER_BINARIES = {"aider": "aider/bin/aider", "mini": "mini/bin/mini", "mini-text": "mini/bin/mini"}


def installed(agent: str, peers: Path) -> bool:
    if agent not in PEER_BINARIES:
        return True
    return os.access(peers / PEER_BINARIES[agent], os.X_OK)


# -- one run --------------------------------------------------------------------------------------
def run_bounded(argv: list, env: dict, place: Path, limit: float) -> tuple[int | str, float]:
    """Run in place/repo to its end or to `limit` seconds (then its whole process group is killed):
    (exit code or "timeout", wall seconds). stdout and stderr go to place/agent.out and agent.err.
    """
    began = time.monotonic()
    with open(place / "agent.out", "wb") as out, open(place / "agent.err", "wb") as err:
        proc = subprocess.Popen(
            argv,
            cwd=place / "repo",
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        try:
            code = proc.wait(limit)
        except subprocess.TimeoutExpired:
            code = "timeout"
        kill_group(proc)
    return code, round(time.monotonic() - began, 1)


def kill_group(proc: subprocess.Popen) -> None:
    """End what the run left behind (its own session): the agent, and any command it started."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            continue
    proc.wait()


def idle(upstream: str, limit: float) -> bool:
    """Whether the server has no request in work, waiting at most `limit` seconds for it:
    llama-server's GET /slots (a server without it counts as idle)."""
    port = urlsplit(upstream).port
    deadline = time.monotonic() + limit
    while True:
        slots = parse_json(realmodel.get(port, "/slots")[1])
        if not isinstance(slots, list) or not any(s.get("is_processing") for s in slots):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(1)


def settle(bench: dict) -> str:
    """The server idle before the next run, and how: a killed agent's last request is cut at the
    relay, which ends a streamed one; an unstreamed one runs on until the server (when the bench
    started it) is restarted. A server given with --api-base is waited for, up to the run limit."""
    bench["recorder"].cut()
    if idle(bench["upstream"], SETTLE):
        return ""
    if bench.get("server") is None:
        idle(bench["upstream"], bench["limit"])
        return "server busy after the run: waited"
    bench["server"].restart()
    return "server restarted: its last request ran on"


def amas_result(stdout: str) -> dict:
    """amas's --output-format json result (its last line that is one), or {}."""
    for line in reversed(stdout.splitlines()):
        data = parse_json(line.encode())
        if isinstance(data, dict) and data.get("type") == "result":
            return data
    return {}


def run_task(agent: str, task: taskset.Task, bench: dict) -> dict:
    """One agent on one task in a fresh repository and HOME: the row of the table."""
    place = Path(tempfile.mkdtemp(prefix=f"{agent}-{task.name}-", dir=bench["out"]))
    repo = place / "repo"
    home = place / "home"
    home.mkdir()
    taskset.make_repo(task, repo)
    argv, env = AGENTS[agent](task.prompt, bench["recorder"].url, home, bench["peers"])
    code, wall = run_bounded(argv, env, place, bench["limit"])
    note = settle(bench)
    exchanges = bench["recorder"].take()
    wrong = task.check(task, repo)
    row = summary(agent, task, exchanges, wrong)
    row.update(exit=code, wall=wall, dir=str(place), server=note)
    if agent.startswith("amas"):
        row["amas"] = amas_result((place / "agent.out").read_text(errors="replace"))
    save(place, exchanges, row)
    return row


def summary(agent: str, task: taskset.Task, exchanges: list[dict], wrong: list[str]) -> dict:
    tokens = [counts(x) for x in chats(exchanges)]
    first = 0
    if tokens:
        first = tokens[0]["prompt"]
    return {
        "agent": agent,
        "task": task.name,
        "solved": not wrong,
        "wrong": wrong,
        "requests": len(tokens),
        "prompt": sum(t["prompt"] for t in tokens),
        "evaluated": sum(t["evaluated"] for t in tokens),
        "completion": sum(t["completion"] for t in tokens),
        "first": first,
    }


def save(place: Path, exchanges: list[dict], row: dict) -> None:
    with open(place / "exchanges.jsonl", "w") as out:
        for exchange in exchanges:
            out.write(json.dumps(exchange) + "\n")
    (place / "row.json").write_text(json.dumps(row, indent=1))


# -- the table ------------------------------------------------------------------------------------
HEADER = [
    "| task | agent | solved | wall | exit | requests | prompt tokens (evaluated) | 1st request "
    "| why not |",
    "|---|---|---|---|---|---|---|---|---|",
]


def table(rows: list[dict]) -> str:
    lines = list(HEADER)
    lines += [table_row(row) for row in rows]
    return "\n".join(lines + ["", *totals(rows)]) + "\n"


def table_row(row: dict) -> str:
    solved = "✗"
    if row["solved"]:
        solved = "✓"
    why = ""
    if row["wrong"]:  # the first finding, short: the run's row.json has them all
        why = row["wrong"][0][:90].replace("|", "\\|")
    return (
        f"| {row['task']} | {row['agent']} | {solved} | {row['wall']:.0f} s | {row['exit']} "
        f"| {row['requests']} | {row['prompt']:,} ({row['evaluated']:,}) | {row['first']:,} "
        f"| {why} |"
    )


def totals(rows: list[dict]) -> list[str]:
    lines = [
        "| agent | solved | median wall | requests | prompt tokens (evaluated) |",
        "|---|---|---|---|---|",
    ]
    for agent in dict.fromkeys(r["agent"] for r in rows):
        mine = [r for r in rows if r["agent"] == agent]
        solved = sum(r["solved"] for r in mine)
        wall = statistics.median(r["wall"] for r in mine)
        prompt = sum(r["prompt"] for r in mine)
        evaluated = sum(r["evaluated"] for r in mine)
        requests = sum(r["requests"] for r in mine)
        lines.append(
            f"| {agent} | {solved}/{len(mine)} | {wall:.0f} s | {requests} "
            f"| {prompt:,} ({evaluated:,}) |"
        )
    return lines


def combined(outs: list[Path]) -> str:
    """One table from the runs kept in earlier --out folders, side by side: task by task, agent by
    agent."""
    rows = [json.loads(row.read_text()) for out in outs for row in sorted(out.glob("*/row.json"))]
    order = [t.name for t in taskset.TASKS]
    rows.sort(key=lambda row: order.index(row["task"]))
    return table(rows)


def heading(args, began: datetime.datetime) -> str:
    return (
        f"{began:%Y-%m-%d %H:%M %Z}; model {args.model} ({NAME}, Q4_K_M) on llama-server, "
        f"1 thread, context {realmodel.CONTEXT:,}; {os.cpu_count()} cores, "
        f"load {os.getloadavg()[0]:.1f} at the end; "
        f"limit {args.limit:.0f} s a run\n\n"
    )


# -- main -----------------------------------------------------------------------------------------
OPTIONS = {  # the command line: option -> argparse's keywords
    "--agents": {"nargs": "+", "choices": list(AGENTS), "default": ["amas", "aider", "mini"]},
    "--tasks": {"nargs": "+", "choices": [t.name for t in taskset.TASKS]},
    "--model": {"choices": sorted(realmodel.MODELS), "default": "1.5b"},
    "--limit": {"type": float, "default": LIMIT, "help": f"seconds a run (default {LIMIT})"},
    "--server-args": {
        "default": "",
        "metavar": "ARGS",
        "help": 'more llama-server arguments, in one string: --server-args "--temp 0"',
    },
    "--api-base": {"help": "a model server already running (else one is started)"},
    "--peers": {"type": Path, "default": PEERS, "help": "where the peers' venvs are"},
    "--transcript": {"type": Path, "metavar": "RUN", "help": "print a run's conversation, stop"},
    "--combine": {"type": Path, "nargs": "+", "metavar": "OUT", "help": "one table from --out's"},
    "--out": {"type": Path, "help": "where each run's logs go (default: a new /tmp dir)"},
}


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for option, keywords in OPTIONS.items():
        parser.add_argument(option, **keywords)
    return parser.parse_args()


def main() -> None:
    args = arguments()
    if args.transcript:
        lines = (args.transcript / "exchanges.jsonl").read_text().splitlines()
        print(transcript([json.loads(line) for line in lines]))
        return
    if args.combine:
        print(combined(args.combine), end="")
        return
    out = args.out or Path(tempfile.mkdtemp(prefix="taskbench-"))
    out.mkdir(parents=True, exist_ok=True)
    began = datetime.datetime.now().astimezone()
    try:
        rows = bench_all(args, out)
    except realmodel.Failed as e:
        print(f"taskbench: {e}", file=sys.stderr)
        sys.exit(1)
    text = heading(args, began) + table(rows)
    (out / "table.md").write_text(text)
    print(f"\n{text}\nlogs: {out}")


def bench_all(args, out: Path) -> list[dict]:
    server = None
    upstream = args.api_base
    if not upstream:
        log = out / "llama-server.log"
        server = realmodel.serve(
            args.model, realmodel.free_port(), log, tuple(shlex.split(args.server_args))
        )
        upstream = server.url
    recorder = Recorder(upstream)
    bench = {"out": out, "recorder": recorder, "upstream": upstream, "limit": args.limit}
    bench["peers"] = args.peers
    bench["server"] = server
    try:
        return run_all(args, bench)
    finally:
        recorder.close()
        if server:
            server.stop()


def run_all(args, bench: dict) -> list[dict]:
    tasks = [t for t in taskset.TASKS if not args.tasks or t.name in args.tasks]
    rows = []
    for agent in args.agents:
        if not installed(agent, args.peers):
            print(f"taskbench: {agent} is not installed under {args.peers}: skipped", flush=True)
            continue
        for task in tasks:
            rows.append(run_task(agent, task, bench))
            print(table_row(rows[-1]), flush=True)
    return rows


if __name__ == "__main__":
    main()
