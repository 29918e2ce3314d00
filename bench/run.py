"""Benchmark (SPEC §8): `python bench/run.py [--runs N] [--only STEP ...] [--repo PATH] [--calm S]`.

Prints markdown tables and, after a full run, writes them to bench/latest.md. Every figure is the
median of N runs (min and max beside it) in a generated 1,000-file git project in a temp dir, with a
temp HOME. Besides the SPEC §8 rows it measures what the footprint issue asks: where a one-shot's
memory goes (by stage, and with litellm's token counter off), the browser's tree with the headless
shell and with full Chromium and with each flag changed, and search_files as the Python scan and
through `git grep` (same output), here and in --repo (a large git work tree, read only).
Shell-command checkpoints come from bench/checkpoints.py (imported, not copied). On a shared
machine, --calm S waits up to S seconds before each step for idle CPUs (timings only; memory does
not depend on load).
A full run takes ~6 minutes (--no-flags: ~3); `--only tools search --runs 3` takes seconds.
The scale step (issue 40) generates projects of --scale sizes (default 1,000 and 15,000 files;
60,000 takes minutes and is run once) and maps --scale-repo's HEAD too: init wall and CPU time,
incremental init, one-shot peak RSS and the REPL's RSS after one answer, for each;
`--only scale --scale 1000 15000 60000 --scale-repo DIR` took ~17 minutes on a loaded
2-core machine.
The local step (issue 53) runs a one-shot with one tool call against the scripted server, amas on
its direct path (`openai/test-model`: the openai SDK) and through litellm
(`custom_openai/test-model`), and, with --peers DIR, simonw's llm, mini-swe-agent and Aider from
their own venvs in DIR (llm/, mini/, aider/: `python -m venv DIR/llm && DIR/llm/bin/pip install
llm`, and so on), interleaved round by round; then a local server that is not listening.
"""

import argparse
import datetime
import fnmatch
import functools
import json
import os
import platform
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pexpect
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]
from llm_server import ScriptedLLM  # noqa: E402

MB = 1 << 20
LITELLM = (
    "custom_openai/test-model"  # the scripted server through litellm (openai/ at it is direct)
)
AMAS = ["amas"] if shutil.which("amas") else [sys.executable, "-m", "amas_code"]
ROWS = []  # (metric, values or None, unit, bar text, limit or None)
SECTIONS = []  # (title, markdown lines): breakdowns that are not single figures
LAST = {}  # of the last run(): "cpu" seconds


class TimedLLM(ScriptedLLM):
    """The scripted server, noting when each request arrives (perf_counter, this process)."""

    def __init__(self):
        self.arrivals = []
        super().__init__()

    def _handler(self):
        base, llm = super()._handler(), self

        class Handler(base):
            def do_POST(self):
                llm.arrivals.append(time.perf_counter())
                super().do_POST()

        return Handler


def busy(seconds: float = 2.0) -> float:
    """Share of all CPU time spent busy over the next few seconds (this bench is idle meanwhile)."""

    def sample():
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        return sum(fields), fields[3] + fields[4]  # total, idle + iowait

    (total0, idle0), _, (total1, idle1) = sample(), time.sleep(seconds), sample()
    return 1 - (idle1 - idle0) / max(1, total1 - total0)


CALM = {"waited": 0.0, "gave up": 0}


def calm(limit: float, below: float = 0.2) -> None:
    """Wait (at most limit s) until other work leaves the CPUs at least 80 % idle: timings on a busy
    machine mean little. Memory figures need no wait."""
    start = time.monotonic()
    while limit and busy() > below:
        if time.monotonic() - start > limit:
            CALM["gave up"] += 1
            break
    CALM["waited"] += time.monotonic() - start


def row(metric, values, unit, bar="report", limit=None):
    ROWS.append((metric, values, unit, bar, limit))
    print(f"  {metric}: {fmt(statistics.median(values), unit) if values else 'n/a'}", flush=True)


def fmt(v, unit):
    return {"s": f"{v:.3f} s", "ms": f"{v:.2f} ms", "MB": f"{v:.1f} MB"}.get(unit, f"{v:g}")


def med(values) -> float:
    return statistics.median(values)


def run(cmd, cwd, env=None, code=0):
    """Run to the end, expecting exit code `code`; (start perf_counter, wall s, peak RSS MB of
    exactly this child from wait4, output)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.stdout.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    # CPU time of the child and of the children it waited for (init's parse workers)
    LAST["cpu"] = usage.ru_utime + usage.ru_stime
    if proc.returncode != code:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{out[-2000:]}")
    return t0, wall, usage.ru_maxrss / 1024, out


def memory(procs, pss=False) -> float:
    """MB summed over processes: RSS, or PSS (shared pages split among their users)."""
    total = 0
    for p in procs:
        try:
            total += p.memory_full_info().pss if pss else p.memory_info().rss
        except psutil.Error:  # gone meanwhile
            pass
    return total / MB


def tree_rss(proc: psutil.Process) -> float:
    return memory([proc, *proc.children(recursive=True)])


def timed_ms(action, n: int) -> list[float]:
    """n timings of action in ms, after one call not counted
    (lazy imports, git discovery, caches)."""
    times = []
    for _ in range(n + 1):
        t0 = time.perf_counter()
        action()
        times.append((time.perf_counter() - t0) * 1000)
    return times[1:]


PY_CLASS, PY_METHOD = (
    'class Model{i}x{c}:\n    """A model with a few methods."""\n',
    """
    def method_{m}(self, value, *, scale={m}):
        total = value * scale
        for k in range(scale):
            total += k
        return total
""",
)
PY_FUNC = """
def handle_{i}_{m}(request, retries={m}):
    data = json.loads(request or '{{}}')
    if not data:
        return os.environ.get('FALLBACK')
    return {{k: v for k, v in data.items() if v}}
"""
JS_CLASS, JS_METHOD = (
    "export class Widget{i}x{c} {{\n  constructor(el) {{ this.el = el; }}\n",
    """
  render{m}(items, opts = {{}}) {{
    const rows = items.map(x => `<li>${{x}}</li>`);
    this.el.innerHTML = rows.join('');
    return rows.length + {m};
  }}
