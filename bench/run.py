"""Amas Code benchmark (SPEC §8): `python bench/run.py [--runs N]`. Prints a markdown table, writes bench/latest.md.

Every figure is the median of N runs (min and max beside it) in a generated 1,000-file git project in a temp dir.
"""

import argparse
import datetime
import functools
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pexpect
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from llm_server import ScriptedLLM  # noqa: E402

MB = 1 << 20
AMAS = ["amas"] if shutil.which("amas") else [sys.executable, "-m", "amas_code"]
ROWS = []  # (metric, values or None, unit, bar text, limit or None)


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


def row(metric, values, unit, bar="report", limit=None):
    ROWS.append((metric, values, unit, bar, limit))
    print(f"  {metric}: {fmt(statistics.median(values), unit) if values else 'n/a'}", flush=True)


def fmt(v, unit):
    return {"s": f"{v:.3f} s", "ms": f"{v:.2f} ms", "MB": f"{v:.1f} MB"}.get(unit, f"{v:g}")


def run(cmd, cwd):
    """Run to the end; (start perf_counter, wall s, peak RSS MB of exactly this child from wait4, output)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.stdout.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
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


PY_CLASS, PY_METHOD = "class Model{i}x{c}:\n    \"\"\"A model with a few methods.\"\"\"\n", """
    def method_{m}(self, value, *, scale={m}):
        total = value * scale
        for k in range(scale):
            total += k
        return total
"""
PY_FUNC = """
def handle_{i}_{m}(request, retries={m}):
    data = json.loads(request or '{{}}')
    if not data:
        return os.environ.get('FALLBACK')
    return {{k: v for k, v in data.items() if v}}
"""
JS_CLASS, JS_METHOD = "export class Widget{i}x{c} {{\n  constructor(el) {{ this.el = el; }}\n", """
  render{m}(items, opts = {{}}) {{
    const rows = items.map(x => `<li>${{x}}</li>`);
    this.el.innerHTML = rows.join('');
    return rows.length + {m};
  }}
