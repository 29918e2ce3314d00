"""The benchmark still measures amas as it is: its probes reach into amas (the agent's tool calls,
the model call), and a rename there broke them without a sound (bench/run.py's one-shot probe
patched a `Tools.execute` that no longer existed)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
# off the default run (2 minutes of one worker for a smoke test): `.ci/run` runs it with -m bench
pytestmark = pytest.mark.bench


def bench(script: str, *args: str) -> subprocess.CompletedProcess:
    """One of bench/'s scripts run as its README says, which must end well."""
    done = subprocess.run(
        [sys.executable, f"bench/{script}", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def test_the_benchmark_steps_that_reach_into_amas_run_and_report():
    done = bench("run.py", "--only", "oneshot", "tools", "search", "stream", "--runs", "1")
    rows = dict(re.findall(r"^\| (.+?) \| ([\d.]+ (?:s|ms|MB)) \|", done.stdout, re.M))
    assert float(rows["one-shot, 3 tool calls: peak RSS"].split()[0]) > 25  # a Python with amas
    assert "tool edit_file with its checkpoint, in-process" in rows
    assert "a streamed reply of 2,000 chunks: amas's CPU time" in rows
    assert any("same output ✓" in metric for metric in rows)


def test_the_sandbox_benchmark_reaches_into_the_box_as_it_is():
    """bench/sandbox.py cleared a cache that had moved from boxview to project, and stopped with
    an AttributeError before its first row of grants."""
    done = bench("sandbox.py", "--runs", "1")
    rows = dict(re.findall(r"^\| (.+?) \| ([\d.]+ ms) ", done.stdout, re.M))
    assert "`true` boxed" in rows and "the box's mounts, grant: the repository" in rows