""",
)
JS_FUNC = """
export const load{i}x{m} = async (id, retries = {m}) => {{
  const res = await api.get(id);
  if (!res.ok) {{ throw new Error(res.statusText); }}
  return res.json();
}};
"""


def source(rng, i, py: bool) -> str:
    """A realistic module: 1-4 classes of 2-6 methods, 2-8 functions;
    one in ten has a big table (~1-20 KB)."""
    klass, method, func = (PY_CLASS, PY_METHOD, PY_FUNC) if py else (JS_CLASS, JS_METHOD, JS_FUNC)
    out = [
        f'"""Module {i}."""\nimport json\nimport os\n'
        if py
        else "import { api } from './api.js';\n"
    ]
    out += [f"\n{'#' if py else '//'} NEEDLE_{i}: the search target\n"] if i % 333 == 0 else []
    for c in range(rng.randint(1, 4)):
        out += [
            klass.format(i=i, c=c),
            *(method.format(m=m) for m in range(rng.randint(2, 6))),
            "" if py else "}\n",
        ]
    out += [func.format(i=i, m=m) for m in range(rng.randint(2, 8))]
    if rng.random() < 0.1:
        out += ["\nTABLE = [\n" if py else "\nexport const TABLE = [\n"]
        out += [
            f"    [{n}, 'e{n}', {rng.random():.6f}],\n" for n in range(rng.randint(200, 600))
        ] + ["]\n"]
    return "".join(out)


def make_project(root: Path, n: int = 1000) -> None:
    rng = random.Random(7)
    for i in range(n - 2):
        py = i % 5 < 3  # 60 % Python, 40 % JavaScript, in 40 folders
        path = (
            root
            / "src"
            / f"pkg{i % 8}"
            / f"sub{i % 5}"
            / (f"mod_{i}.py" if py else f"widget_{i}.js")
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source(rng, i, py))
    (root / "src" / "app").mkdir()
    (root / "src" / "app" / "settings.py").write_text("DEBUG = False\nVALUE = 0\n")
    (root / "src" / "app" / "counter.py").write_text("COUNTER = 0\n")
    (root / ".gitignore").write_text(".amas/\n")
    for cmd in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["commit", "-qm", "generated project"],
    ):
        subprocess.run(["git", *cmd], cwd=root, check=True, capture_output=True)


def home_config(text: str) -> None:
    (Path.home() / ".amas").mkdir(exist_ok=True)
    (Path.home() / ".amas" / "config.yaml").write_text(text)


# -- startup, REPL ---------------------------------------------------------------------------------
def bench_startup(proj, n):
    for flag in ("--version", "--help"):
        walls, rss = zip(*(run([*AMAS, flag], proj)[1:3] for _ in range(n)), strict=True)
        row(f"`amas {flag}` wall", walls, "s", "≤ 0.15 s", 0.15)
        row(f"`amas {flag}` peak RSS", rss, "MB", "≤ 30 MB", 30)
    bench_fail_fast(proj, n)


def bench_fail_fast(proj, n):
    """A one-shot whose model cannot work (here: no key) ends with its error
    before litellm loads."""
    keyless = {k: v for k, v in os.environ.items() if not k.startswith("AMAS_")}
    cmd = [*AMAS, "-m", "openai/gpt-4.1", "hello"]
    runs = [run(cmd, proj, keyless, code=1) for _ in range(n)]
    if "no API key for openai/gpt-4.1" not in runs[0][3]:
        raise RuntimeError(f"no fail-fast error:\n{runs[0][3][-2000:]}")
    walls, rss = [r[1] for r in runs], [r[2] for r in runs]
    row("one-shot with no key: error shown, wall", walls, "s", "report")
    row("one-shot with no key: peak RSS (litellm not loaded)", rss, "MB", "report")


def bench_repl(proj, n):
    env = {**os.environ, "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm", "NO_COLOR": "1"}
    # no first-use question
    subprocess.run([*AMAS, "--trust"], cwd=proj, env=env, capture_output=True)
    home_config("preload: false\n")
    ready, idle = zip(*(repl_idle(proj, env, preloads=False) for _ in range(n)), strict=True)
    row("REPL ready at `›` (preload off)", ready, "s", "≤ 0.35 s", 0.35)
    row("REPL RSS idle, tree (preload off)", idle, "MB", "≤ 50 MB", 50)
    home_config("preload: true\n")
    # a server of your own (the direct path: the openai SDK), then the same server through litellm
    for model, what, bar in (
        ("openai/test-model", "local model, openai SDK", 90),
        (LITELLM, "litellm", None),
    ):
        runs = [repl_idle(proj, {**env, "AMAS_MODEL": model}, preloads=True) for _ in range(n)]
        ready, idle, settled = zip(*runs, strict=True)
        row(f"REPL ready at `›` (preload on, {what})", ready, "s", "≤ 0.35 s", 0.35)
        bar_text = f"≤ {bar} MB" if bar else "report (off: ≤ 50 MB)"
        row(f"REPL RSS idle, tree (preload on, {what} loaded)", idle, "MB", bar_text, bar)
        row(f"REPL preload: {what} loaded after start", settled, "s")
    (Path.home() / ".amas" / "config.yaml").unlink()


def repl_idle(proj, env, preloads: bool) -> tuple:
    """One REPL start: seconds to its prompt, its tree's RSS once idle and, where it preloads, the
    seconds until the preload was done (RSS grown < 1 MB over 2 s, at most 15 s)."""
    t0 = time.perf_counter()
    child = spawn_repl(proj, env, 30)
    child.expect("›")
    ready = time.perf_counter() - t0
    proc = psutil.Process(child.pid)
    if not preloads:
        time.sleep(1.5)
        figures = (ready, tree_rss(proc))
    else:
        samples = [(time.perf_counter(), tree_rss(proc))]
        while samples[-1][0] - t0 < 15:
            time.sleep(0.25)
            samples.append((time.perf_counter(), tree_rss(proc)))
            old = [r for t, r in samples if t <= samples[-1][0] - 2]
            if old and samples[-1][1] - old[-1] < 1:
                break
        settled = next(t for t, r in samples if r >= samples[-1][1] - 1) - t0
        figures = (ready, samples[-1][1], settled)
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    return figures


# -- the one-shot ----------------------------------------------------------------------------------
# amas run in-process under a probe: RSS and the packages new since the last mark, at each stage
# (each tool call marked where Act runs it).
PROBE = r"""
import atexit, collections, json, os, sys
MARKS, SEEN, DONE = [], set(), set()
def rss():
    return {k: int(v.split()[0]) / 1024
            for k, _, v in (ln.partition(":") for ln in open("/proc/self/status"))
            if k in ("VmRSS", "VmHWM")}
def mark(label):
    if label in DONE:
        return
    DONE.add(label)
    mods = set(sys.modules)
    new = collections.Counter(".".join(m.split(".")[:2]) for m in mods - SEEN)
    SEEN.update(mods)
    MARKS.append((label, rss()["VmRSS"], len(mods), [f"{k} {v}" for k, v in new.most_common(6)]))
mark("interpreter")
from amas_code import direct, providers, tools
import amas_code.agent, amas_code.amas
mark("amas imported (cli, agent, tools)")
def after(owner, name, label):
    original = getattr(owner, name)
    def wrapped(*a, **k):
        result = original(*a, **k)
        mark(label)
        return result
    setattr(owner, name, wrapped)
after(providers, "load", "litellm imported")
after(direct, "load", "openai SDK's client imported (the direct path)")
after(providers.Model, "stream", "first reply read")
import amas_code.act
outcome = amas_code.act.Act.outcome
def run_tool(self, call):
    result = outcome(self, call)
    mark(f"tool {call.name} done")
    return result
amas_code.act.Act.outcome = run_tool
def report():
    mark("exit")
    loaded = {"tiktoken (module)": "tiktoken",
              "tiktoken cl100k encoding": "litellm.litellm_core_utils.default_encoding",
              "prompt_toolkit": "prompt_toolkit",
              "openai.resources (all of it)": "openai.resources.admin",
              "openai.types (all of it)": "openai.types.chat", "litellm": "litellm",
              "aiohttp": "aiohttp", "jinja2": "jinja2", "pygments": "pygments",
              "rich.live": "rich.live", "rich.markdown": "rich.markdown",
              "tree_sitter": "tree_sitter"}
    with open(os.environ["PROBE_OUT"], "w") as f:
        json.dump({"marks": MARKS, "peak": rss()["VmHWM"], "modules": len(sys.modules),
                   "loaded": {k: v in sys.modules for k, v in loaded.items()}}, f)