"""
JS_FUNC = """
export const load{i}x{m} = async (id, retries = {m}) => {{
  const res = await api.get(id);
  if (!res.ok) {{ throw new Error(res.statusText); }}
  return res.json();
}};
"""


def source(rng, i, py: bool) -> str:
    """A realistic module: 1-4 classes of 2-6 methods, 2-8 functions; one in ten has a big table (~1-20 KB)."""
    klass, method, func = (PY_CLASS, PY_METHOD, PY_FUNC) if py else (JS_CLASS, JS_METHOD, JS_FUNC)
    out = [f'"""Module {i}."""\nimport json\nimport os\n' if py else "import { api } from './api.js';\n"]
    out += [f"\n{'#' if py else '//'} NEEDLE_{i}: the search target\n"] if i % 333 == 0 else []
    for c in range(rng.randint(1, 4)):
        out += [klass.format(i=i, c=c), *(method.format(m=m) for m in range(rng.randint(2, 6))), "" if py else "}\n"]
    out += [func.format(i=i, m=m) for m in range(rng.randint(2, 8))]
    if rng.random() < 0.1:
        out += ["\nTABLE = [\n" if py else "\nexport const TABLE = [\n"]
        out += [f"    [{n}, 'e{n}', {rng.random():.6f}],\n" for n in range(rng.randint(200, 600))] + ["]\n"]
    return "".join(out)


def make_project(root: Path, n: int = 1000) -> None:
    rng = random.Random(7)
    for i in range(n - 2):
        py = i % 5 < 3  # 60 % Python, 40 % JavaScript, in 40 folders
        path = root / "src" / f"pkg{i % 8}" / f"sub{i % 5}" / (f"mod_{i}.py" if py else f"widget_{i}.js")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source(rng, i, py))
    (root / "src" / "app").mkdir()
    (root / "src" / "app" / "settings.py").write_text("DEBUG = False\nVALUE = 0\n")
    (root / "src" / "app" / "counter.py").write_text("COUNTER = 0\n")
    (root / ".gitignore").write_text(".amas/\n")
    for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "generated project"]):
        subprocess.run(["git", *cmd], cwd=root, check=True, capture_output=True)


def bench_startup(proj, n):
    for flag in ("--version", "--help"):
        walls, rss = zip(*(run([*AMAS, flag], proj)[1:3] for _ in range(n)), strict=True)
        row(f"`amas {flag}` wall", walls, "s", "≤ 0.15 s", 0.15)
        row(f"`amas {flag}` peak RSS", rss, "MB", "≤ 30 MB", 30)


def bench_repl(proj, n):
    env = {**os.environ, "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm", "NO_COLOR": "1"}
    for preload in (False, True):
        (proj / ".amas").mkdir(exist_ok=True)
        (proj / ".amas" / "config.yaml").write_text(f"preload: {str(preload).lower()}\n")
        ready, idle, settled = [], [], []
        for _ in range(n):
            t0 = time.perf_counter()
            child = pexpect.spawn(AMAS[0], AMAS[1:], cwd=str(proj), env=env, encoding="utf-8", timeout=30,
                                  dimensions=(40, 120))
            child.expect("›")
            ready.append(time.perf_counter() - t0)
            proc = psutil.Process(child.pid)
            if not preload:
                time.sleep(1.5)
                idle.append(tree_rss(proc))
            else:  # until RSS has grown < 1 MB over 2 s (the background litellm import done), at most 15 s
                samples = [(time.perf_counter(), tree_rss(proc))]
                while samples[-1][0] - t0 < 15:
                    time.sleep(0.25)
                    samples.append((time.perf_counter(), tree_rss(proc)))
                    old = [r for t, r in samples if t <= samples[-1][0] - 2]
                    if old and samples[-1][1] - old[-1] < 1:
                        break
                idle.append(samples[-1][1])
                settled.append(next(t for t, r in samples if r >= samples[-1][1] - 1) - t0)
            child.sendeof()
            child.expect(pexpect.EOF)
            child.close()
        mode = "preload on" if preload else "preload off"
        row(f"REPL ready at `›` ({mode})", ready, "s", "≤ 0.35 s", 0.35)
        if preload:
            row("REPL RSS idle, tree (preload on, litellm loaded)", idle, "MB", "report (off: ≤ 50 MB)")
            row("REPL preload: litellm loaded after start", settled, "s")
        else:
            row("REPL RSS idle, tree (preload off)", idle, "MB", "≤ 50 MB", 50)
    (proj / ".amas" / "config.yaml").unlink()


def bench_oneshot(proj, n, llm, calls=3):
    walls, rss, first, last = [], [], [], []
    for k in range(n):
        llm.arrivals.clear()
        script = [{"tool": "read_file", "path": "src/app/settings.py"},
                  {"tool": "search_files", "pattern": r"NEEDLE_\d+"},
                  {"tool": "edit_file", "path": "src/app/settings.py", "old_str": f"VALUE = {k}",
                   "new_str": f"VALUE = {k + 1}"}][:calls]
        for step in script:
            llm.reply(**step)
        llm.reply(text="Done.")
        before = (proj / "src/app/settings.py").read_text()
        t0, wall, peak, out = run([*AMAS, "-y", "read settings, find the needles, bump VALUE"], proj)
        edited = (proj / "src/app/settings.py").read_text() != before
        if len(llm.arrivals) != calls + 1 or edited != (calls == 3):
            raise RuntimeError(f"one-shot did not run its {calls} tools:\n{out[-2000:]}")
        if edited:
            (proj / "src/app/settings.py").write_text(before.replace(f"VALUE = {k}", f"VALUE = {k + 1}"))
        walls.append(wall)
        rss.append(peak)
        first.append(llm.arrivals[0] - t0)
        last.append(t0 + wall - llm.arrivals[-1])
    row(f"one-shot, {calls} tool calls: wall", walls, "s")
    row(f"one-shot, {calls} tool calls: peak RSS", rss, "MB", "≤ 150 MB", 150)
    row("one-shot: process start → first request at server", first, "s")
    row("one-shot: last request → process exited", last, "s")


def bench_tools(proj, n):
    from amas_code import config as config_file
    from amas_code import tools, ui
    from amas_code.checkpoint import Checkpoint

    ui.console.quiet = ui.err_console.quiet = True  # the diffs edit_file shows
    config, _ = config_file.load(proj, {"auto_accept": True})
    checkpoint, k = Checkpoint(proj, ignore=config["ignore"]), iter(range(10**6))

    def edit():
        return {"path": "src/app/counter.py", "old_str": f"COUNTER = {(i := next(k))}", "new_str": f"COUNTER = {i + 1}"}

    for label, name, args, cp in (("", "read_file", lambda: {"path": "src/pkg3/sub1/mod_11.py"}, checkpoint),
                                  (" (with its git checkpoint commit)", "edit_file", edit, checkpoint),
                                  ("", "search_files", lambda: {"pattern": r"NEEDLE_\d+"}, checkpoint),
                                  ("", "list_files", lambda: {}, checkpoint),
                                  (" (checkpoint off, for comparison)", "edit_file", edit, None)):
        tools.setup(proj, config, cp)
        times = []
        for _ in range(n + 1):  # the first call (warm-up: lazy imports, git discovery) is not counted
            a = args()
            t0 = time.perf_counter()
            result = tools.execute(name, a)
            times.append((time.perf_counter() - t0) * 1000)
            if result.startswith(("Error", "No ")):
                raise RuntimeError(f"{name}: {result[:500]}")
        row(f"tool {name}{label}, in-process", times[1:], "ms", "≤ 20 ms", 20)
    tools.close()


def bench_init(proj, n):
    first, again = [], []
    for k in range(n):
        for f in ("map_cache.json", "project_map.md"):
            (proj / ".amas" / f).unlink(missing_ok=True)
        first.append(run([*AMAS, "init"], proj)[1])
        with open(proj / "src/pkg0/sub0/mod_0.py", "a") as touched:
            touched.write(f"\ndef touched_{k}():\n    return {k}\n")
        out = run([*AMAS, "init"], proj)
        if "1 reparsed" not in out[3]:
            raise RuntimeError(f"incremental init reparsed more than the touched file:\n{out[3]}")
        again.append(out[1])
    row("`amas init`, 1,000 files, first run (no cache)", first, "s", "≤ 1.5 s", 1.5)
    row("`amas init`, incremental (1 file touched)", again, "s", "≤ 1.5 s", 1.5)


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def bench_browser(www, n):
    from amas_code.browser import Browser

    www.mkdir()
    (www / "index.html").write_text("<!doctype html><title>Bench page</title><h1>Benchmark</h1>" + "".join(
        f"<p>Paragraph {i} of plain text for the browser to render.</p>" for i in range(200)))
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(www)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    launch, pss, left, browser = [], [], [], Browser({})
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            text = browser.navigate(f"http://127.0.0.1:{server.server_port}/")
            launch.append(time.perf_counter() - t0)
            if text.startswith("Error"):
                if "no Chromium" not in text:
                    raise RuntimeError(text)
                row("browser: launch + first navigate", None, "")
                return row("browser open: PSS of its process tree", None, "", "≤ 300 MB")
            if "Bench page" not in text or "Paragraph 0 " not in browser.get_text():
                raise RuntimeError("browser page text missing")
            time.sleep(1)
            kids = psutil.Process().children(recursive=True)  # Playwright's node driver and Chromium's processes
            pss.append(memory(kids, pss=True))
            browser.close()
            left.append(len(psutil.wait_procs(kids, timeout=10)[1]))
    finally:
        browser.close()
        server.shutdown()
        server.server_close()
    row("browser: launch + first navigate (local page)", launch, "s")
    row(f"browser open: PSS of its process tree ({len(kids)} processes)", pss, "MB", "≤ 300 MB", 300)
    row("browser: processes left after close()", left, "n", "0", 0)


def bench_litellm(n):
    code = "import time; t = time.perf_counter(); import litellm; print(time.perf_counter() - t)"
    runs = [run([sys.executable, "-c", code], ROOT) for _ in range(n)]
    row("litellm alone: import time (fresh `python -c`)", [float(r[3].split()[-1]) for r in runs], "s")
    row("litellm alone: peak RSS after import", [r[2] for r in runs], "MB")


def machine() -> str:
    info = Path("/proc/cpuinfo").read_text()
    cpu = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), "?")
    ram = int(next(ln.split()[1] for ln in Path("/proc/meminfo").read_text().splitlines() if ln.startswith("MemTotal")))
    osname = next((ln.split("=", 1)[1].strip('"') for ln in Path("/etc/os-release").read_text().splitlines()
                   if ln.startswith("PRETTY_NAME")), platform.system())
    return (f"Machine: {cpu}, {os.cpu_count()} cores, {ram / 1024 / 1024:.1f} GB RAM; {osname} "
            f"(Linux {platform.release()}, {platform.machine()}); Python {platform.python_version()}; "
            f"{datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}")


def table(n, load) -> str:
    how = "`amas` console script" if AMAS == ["amas"] else f"`{Path(AMAS[0]).name} -m amas_code` (no `amas` on PATH)"
    lines = [machine(), f"Load average (1 min) at start / end: {load:.2f} / {os.getloadavg()[0]:.2f} "
             "(other work on the machine skews the figures).", "",
             f"Median of {n} runs; amas run as {how}; peak RSS from wait4 (that process only), REPL RSS "
             "summed over its process tree via psutil; file tools in-process via `tools.execute`.", "",
             "| metric | median | min | max | SPEC bar |", "|---|---|---|---|---|"]
    for metric, values, unit, bar, limit in ROWS:
        if not values:
            lines.append(f"| {metric} | n/a (no chromium) | – | – | {bar} |")
            continue
        med = statistics.median(values)
        mark = "" if limit is None else (" ✓" if med <= limit else " ✗ missed")
        lines.append(f"| {metric} | {fmt(med, unit)} | {fmt(min(values), unit)} | {fmt(max(values), unit)} "
                     f"| {bar}{mark} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per figure (default 5)")
    parser.add_argument("--only", nargs="+", choices=[s.__name__[6:] for s in STEPS], help="run only these")
    parser.add_argument("--tool-calls", type=int, default=3, choices=[1, 2, 3], help="tool calls in the one-shot")
    args = parser.parse_args()
    n = args.runs
    tmp = Path(tempfile.mkdtemp(prefix="amas-bench-"))
    home, proj = tmp / "home", tmp / "proj"
    home.mkdir()
    proj.mkdir()
    for var in [v for v in os.environ if v.startswith("AMAS_") or v.endswith(("_API_KEY", "_API_BASE"))]:
        del os.environ[var]
    llm = TimedLLM()
    os.environ.update(HOME=str(home), LITELLM_LOCAL_MODEL_COST_MAP="True", COLUMNS="100",
                      PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
                      AMAS_MODEL="openai/test-model", AMAS_API_BASE=llm.url, AMAS_API_KEY="sk-bench-12345",
                      GIT_AUTHOR_NAME="Bench", GIT_AUTHOR_EMAIL="bench@example.com",
                      GIT_COMMITTER_NAME="Bench", GIT_COMMITTER_EMAIL="bench@example.com")
    began, load = time.perf_counter(), os.getloadavg()[0]
    try:
        print(f"generating 1,000 files in {proj}", flush=True)
        make_project(proj)
        given = {bench_startup: (proj, n), bench_repl: (proj, n), bench_oneshot: (proj, n, llm, args.tool_calls),
                 bench_tools: (proj, n), bench_init: (proj, n), bench_browser: (tmp / "www", n), bench_litellm: (n,)}
        for step in STEPS:
            if not args.only or step.__name__[6:] in args.only:
                print(f"{step.__name__.removeprefix('bench_')}…", flush=True)
                step(*given[step])
    finally:
        llm.close()
        shutil.rmtree(tmp, ignore_errors=True)
    out = table(n, load)
    if not args.only and args.tool_calls == 3:  # only a full, standard run replaces the recorded table
        (ROOT / "bench" / "latest.md").write_text(out)
    print(f"\n{out}\n(total {time.perf_counter() - began:.0f} s)")


STEPS = [bench_startup, bench_repl, bench_oneshot, bench_tools, bench_init, bench_browser, bench_litellm]


if __name__ == "__main__":
    main()
