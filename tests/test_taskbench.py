"""The task bench's own logic (bench/taskbench.py, taskset.py), with the scripted server.

Off the default run (marked bench: `.ci/run` runs it with -m bench): the model is its parts in
order, checked by size and made once; the checks judge each task right both ways (the project as
given fails, a reference fix passes); a run through the recording proxy reports what happened:
solved or not and why, the requests and prompt tokens the server saw, amas's exit code and JSON
result; a run past its limit is stopped, with what it started, and a server left busy is restarted.
"""

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import taskbench  # noqa: E402
import taskset  # noqa: E402

pytestmark = pytest.mark.bench  # off the default run: `.ci/run` runs it with -m bench
CELSIUS = 'def celsius_to_fahrenheit(c):\n    """Celsius to Fahrenheit."""\n'
CELSIUS += "    return c * 9 / 5 + 32\n\n\n"
CELSIUS_TEST = "def test_celsius_to_fahrenheit():\n    assert celsius_to_fahrenheit(100) == 212\n"
FIXES = {  # a reference fix per task: (path, old text, new text), in order
    "failing-test": [("stats.py", "len(values)\n", "len(values) if values else 0.0\n")],
    "run-tests": [("textutil.py", '"-".join(words)', '"-".join(words).lower()')],
    "new-param": [
        (
            "report.py",
            "def format_row(name, amount):",
            'def format_row(name, amount, currency=""):',
        ),
        ("report.py", "{name}: {amount:.2f}", "{name}: {currency}{amount:.2f}"),
    ],
    "rename": [("users.py", "get_usr", "get_user"), ("app.py", "get_usr", "get_user")],
    "unnamed-file": [("pricing.py", "price - percent / 100", "price - price * percent / 100")],
    "readme-convention": [
        ("convert.py", "CONVERTERS = {", CELSIUS + "CONVERTERS = {"),
        (
            "convert.py",
            "CONVERTERS = {",
            'CONVERTERS = {\n    "celsius_to_fahrenheit": celsius_to_fahrenheit,',
        ),
        ("test_convert.py", "from convert import", "from convert import celsius_to_fahrenheit,"),
        ("test_convert.py", "\n\n\nclass", "\n\n\n" + CELSIUS_TEST + "\n\nclass"),
    ],
}


def apply(repo: Path, fix: list) -> None:
    for path, old, new in fix:
        text = (repo / path).read_text()
        assert old in text
        (repo / path).write_text(text.replace(old, new))


@pytest.mark.parametrize("task", taskset.TASKS, ids=lambda t: t.name)
def test_each_check_fails_the_project_as_given_and_passes_a_real_fix(task, tmp_path):
    repo = tmp_path / "repo"
    taskset.make_repo(task, repo)
    assert len("".join(task.files.values()).splitlines()) < 60
    assert task.check(task, repo), "the task is solved before anyone worked on it"
    apply(repo, FIXES[task.name])
    assert task.check(task, repo) == []


def test_editing_the_test_instead_of_the_code_does_not_solve_it(tmp_path):
    task = taskset.TASKS[0]
    repo = tmp_path / "repo"
    taskset.make_repo(task, repo)
    apply(repo, [("test_stats.py", "self.assertEqual(mean([]), 0.0)", "pass")])
    assert "test_stats.py was changed" in task.check(task, repo)


@pytest.fixture
def bench(llm, tmp_path, home):
    recorder = taskbench.Recorder(llm.url)
    yield {
        "out": tmp_path,
        "recorder": recorder,
        "upstream": llm.url,
        "limit": 60,
        "peers": tmp_path,
    }
    recorder.close()


def test_a_run_that_solves_its_task_is_reported_with_the_servers_counts(llm, bench):
    task = taskset.TASKS[0]
    _, old, new = FIXES[task.name][0]
    llm.reply(tool="edit_file", path="stats.py", old_str=old, new_str=new).reply("Fixed.")
    row = taskbench.run_task("amas", task, bench)
    assert (row["solved"], row["wrong"], row["exit"]) == (True, [], 0)
    assert (row["requests"], row["prompt"], row["first"]) == (2, 20, 10)
    assert row["amas"]["num_model_calls"] == 2
    assert row["amas"]["tool_calls"] == [
        {"name": "edit_file", "target": "stats.py", "status": "ok"}
    ]
    sent = [json.loads(line) for line in open(Path(row["dir"]) / "exchanges.jsonl")]
    chats = taskbench.chats(sent)
    assert chats[0]["request"]["messages"][-1]["content"].startswith(task.prompt)
    assert '"edit_file"' in chats[0]["answer"]
    assert "| failing-test | amas | ✓ |" in taskbench.table([row])


def test_a_run_that_changes_nothing_is_not_solved_and_says_why(llm, bench):
    task = taskset.TASKS[1]
    llm.reply("The tests pass, nothing to do.")
    row = taskbench.run_task("amas", task, bench)
    assert row["solved"] is False
    assert row["wrong"] == ["the project's tests fail (FAILED (failures=2))"]
    assert "| run-tests | amas | ✗ |" in taskbench.table([row])
    assert "| amas | 0/1 |" in taskbench.table([row])