atexit.register(report)
sys.argv = ["amas", *sys.argv[1:]]
from amas_code.amas import main
main()
"""


def oneshot(proj, llm, calls, cmd, env=None):
    """One `amas -y "..."` through the scripted model (read, search, edit: the first `calls` of
    them); (start, wall, peak RSS, output); checks the tools ran, then puts the edited file back."""
    llm.arrivals.clear()
    edit = {
        "tool": "edit_file",
        "path": "src/app/settings.py",
        "old_str": "VALUE = 0",
        "new_str": "VALUE = 1",
    }
    for step in [
        {"tool": "read_file", "path": "src/app/settings.py"},
        {"tool": "search_files", "pattern": r"NEEDLE_\d+"},
        edit,
    ][:calls]:
        llm.reply(**step)
    llm.reply(text="Done.")
    settings = proj / "src/app/settings.py"
    before = settings.read_text()
    result = run([*cmd, "-y", "read settings, find the needles, bump VALUE"], proj, env)
    edited = settings.read_text() != before
    if len(llm.arrivals) != calls + 1 or edited != (calls == 3):
        raise RuntimeError(f"one-shot did not run its {calls} tools:\n{result[3][-2000:]}")
    settings.write_text(before)
    return result


def bench_oneshot(proj, n, llm, calls=3):
    walls, rss, first, last = [], [], [], []
    for _run in range(n):
        t0, wall, peak, _ = oneshot(proj, llm, calls, AMAS)
        walls.append(wall)
        rss.append(peak)
        first.append(llm.arrivals[0] - t0)
        last.append(t0 + wall - llm.arrivals[-1])
    row(f"one-shot, {calls} tool calls: wall", walls, "s")
    row(f"one-shot, {calls} tool calls: peak RSS", rss, "MB", "≤ 200 MB", 200)
    row("one-shot: process start → first request at server", first, "s")
    row("one-shot: last request → process exited", last, "s")
    # where it goes: the same one-shot under the probe, which marks the RSS at each stage
    out = Path(tempfile.mkdtemp()) / "probe.json"
    env = {**os.environ, "PROBE_OUT": str(out)}
    oneshot(proj, llm, calls, [sys.executable, "-c", PROBE], env)
    probe = json.loads(out.read_text())
    lines = [
        "| stage (first time reached) | RSS | modules | new packages (modules) |",
        "|---|---|---|---|",
    ]
    prev = 0.0
    for name, rss_now, count, new in probe["marks"]:
        growth = f"{rss_now:.1f} MB (+{rss_now - prev:.1f})"
        lines.append(f"| {name} | {growth} | {count} | {', '.join(new)} |")
        prev = rss_now
    loaded = ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in probe["loaded"].items())
    lines.append(f"\npeak {probe['peak']:.1f} MB, {probe['modules']} modules; loaded: {loaded}.")
    SECTIONS.append(("One-shot memory by stage (RSS of the amas process, a probed run)", lines))


# -- a one-shot to a local server, beside the peers (issue 53) -------------------------------------
TASK = "read README.md and tell me its first word"
# where each peer's venv keeps its command
# (python -m venv PEERS/NAME && PEERS/NAME/bin/pip install PACKAGE)
PEERS = {
    "llm": ("llm", "llm"),
    "mini": ("mini", "mini-swe-agent"),
    "aider": ("aider", "aider-chat"),
}
READ = "def read_file(path: str) -> str:\n    'Read a file.'\n    return open(path).read()\n"


def amas_run(model: str):
    def script(llm):
        llm.reply(tool="read_file", path="README.md").reply(text="Done.")

    return [*AMAS, "-y", TASK], {"AMAS_MODEL": model}, script, 2


def llm_run(bin_dir: Path, llm):
    """simonw's llm, the scripted server as an extra OpenAI model with tools,
    read_file a function."""
    user = Path.home() / "llm-user"
    user.mkdir(exist_ok=True)
    (user / "extra-openai-models.yaml").write_text(
        f"- model_id: bench-local\n  model_name: test-model\n  api_base: {llm.url}\n"
        "  supports_tools: true\n"
    )

    def script(server):
        server.reply(tool="read_file", path="README.md").reply(text="Done.")

    argv = [str(bin_dir / "llm"), "-m", "bench-local", "--functions", READ, TASK]
    return argv, {"LLM_USER_PATH": str(user)}, script, 2


def mini_run(bin_dir: Path, llm):
    """mini-swe-agent: its one tool (bash) reads the file, then the command that ends its task."""

    def script(server):
        server.reply("Reading.", tool="bash", command="cat README.md")
        server.reply("Done.", tool="bash", command="echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")

    config = ["-c", "mini.yaml", "-c", f"model.model_kwargs.api_base={llm.url}"]
    argv = [
        str(bin_dir / "mini"),
        "-m",
        "openai/test-model",
        "-t",
        TASK,
        "-y",
        "--exit-immediately",
    ]
    argv += ["--cost-limit", "0", "-o", str(Path.home() / "mini.traj.json"), *config]
    env = {
        "MSWEA_COST_TRACKING": "ignore_errors",
        "MSWEA_CONFIGURED": "true",
        "OPENAI_API_KEY": "sk-x",
    }
    return argv, env, script, 2


def aider_run(bin_dir: Path, llm):
    """Aider makes no tool calls: its unit is an edit, here the whole file,
    applied, and its answer."""

    def script(server):
        server.reply(text="README.md\n```\n# Demo\n```\nDone.")

    argv = [str(bin_dir / "aider"), "--model", "openai/test-model", "--openai-api-base", llm.url]
    argv += [
        "--openai-api-key",
        "sk-x",
        "--message",
        TASK,
        "--edit-format",
        "whole",
        "--yes-always",
    ]
    argv += ["--no-git", "--no-check-update", "--analytics-disable", "--no-show-model-warnings"]
    argv += ["--no-show-release-notes", "--no-auto-lint", "--no-pretty", "README.md"]
    return argv, {}, script, 1


def contenders(peers: Path | None, llm) -> dict:
    """Each agent's one-shot (argv, environment, what the server answers, requests it makes): amas
    on its direct path and through litellm, and the peers installed in `peers`."""
    found = {
        "amas (direct: openai SDK)": amas_run("openai/test-model"),
        "amas through litellm": amas_run(LITELLM),
    }
    makers = {"llm": llm_run, "mini": mini_run, "aider": aider_run}
    for name, (command, package) in PEERS.items():
        bin_dir = (peers / name / "bin") if peers else None
        if bin_dir and (bin_dir / command).exists():
            found[f"{package} {peer_version(bin_dir, package)}"] = makers[name](bin_dir, llm)
    return found


def peer_version(bin_dir: Path, package: str) -> str:
    code = f"import importlib.metadata as m; print(m.version({package!r}))"
    return subprocess.run(
        [str(bin_dir / "python"), "-c", code], capture_output=True, text=True
    ).stdout.strip()


def local_project(tmp: Path) -> Path:
    proj = tmp / "local"
    proj.mkdir()
    (proj / "README.md").write_text("# demo\n")
    for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "a small project"]):
        subprocess.run(["git", *cmd], cwd=proj, check=True, capture_output=True)
    return proj


def bench_local(tmp, n, llm, peers):
    """A one-shot with one tool call and its answer against a local server (the scripted one), amas
    and its peers interleaved run by run; then a local server that is not listening."""
    proj = local_project(tmp)
    runs = contenders(peers, llm)
    figures = defaultdict(lambda: defaultdict(list))
    for k in range(n):
        names = list(runs)
        for name in names[k % len(names) :] + names[: k % len(names)]:  # each goes first in turn
            argv, env, script, requests = runs[name]
            (proj / "README.md").write_text("# demo\n")
            llm.arrivals.clear()
            script(llm)
            t0, wall, peak, out = run(argv, proj, {**os.environ, **env})
            if len(llm.arrivals) != requests or "Traceback" in out:
                raise RuntimeError(f"{name} did not make its {requests} requests:\n{out[-2000:]}")
            for what, value in (
                ("cpu", LAST["cpu"]),
                ("peak", peak),
                ("first", llm.arrivals[0] - t0),
            ):
                figures[name][what].append(value)
            figures[name]["wall"].append(wall)
    local_rows(figures)
    bench_unreachable(proj, n)


def local_rows(figures) -> None:
    amas, litellm = figures["amas (direct: openai SDK)"], figures["amas through litellm"]
    row(
        "one-shot to a local server, 1 tool call: CPU (direct path)",
        amas["cpu"],
        "s",
        "≤ 1.0 s",
        1.0,
    )
    row(
        "one-shot to a local server, 1 tool call: peak RSS (direct path)",
        amas["peak"],
        "MB",
        "≤ 90 MB",
        90,
    )
    row(
        "one-shot to a local server: start → first request (direct path)",
        amas["first"],
        "s",
        "≤ 0.6 s calm",
        0.6,
    )
    row("one-shot, 1 tool call, through litellm: peak RSS", litellm["peak"], "MB", "≤ 200 MB", 200)
    lines = ["| agent | CPU | peak RSS | start → first request | wall |", "|---|---|---|---|---|"]
    for name, got in figures.items():
        cells = [spread(got["cpu"], "s"), spread(got["peak"], "MB"), spread(got["first"], "s")]
        lines.append(f"| {name} | {' | '.join(cells)} | {fmt(med(got['wall']), 's')} |")
    lines += [
        "",
        "CPU of the process and the children it waited for (wait4); "
        "peak RSS of its largest process.",
    ]
    SECTIONS.append(
        ("One-shot to a local server, one tool call and its answer, beside the peers", lines)
    )


def spread(values, unit) -> str:
    return f"{fmt(med(values), unit)} ({fmt(min(values), unit)}–{fmt(max(values), unit)})"


def bench_unreachable(proj, n):
    """A local api_base where nothing listens: said after one connect, before any model library."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    cmd = [*AMAS, "-m", "openai/local", "--api-base", dead, "hello"]
    runs, cpu = [], []
    for _ in range(n):
        runs.append(run(cmd, proj, code=1))
        cpu.append(LAST["cpu"])
    if f"cannot reach {dead}" not in runs[0][3]:
        raise RuntimeError(f"no fail-fast error:\n{runs[0][3][-2000:]}")
    row("local server not listening: error shown, CPU", cpu, "s", "≤ 0.3 s", 0.3)
    row("local server not listening: error shown, wall", [r[1] for r in runs], "s")


# -- file tools ------------------------------------------------------------------------------------
def toolbox(root, checkpoint=True):
    """Tools wired as the agent wires them (tests/conftest.py), edits accepted,
    the diffs they print silenced."""
    from conftest import toolbox as make

    from amas_code import ui

    ui.console.quiet = ui.out.quiet = True
    return make(root, checkpoint=checkpoint, auto_accept=True)


def bench_tools(proj, n):
    counter = iter(range(10**6))

    def edit(box):
        i = next(counter)
        args = {
            "path": "src/app/counter.py",
            "old_str": f"COUNTER = {i}",
            "new_str": f"COUNTER = {i + 1}",
        }
        result = box.execute("edit_file", json.dumps(args))
        if not result.startswith("Edit ") or (box.checkpoint and "checkpoint" not in result):
            raise RuntimeError(f"edit_file: {result[:500]}")

    def call(box, name, args):
        result = box.execute(name, json.dumps(args))
        if result.startswith(("Error", "No ")):
            raise RuntimeError(f"{name}: {result[:500]}")

    with_cp, without = toolbox(proj), toolbox(proj, checkpoint=False)
    runs = max(n, 5) * 2
    read = {"path": "src/pkg3/sub1/mod_11.py"}
    row(
        "tool read_file, in-process",
        timed_ms(lambda: call(with_cp, "read_file", read), runs),
        "ms",
        "≤ 20 ms",
        20,
    )
    row(
        "tool edit_file with its checkpoint, in-process",
        timed_ms(lambda: edit(with_cp), runs),
        "ms",
        "≤ 20 ms",
        20,
    )
    row(
        "tool list_files, in-process",
        timed_ms(lambda: call(with_cp, "list_files", {}), runs),
        "ms",
        "≤ 20 ms",
        20,
    )
    row(
        "tool edit_file, checkpoint off (for comparison)",
        timed_ms(lambda: edit(without), runs),
        "ms",
    )

    def command(box):
        call(box, "shell_command", {"command": f"echo {next(counter)} > out.txt"})

    # a file written each time: the box, the checkpoint before and after, the planted-file check
    row(
        "tool shell_command with its box and checkpoint, in-process",
        timed_ms(lambda: command(with_cp), runs),
        "ms",
    )
    (proj / "out.txt").unlink(missing_ok=True)