def test_a_run_past_its_limit_is_stopped_there(llm, bench):
    bench["limit"] = 20  # time enough to start the command on a loaded machine
    llm.reply(tool="shell_command", command="touch started && sleep 313").reply("done")
    row = taskbench.run_task("amas", taskset.TASKS[3], bench)
    assert row["exit"] == "timeout"
    assert 20 <= row["wall"] < 45
    assert (Path(row["dir"]) / "repo" / "started").exists()
    assert len(llm.requests) == 1  # stopped inside the command, before its result went back


def test_what_a_run_started_is_killed_with_it(tmp_path):
    """A peer's shell command is not boxed as amas's are: the whole process group goes."""
    argv = ["sh", "-c", "sleep 313 & echo started; exec sleep 314"]
    (tmp_path / "repo").mkdir()
    code, wall = taskbench.run_bounded(argv, dict(os.environ), tmp_path, 2)
    assert (code, (tmp_path / "agent.out").read_text()) == ("timeout", "started\n")
    assert 2 <= wall < 15
    sleeping = [(p.info["cmdline"] or [])[-2:] for p in psutil.process_iter(["cmdline"])]
    assert ["sleep", "313"] not in sleeping


def test_token_counts_are_read_from_llama_servers_timings_else_usage():
    timings = {"prompt_n": 12, "cache_n": 1500, "predicted_n": 40}
    streamed = f'data: {{"choices": []}}\n\ndata: {json.dumps({"timings": timings})}\n'
    assert taskbench.counts({"answer": streamed}) == {
        "prompt": 1512,
        "evaluated": 12,
        "completion": 40,
    }
    plain = json.dumps({"usage": {"prompt_tokens": 7, "completion_tokens": 3}})
    assert taskbench.counts({"answer": plain}) == {"prompt": 7, "evaluated": 7, "completion": 3}
    assert taskbench.counts({"answer": "(relay stopped: reset)"})["prompt"] == 0


def test_a_peer_that_is_not_installed_is_skipped(tmp_path):
    assert taskbench.installed("amas", tmp_path)
    assert not taskbench.installed("aider", tmp_path)
    (tmp_path / "aider" / "bin").mkdir(parents=True)
    (tmp_path / "aider" / "bin" / "aider").write_text("#!/bin/sh\n")
    (tmp_path / "aider" / "bin" / "aider").chmod(0o755)
    assert taskbench.installed("aider", tmp_path)


class Busy(BaseHTTPRequestHandler):
    """A model server whose one slot stays busy (GET /slots), as llama-server with an unstreamed
    request whose client has gone."""

    def do_GET(self):
        body = json.dumps([{"id": 0, "is_processing": True}]).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Restartable:
    restarts = 0

    def restart(self):
        self.restarts += 1


@pytest.fixture
def busy_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Busy)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()
    server.server_close()


def test_a_server_still_busy_after_a_run_is_restarted_when_the_bench_started_it(
    busy_server, monkeypatch
):
    monkeypatch.setattr(taskbench, "SETTLE", 1)
    recorder = taskbench.Recorder(busy_server)
    bench = {"recorder": recorder, "upstream": busy_server, "limit": 2, "server": Restartable()}
    try:
        assert taskbench.settle(bench) == "server restarted: its last request ran on"
        assert bench["server"].restarts == 1
        bench["server"] = None  # given with --api-base: waited for, up to the run's limit
        assert taskbench.settle(bench) == "server busy after the run: waited"
    finally:
        recorder.close()


def fake_wheel(folder: Path, number: int, data: bytes) -> Path:
    """A wheel as the model's parts ship: one slice as <package>/data/partNN.bin."""
    import zipfile

    wheel = folder / f"part{number}-0.2.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(f"part{number}/data/part{number:02d}.bin", data)
        archive.writestr(f"part{number}-0.2.0.dist-info/METADATA", "Name: part\n")
    return wheel


def test_the_model_is_its_parts_in_order_checked_by_size_and_made_once(tmp_path, monkeypatch):
    import realmodel

    fetched = []

    def download(package, version, into):
        fetched.append((package, version))
        number = int(package.rsplit("part", 1)[1])
        return fake_wheel(into, number, bytes([number]) * number)

    monkeypatch.setattr(realmodel, "download", download)
    model = realmodel.Gguf("m.gguf", "demo-part{}", 3, "0.2.0", 6)
    gguf = realmodel.assemble(model, tmp_path)
    assert gguf.read_bytes() == b"\x01\x02\x02\x03\x03\x03"
    assert fetched == [("demo-part1", "0.2.0"), ("demo-part2", "0.2.0"), ("demo-part3", "0.2.0")]
    assert realmodel.assemble(model, tmp_path) == gguf and len(fetched) == 3  # kept: no download
    wrong = realmodel.Gguf("w.gguf", "demo-part{}", 3, "0.2.0", 7)
    with pytest.raises(realmodel.Failed, match=r"^w.gguf: the parts make 6 bytes, not 7$"):
        realmodel.assemble(wrong, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.gguf"]  # nothing half made left