def bench_syntax(n):
    """The syntax check after an edit (issue 39): parsed before and after, the first error found."""
    from amas_code import repomap

    text, m = '"""A long module."""\nimport tempfile\n', 0
    while text.count("\n") < 1000:  # whole functions, up to 1,000 lines
        text += PY_FUNC.format(i=m // 8, m=m % 8 + 1)
        m += 1
    old = text.encode()
    new = old.replace(b"return {k: v", b"return {k: (v", 1)  # an edit that breaks it
    path = Path("big.py")
    if repomap.syntax_error(path, old, new) is None:
        raise RuntimeError("the broken edit was not found")
    row(
        "syntax check after an edit, a 1,000-line Python file (broken by it)",
        timed_ms(lambda: repomap.syntax_error(path, old, new), max(n, 5) * 4),
        "ms",
        "≤ 10 ms",
        10,
    )


# search_files as it could be: `git grep -l` names the files that match (honouring .gitignore, in
# parallel, in C), read as they come and stopped at the cap; the ignore list, the 2 MB and UTF-8
# rules, the line format and the cap stay today's, applied to those files only. One difference: git
# grep lists untracked files in path order among the tracked ones, where `git ls-files -co` (today's
# scan) lists them first; with no untracked file the output is equal.
def search_git(box, pattern: str, path: str = ".") -> str | None:
    """search_files' output through git grep; None where it must fall back to the Python scan (no
    git, a pattern git's PCRE rejects, `$`, which PCRE does not match before a CR as splitlines()
    does)."""
    from amas_code import project, tools

    regex, base = re.compile(pattern), box.tools.path(path)
    if not base.is_dir() or "$" in pattern:
        return None
    globs = [
        fnmatch.translate(p.strip("/")) for p in box.config["ignore"] if p.strip("/")[:1] not in "#"
    ]
    skip, hits, rest = re.compile("|".join(globs) or "(?!)"), [], b""
    git = [
        "git",
        "-c",
        "core.fsmonitor=false",
        "-c",
        "core.hooksPath=/dev/null",
        "grep",
        "-lzIP",
        "--untracked",
    ]
    grep = subprocess.Popen(
        [*git, "-e", pattern, "--", "."], cwd=base, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        while chunk := grep.stdout.read1(65536):
            *names, rest = (rest + chunk).split(b"\0")
            for rel in map(os.fsdecode, names):
                if any(skip.match(part) for part in rel.split("/")):
                    continue
                f = base / rel
                try:
                    text = f.read_text(encoding="utf-8") if f.stat().st_size < 2_000_000 else ""
                except (OSError, UnicodeDecodeError):
                    continue
                hits += [
                    f"{project.shown(box.tools.root, f)}:{n}: {line.strip()[:200]}"
                    for n, line in enumerate(text.splitlines(), 1)
                    if regex.search(line)
                ]
                if len(hits) > tools.MAX_LINES:
                    cap = f"\n[capped at {tools.MAX_LINES} matches; narrow the pattern or path]"
                    return finish(box, "\n".join(hits[: tools.MAX_LINES]) + cap)
    finally:
        grep.kill()
        grep.communicate()
    # PCRE rejected the pattern (before any output), or no git here
    if grep.returncode not in (
        0,
        1,
    ):
        return None
    return finish(box, "\n".join(hits) or f"No matches for {pattern!r}")


def finish(box, result: str) -> str:
    """What the agent does to every result: secrets redacted, then capped."""
    return box.act.said(result)


# NEEDLE_: 3 files of 1,000; none in --repo
PATTERNS = {
    "rare": r"NEEDLE_\d+",
    "common, capped at 300": r"return \w+",
}


def search_rows(root: Path, where: str, n: int) -> None:
    box = toolbox(root, checkpoint=False)
    for kind, pattern in PATTERNS.items():
        today = box.execute("search_files", json.dumps({"pattern": pattern}))
        same = "same output ✓" if search_git(box, pattern) == today else "OUTPUT DIFFERS ✗"
        scan, grep = [], []
        # interleaved, so load from elsewhere falls on both alike
        for _ in range(2 * n if n > 1 else 2):
            scan += timed_ms(
                lambda p=pattern: box.execute("search_files", json.dumps({"pattern": p})), 1
            )
            grep += timed_ms(lambda p=pattern: search_git(box, p), 1)
        row(
            f"search_files, {where}, {kind} pattern: Python scan (used outside git)",
            scan,
            "ms",
            "≤ 20 ms",
            20,
        )
        row(
            f"search_files, {where}, {kind} pattern: via `git grep -l` ({same})",
            grep,
            "ms",
            "≤ 20 ms",
            20,
        )


def bench_search(proj, n, repo):
    search_rows(proj, "1,000 files", n)
    if repo:
        files = subprocess.run(
            ["git", "ls-files"], cwd=repo, capture_output=True, text=True
        ).stdout.count("\n")
        search_rows(repo, f"{repo.name} ({files:,} files)", n)


def bench_checkpoints(n):
    """bench/checkpoints.py's rows (edits in 1,000 small files; shell commands among 10,000
    untracked), imported."""
    import checkpoints

    def show(metric, values, unit="ms", bar="report"):
        limit = re.match(r"≤ ([\d.]+) (ms|s)$", bar)
        limit = (
            float(limit[1]) * (1000 if unit == "ms" and limit[2] == "s" else 1) if limit else None
        )
        row(
            f"{metric} (bench/checkpoints.py)",
            [v * (1000 if unit == "ms" else 1) for v in values],
            unit,
            bar,
            limit,
        )

    checkpoints.show, home = show, os.environ["HOME"]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            checkpoints.bench_edit(Path(tmp), n)
            checkpoints.bench_shell(Path(tmp), n)
    finally:
        os.environ["HOME"] = home


def forget_map(proj: Path) -> None:
    """No map, no index: the next `amas init` starts from nothing (the index is in the home)."""
    from amas_code import repomap

    for f in (repomap.index(proj), proj / repomap.MAP, proj / repomap.OLD_CACHE):
        f.unlink(missing_ok=True)


def bench_init(proj, n):
    first, again = [], []
    for k in range(n):
        forget_map(proj)
        first.append(run([*AMAS, "init"], proj)[1])
        with open(proj / "src/pkg0/sub0/mod_0.py", "a") as touched:
            touched.write(f"\ndef touched_{k}():\n    return {k}\n")
        out = run([*AMAS, "init"], proj)
        again.append(out[1])
    row("`amas init`, 1,000 files, first run (no cache)", first, "s", "≤ 1.5 s", 1.5)
    row("`amas init`, incremental (1 file touched)", again, "s", "≤ 1.5 s", 1.5)


# -- scale: how init, the one-shot and the REPL grow with the project (issue 40) -------------------
SCALE = (1_000, 15_000, 60_000)
SCALE_ROWS = []  # (project, files, {column: values})


def scale_init(proj: Path, runs: int) -> dict[str, list]:
    """`amas init` from no index, then again after one file was touched (which alone is parsed
    again): wall and CPU time (with the parse workers': the figure a busy machine moves least)."""
    figures = defaultdict(list)
    for k in range(runs):
        forget_map(proj)
        figures["init"].append(run([*AMAS, "init"], proj)[1])
        figures["init CPU"].append(LAST["cpu"])
        touched = next(proj.glob("src/pkg0/sub0/mod_*.py"), None) or next(
            p for p in proj.rglob("*.c") if ".git" not in p.parts
        )
        with open(touched, "a") as f:
            f.write(f"\nint touched_{k};\n" if touched.suffix == ".c" else f"\nTOUCHED = {k}\n")
        out = run([*AMAS, "init"], proj)
        figures["incremental init"].append(out[1])
        figures["incremental init CPU"].append(LAST["cpu"])
    return figures


def scale_checkpoint(proj: Path, runs: int) -> dict[str, list]:
    """A shell command's checkpoint in the project (bench/checkpoints.py's recording around a
    one-file change, a fresh home each run): the first, which takes the baseline, and a later one;
    seconds."""
    import checkpoints

    from amas_code.checkpoint import Checkpoint

    figures = defaultdict(list)
    home = os.environ["HOME"]
    target = proj / "scratch.txt"
    try:
        for _ in range(runs):
            checkpoints.fresh_home(proj.parent)
            cp = Checkpoint(proj, checkpoints.IGNORE, "bench")
            for name, text in (("checkpoint first", "a\n"), ("checkpoint later", "b\n")):
                step = functools.partial(checkpoints.shell_change, cp, target, text)
                figures[name].append(checkpoints.timed(step))
            target.unlink()
    finally:
        os.environ["HOME"] = home
    return figures


def spawn_repl(proj: Path, env: dict, timeout: float):
    """amas's REPL in a 40x120 pseudo-terminal in proj."""
    size = (40, 120)
    cwd = str(proj)
    return pexpect.spawn(
        AMAS[0], AMAS[1:], cwd=cwd, env=env, encoding="utf-8", timeout=timeout, dimensions=size
    )


def repl_after_answer(proj: Path, llm) -> float:
    """RSS of the REPL's process tree once it has answered one message
    (litellm loaded, the map built)."""
    env = {**os.environ, "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm", "NO_COLOR": "1"}
    llm.reply(text="Answered.")
    child = spawn_repl(proj, env, 120)
    child.expect("›")
    child.sendline("where is the settings module?")
    child.expect("Answered.")
    child.expect("›")
    time.sleep(1)
    rss = tree_rss(psutil.Process(child.pid))
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    return rss


def scale_project(proj: Path, label: str, runs: int, llm) -> None:
    files = len(run(["git", "ls-files"], proj)[3].splitlines())
    print(f"  {label}: {files:,} files", flush=True)
    run([*AMAS, "--trust"], proj)  # no first-use question
    figures = scale_init(proj, runs)
    figures.update(scale_checkpoint(proj, runs))
    if (proj / "src/app/settings.py").exists():  # the bench's one-shot needs its files
        figures["one-shot peak"] = [oneshot(proj, llm, 3, AMAS)[2] for _ in range(runs)]
        figures["REPL after one answer"] = [repl_after_answer(proj, llm) for _ in range(runs)]
    SCALE_ROWS.append((label, files, figures))
    for name, values in figures.items():
        unit = "s" if "init" in name or "checkpoint" in name else "MB"
        print(f"    {name}: {fmt(med(values), unit)}", flush=True)


def bench_scale(n: int, llm, sizes: tuple, repo: Path | None) -> None:
    """Generated projects of each size (60,000 files: one run, minutes),
    and a real repository's work tree."""
    tmp = Path(tempfile.mkdtemp(prefix="amas-scale-"))
    try:
        for size in sizes:
            proj = tmp / f"scale{size}"
            proj.mkdir()
            print(f"  generating {size:,} files", flush=True)
            make_project(proj, size)
            scale_project(proj, f"generated, {size:,} files", n if size <= 15_000 else 1, llm)
            shutil.rmtree(proj, ignore_errors=True)
        if repo:
            # a `fetch` mirror is owner+name/repo
            name = repo.parent.name.replace("+", "/") if repo.name == "repo" else repo.name
            tree = tmp / name.replace("/", "+")
            scale_project(checkout(repo, tree), f"{name} (a real repository)", n, llm)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    SECTIONS.append(
        ("Scale: how init, the one-shot and the REPL grow with the project", scale_table())
    )


def checkout(repo: Path, tree: Path) -> Path:
    """A work tree of a repository, or of a bare git directory
    (the `fetch` tool's mirrors have none)."""
    tree.mkdir()
    git_dir = repo / ".git" if (repo / ".git").exists() else repo
    archive = subprocess.run(
        ["git", "--git-dir", str(git_dir), "archive", "HEAD"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    # what the bench's one-shot reads and edits
    (tree / "src/app").mkdir(parents=True, exist_ok=True)
    (tree / "src/app/settings.py").write_text("DEBUG = False\nVALUE = 0\n")
    for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "snapshot"]):
        subprocess.run(["git", *cmd], cwd=tree, check=True, capture_output=True)
    return tree


def scale_table() -> list[str]:
    base = next((figures for label, _, figures in SCALE_ROWS if "1,000 files" in label), None)
    lines = [
        "| project | files | `amas init`: wall / CPU | CPU × 1,000 files' "
        "| incremental init: wall / CPU | one-shot peak RSS | REPL RSS after one answer "
        "| a command's checkpoint |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, files, figures in SCALE_ROWS:
        cells = [label, f"{files:,}"]
        cells.append(f"{fmt(med(figures['init']), 's')} / {fmt(med(figures['init CPU']), 's')}")
        growth = med(figures["init CPU"]) / med(base["init CPU"]) if base else None
        cells.append(f"{growth:.1f}×" if growth else "–")
        again = (med(figures["incremental init"]), med(figures["incremental init CPU"]))
        cells.append(f"{fmt(again[0], 's')} / {fmt(again[1], 's')}")
        for name in ("one-shot peak", "REPL after one answer"):
            cells.append(fmt(med(figures[name]), "MB") if name in figures else "–")
        first, later = med(figures["checkpoint first"]), med(figures["checkpoint later"])
        cells.append(f"{fmt(first, 's')} first (baseline), {fmt(later, 's')} later")
        lines.append("| " + " | ".join(cells) + " |")
    runs = {label: len(figures["init"]) for label, _, figures in SCALE_ROWS}
    return lines + ["", "Runs per figure: " + ", ".join(f"{k} {v}" for k, v in runs.items()) + "."]


# -- the browser -----------------------------------------------------------------------------------
class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def kind(proc: psutil.Process) -> str:
    """What a process of the tree is: Playwright's node driver, Debian's launcher script, Chromium's
    browser process, or the --type (and utility sub-type) of one of its children."""
    try:
        cmd = proc.cmdline()
    except psutil.Error:
        return "gone"
    found = next((a.split("=", 1)[1] for a in cmd if a.startswith("--type=")), None)
    if found == "utility":
        sub = next((a.split("=", 1)[1] for a in cmd if a.startswith("--utility-sub-type=")), "")
        return f"utility ({sub.rsplit('.', 1)[-1]})"
    if found:
        return found
    if Path(cmd[0]).name == "node":
        return "Playwright driver (node)"
    return "launcher script (sh)" if Path(cmd[0]).name in ("sh", "bash", "dash") else "browser"


def others() -> list[psutil.Process]:
    """Chromium or Playwright processes on the machine outside this bench's tree: they share pages
    with ours, which lowers our PSS (each shared page is split among all its users)."""
    mine = {p.pid for p in psutil.Process().children(recursive=True)}
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        words = " ".join(p.info["cmdline"] or [])
        if p.info["pid"] not in mine and (
            "chromium" in words or "chrome-linux" in words or "run-driver" in words
        ):
            found.append(p)
    return found


def alone(limit: float = 60) -> bool:
    """Wait (at most limit s) until no other Chromium runs here; False if one still does."""
    end = time.monotonic() + limit
    while others():
        if time.monotonic() > end:
            return False
        time.sleep(0.5)
    return True


CONTENDED = []  # browser measurements made while another Chromium ran on the machine


def browser_tree(config, args, url, n, env=None):
    """PSS of the tree (n launches), time to launch and navigate, processes left, mean PSS by
    process kind, and the browser's command line; ARGS and the environment (NODE_OPTIONS reaches
    Playwright's driver) patched meanwhile."""
    from amas_code import browser as web

    saved, web.ARGS, before = web.ARGS, args, dict(os.environ)
    os.environ.update(env or {})
    pss, launch, left, by_kind, cmdline = [], [], [], {}, ""
    try:
        for _ in range(n):
            if not alone():
                CONTENDED.append(args)
            # as amas runs it: page navigations routed to its gate
            page = web.Browser(config, lambda url: None)
            try:
                t0 = time.perf_counter()
                text = page.navigate(url)
                launch.append(time.perf_counter() - t0)
                if text.startswith("Error") or "Bench page" not in text:
                    raise RuntimeError(text[:500])
                time.sleep(1)
                # Playwright's node driver and Chromium's processes
                kids = psutil.Process().children(recursive=True)
                pss.append(memory(kids, pss=True))
                if others():
                    CONTENDED.append(args)
                for p in kids:
                    by_kind.setdefault(kind(p), []).append(memory([p], pss=True) / n)
                cmdline = next(
                    (" ".join(p.cmdline()) for p in kids if kind(p) == "browser"), cmdline
                )
            finally:
                page.close()
            left.append(len(psutil.wait_procs(kids, timeout=10)[1]))
    finally:
        web.ARGS = saved
        os.environ.clear()
        os.environ.update(before)
    return pss, launch, left, {k: (len(v) / n, sum(v)) for k, v in by_kind.items()}, cmdline


def serve_page(www: Path) -> ThreadingHTTPServer:
    """A local page of 200 paragraphs with a cross-site iframe (localhost vs 127.0.0.1)."""
    www.mkdir(exist_ok=True)
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(www)))
    (www / "index.html").write_text(
        "<!doctype html><title>Bench page</title><h1>Benchmark</h1>"
        + "".join(
            f"<p>Paragraph {i} of plain text for the browser to render.</p>" for i in range(200)
        )
        + f'<iframe src="http://localhost:{server.server_port}/frame.html"></iframe>'
    )
    (www / "frame.html").write_text("<!doctype html><p>A frame from another site.</p>")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


MEMORY_FLAGS = (  # in amas's ARGS for memory's sake: each is taken out in turn
    "--renderer-process-limit=1",
    "--disable-gpu",
    "--disable-software-rasterizer",
    "--disable-dev-shm-usage",
    "--disable-extensions",
)
CANDIDATES = (  # not in ARGS: each is added in turn
    "--no-zygote",
    "--in-process-gpu",
    "--disable-site-isolation-trials",
    "--process-per-site",
    "--js-flags=--max-old-space-size=64",
    "--disable-features=Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider,"
    "AutofillServerCommunication,CertificateTransparencyComponentUpdater,"
    "InterestFeedContentSuggestions,SpareRendererForSitePerProcess,BackForwardCache,PaintHolding",
)
# NODE_OPTIONS for Playwright's driver (node refuses --optimize-for-size and --lite-mode there)
NODE = {
    "--max-semi-space-size=1": "smaller young generation",
    "--jitless": "no JIT code",
    "--max-semi-space-size=1 --jitless": "both",
}
PROPOSED = (
    ["--no-zygote", "--in-process-gpu"],
    {"NODE_OPTIONS": "--max-semi-space-size=1 --jitless"},
)


def bench_browser(www, n, flags=False):
    from conftest import make_config

    from amas_code import browser as web

    config, shell = make_config(), shutil.which("chromium-headless-shell")
    full = next(
        (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
    )
    default = web.find(config)
    if default is None:
        row("browser open: PSS of its process tree", None, "", "≤ 300 MB")
        return
    server = serve_page(www)
    url = f"http://127.0.0.1:{server.server_port}/"
    try:
        pss, launch, left, by_kind, cmdline = browser_tree(config, web.ARGS, url, n)
        label = "headless shell" if default == shell else Path(default).name
        row(f"browser: launch + first navigate ({label}, local page)", launch, "s")
        shared = ", another Chromium ran meanwhile: understated" if CONTENDED else ""
        row(
            f"browser open: PSS of its process tree ({label}, as amas launches it{shared})",
            pss,
            "MB",
            "≤ 300 MB",
            300,
        )
        row("browser: processes left after close()", left, "n", "0", 0)
        lines = [f"`{cmdline}`", "", "| process | count | PSS (mean) |", "|---|---|---|"]
        lines += [
            f"| {k} | {c:g} | {v:.1f} MB |"
            for k, (c, v) in sorted(by_kind.items(), key=lambda kv: -kv[1][1])
        ]
        SECTIONS.append((f"Browser tree by process, as amas launches it ({default})", lines))
        if not flags:
            return
        tries = [
            (f"{label}, without `{a}`", config, [x for x in web.ARGS if x != a], {})
            for a in MEMORY_FLAGS
            if a in web.ARGS
        ]
        tries += [
            (f"{label}, plus `{a}`", config, [*web.ARGS, a], {})
            for a in CANDIDATES
            if a not in web.ARGS
        ]
        tries += [
            (f"{label}, NODE_OPTIONS=`{o}` ({why})", config, web.ARGS, {"NODE_OPTIONS": o})
            for o, why in NODE.items()
        ]
        flags_env = f"plus `{' '.join(PROPOSED[0])}`, NODE_OPTIONS=`{PROPOSED[1]['NODE_OPTIONS']}`"
        tries.append((f"**{label}, {flags_env}**", config, [*web.ARGS, *PROPOSED[0]], PROPOSED[1]))
        if full and full != default:
            tries.insert(
                0,
                (
                    f"full Chromium ({full}), amas's ARGS",
                    make_config(browser_path=full),
                    web.ARGS,
                    {},
                ),
            )
        base, count = med(pss), sum(c for c, _ in by_kind.values())
        lines = [
            "| variant | PSS median (min–max) | vs as launched | processes | launch + navigate |"
        ]
        lines += ["|---|---|---|---|---|"]
        spread = f"{base:.1f} MB ({min(pss):.1f}–{max(pss):.1f})"
        lines.append(f"| {label}, amas's ARGS | {spread} | – | {count:g} | {med(launch):.2f} s |")
        for name, cfg, args, env in tries:
            got, took, _, kinds, _ = browser_tree(cfg, args, url, max(2, min(n, 3)), env)
            lines.append(
                f"| {name} | {med(got):.1f} MB ({min(got):.1f}–{max(got):.1f}) "
                f"| {med(got) - base:+.1f} MB | {sum(c for c, _ in kinds.values()):g} "
                f"| {med(took):.2f} s |"
            )
            print(f"  browser {name}: {med(got):.1f} MB", flush=True)
        if CONTENDED:
            lines.append(
                f"\n{len(CONTENDED)} measurements overlapped another Chromium on the machine: "
                "PSS understated."
            )
        title = (
            "Browser: what each choice costs "
            "(PSS of the tree, same page; one change at a time, then the proposal)"
        )
        SECTIONS.append((title, lines))
    finally:
        server.shutdown()
        server.server_close()


def bench_litellm(n):
    """Each model library's import alone, in a fresh `python -c`: litellm, the whole openai SDK, and
    the SDK's client as the direct path enters it (direct.load)."""
    timed = "import time; t = time.perf_counter(); {}; print(time.perf_counter() - t)"
    imports = {
        "litellm": "import litellm",
        "openai (the whole SDK)": "import openai",
        "openai's client as the direct path enters it": (
            "from amas_code import direct; direct.load()"
        ),
    }
    for what, code in imports.items():
        runs = [run([sys.executable, "-c", timed.format(code)], ROOT) for _ in range(n)]
        row(
            f"{what} alone: import time (fresh `python -c`)",
            [float(r[3].split()[-1]) for r in runs],
            "s",
        )
        row(f"{what} alone: peak RSS after import", [r[2] for r in runs], "MB")


STREAM = """
import resource, sys, time
from amas_code import providers
model = providers.Model({"model": sys.argv[2], "api_base": sys.argv[1], "api_key": "k"})
model.context = 32768
cpu = lambda: sum(resource.getrusage(resource.RUSAGE_SELF)[:2])  # noqa: E731 - threads included
model.complete([{"role": "user", "content": "warm up"}])
time.sleep(0.5)
began, wall = cpu(), time.perf_counter()
model.complete([{"role": "user", "content": "hi"}])
wall = time.perf_counter() - wall
time.sleep(0.5)  # what litellm left running in its threads after the reply is counted too
print(cpu() - began, wall)
"""


def bench_stream(n, llm):
    """A long streamed reply (2,000 chunks of 7 characters) through amas's model call, in a fresh
    process: the CPU it costs amas (chunk handling; litellm's logging threads on its path), on the
    direct path and through litellm."""
    for model, what in (("openai/bench", ""), ("custom_openai/bench", ", through litellm")):
        cpu, wall = [], []
        for _ in range(n):
            llm.reply("warm").reply("word " * 2800)
            out = run([sys.executable, "-c", STREAM, llm.url, model], ROOT)[3].split()[-2:]
            cpu.append(float(out[0]))
            wall.append(float(out[1]))
        row(f"a streamed reply of 2,000 chunks{what}: amas's CPU time", cpu, "s")
        row(f"a streamed reply of 2,000 chunks{what}: wall time", wall, "s")


# -- the report ------------------------------------------------------------------------------------
def machine() -> str:
    info = Path("/proc/cpuinfo").read_text()
    cpu = next(
        (ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")),
        "?",
    )
    ram = int(
        next(
            ln.split()[1]
            for ln in Path("/proc/meminfo").read_text().splitlines()
            if ln.startswith("MemTotal")
        )
    )
    release = Path("/etc/os-release").read_text().splitlines()
    osname = next(
        (ln.split("=", 1)[1].strip('"') for ln in release if ln.startswith("PRETTY_NAME")),
        platform.system(),
    )
    return (
        f"Machine: {cpu}, {os.cpu_count()} cores, {ram / 1024 / 1024:.1f} GB RAM; {osname} "
        f"(Linux {platform.release()}, {platform.machine()}); Python {platform.python_version()}; "
        f"{datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}"
    )


def table(n, load) -> str:
    how = (
        "`amas` console script"
        if AMAS == ["amas"]
        else f"`{Path(AMAS[0]).name} -m amas_code` (no `amas` on PATH)"
    )
    lines = [
        machine(),
        f"Load average (1 min) at start / end: {load:.2f} / {os.getloadavg()[0]:.2f} "
        "(other work on the machine skews the timings; memory figures hold)"
        + (
            f"; waited {CALM['waited']:.0f} s in all for an idle CPU before steps, "
            f"gave up {CALM['gave up']} times."
            if CALM["waited"]
            else "."
        ),
        "",
        f"Median of {n} runs; amas run as {how} with its bytecode cached (as after an install); "
        "peak RSS from wait4 (that process only), "
        "REPL RSS summed over its process tree via psutil, "
        "browser PSS over Playwright's driver and Chromium's processes; "
        "file tools in-process via `Agent.execute` (first call not counted).",
        "",
        "| metric | median | min | max | SPEC bar |",
        "|---|---|---|---|---|",
    ]
    for metric, values, unit, bar, limit in ROWS:
        if not values:
            lines.append(f"| {metric} | n/a (no Chromium) | – | – | {bar} |")
            continue
        mark = "" if limit is None else (" ✓" if med(values) <= limit else " ✗ missed")
        lines.append(
            f"| {metric} | {fmt(med(values), unit)} | {fmt(min(values), unit)} "
            f"| {fmt(max(values), unit)} | {bar}{mark} |"
        )
    for title, body in SECTIONS:
        lines += ["", f"### {title}", "", *body]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per figure (default 5)")
    parser.add_argument(
        "--only", nargs="+", choices=[s.__name__[6:] for s in STEPS], help="run only these steps"
    )
    parser.add_argument(
        "--tool-calls", type=int, default=3, choices=[1, 2, 3], help="tool calls in the one-shot"
    )
    parser.add_argument(
        "--repo", type=Path, help="a large git work tree to search as well (read only)"
    )
    parser.add_argument(
        "--scale",
        type=int,
        nargs="+",
        default=list(SCALE[:2]),
        metavar="FILES",
        help="project sizes for the scale step (default 1000 15000; 60000 takes minutes: one run)",
    )
    parser.add_argument(
        "--scale-repo",
        type=Path,
        help="a git repository (or bare git dir) whose HEAD the scale step maps as well",
    )
    parser.add_argument(
        "--no-flags", action="store_true", help="skip the browser flag variants (a minute or two)"
    )
    parser.add_argument(
        "--peers",
        type=Path,
        help="a folder of venvs llm/, mini/, aider/ with simonw's llm, mini-swe-agent and Aider "
        "installed: measured beside amas in the local one-shot",
    )
    parser.add_argument(
        "--calm",
        type=float,
        default=0,
        metavar="S",
        help="before each step, wait up to S s for an idle CPU",
    )
    args = parser.parse_args()
    n = args.runs
    tmp = Path(tempfile.mkdtemp(prefix="amas-bench-"))
    home, proj = tmp / "home", tmp / "proj"
    home.mkdir()
    proj.mkdir()
    for var in [
        v for v in os.environ if v.startswith("AMAS_") or v.endswith(("_API_KEY", "_API_BASE"))
    ]:
        del os.environ[var]
    # measured as installed: bytecode cached (~35 ms of start here)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    llm = TimedLLM()
    os.environ.update(
        HOME=str(home),
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        COLUMNS="100",
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        AMAS_MODEL="openai/test-model",
        AMAS_API_BASE=llm.url,
        AMAS_API_KEY="sk-bench-12345",
        GIT_AUTHOR_NAME="Bench",
        GIT_AUTHOR_EMAIL="bench@example.com",
        GIT_COMMITTER_NAME="Bench",
        GIT_COMMITTER_EMAIL="bench@example.com",
    )
    began, load = time.perf_counter(), os.getloadavg()[0]
    try:
        print(f"generating 1,000 files in {proj}", flush=True)
        make_project(proj)
        given = {
            bench_startup: (proj, n),
            bench_repl: (proj, n),
            bench_oneshot: (proj, n, llm, args.tool_calls),
            bench_local: (tmp, n, llm, args.peers.resolve() if args.peers else None),
            bench_tools: (proj, n),
            bench_syntax: (n,),
            bench_search: (proj, n, args.repo.resolve() if args.repo else None),
            bench_checkpoints: (n,),
            bench_init: (proj, n),
            bench_browser: (tmp / "www", n, not args.no_flags),
            bench_litellm: (n,),
            bench_stream: (n, llm),
            bench_scale: (
                n,
                llm,
                tuple(args.scale),
                args.scale_repo.resolve() if args.scale_repo else None,
            ),
        }
        for step in STEPS:
            if not args.only or step.__name__[6:] in args.only:
                calm(args.calm)
                print(f"{step.__name__.removeprefix('bench_')}…", flush=True)
                step(*given[step])
    finally:
        llm.close()
        shutil.rmtree(tmp, ignore_errors=True)
    out = table(n, load)
    # only a full, standard run replaces the recorded table
    if not args.only and args.tool_calls == 3:
        (ROOT / "bench" / "latest.md").write_text(out)
    print(f"\n{out}\n(total {time.perf_counter() - began:.0f} s)")


STEPS = [
    bench_startup,
    bench_repl,
    bench_oneshot,
    bench_local,
    bench_tools,
    bench_syntax,
    bench_search,
    bench_checkpoints,
    bench_init,
    bench_browser,
    bench_litellm,
    bench_stream,
    bench_scale,
]


if __name__ == "__main__":
    main()
