"""What the box costs per shell command (SPEC §8): `python bench/sandbox.py [--runs N]`.

Runs each command N times through sandbox.run in a temp git project, boxed and unboxed (and `true`
boxed with `sandbox_network`, whose stack starts per command), alternating so that load on a shared
machine falls on all alike, and prints the median (min–max) wall time of each as markdown. Then what
computing the box's mounts costs (boxview.files) without a grant, with a folder granted and with the
repository granted (a project with a submodule: two gitdirs), and `git commit` boxed with the
repository granted.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]
from amas_code import boxview, effects, project, sandbox  # noqa: E402

COMMANDS = ("true", "git status --short", "python3 -c pass")


def timed(command: str, root: Path, box) -> float:
    """Seconds one command takes through sandbox.run."""
    start = time.perf_counter()
    sandbox.run(effects.Command(command, 30, dict(os.environ)), root, box)
    return time.perf_counter() - start


def computed(root: Path, grant: str) -> float:
    """Seconds computing the box's mounts takes (boxview.files),
    the repository's places asked anew."""
    project._asked_places.cache_clear()
    boxview._gitlinks.cache_clear()
    start = time.perf_counter()
    boxview.files(root, grant=grant)
    return time.perf_counter() - start


def grants(root: Path, runs: int) -> list[str]:
    """The rows for the box with a grant: its mounts computed, and a commit in it."""
    git = ["git", "-c", "user.name=b", "-c", "user.email=b@x"]
    lib = root.parent / "lib"
    subprocess.run([*git, "init", "-q", str(lib)], check=True)
    subprocess.run([*git, "-C", str(lib), "commit", "-qm", "l", "--allow-empty"], check=True)
    add = ["-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "lib"]
    subprocess.run([*git, *add], cwd=root, check=True, capture_output=True)
    times = {"none": [], "a folder": [], "the repository": []}
    commits = []
    for run in range(runs):
        for name, grant in (("none", ""), ("a folder", str(lib)), ("the repository", "repository")):
            times[name].append(computed(root, grant))
        line = f"echo {run} > n && {' '.join(git)} commit -qam {run} || {' '.join(git)} add n"
        commits.append(timed(line, root, sandbox.Box(grant="repository")))
    rows = [row(f"the box's mounts, grant: {name}", took) for name, took in times.items()]
    return rows + [row("`git commit` boxed, the repository granted", commits)]


def row(name: str, times: list[float]) -> str:
    ms = [t * 1000 for t in times]
    return f"| {name} | {statistics.median(ms):.1f} ms ({min(ms):.1f}–{max(ms):.1f}) |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    runs = parser.parse_args().runs
    if sandbox.probe():
        sys.exit(f"no box here: {sandbox.probe()}")
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:  # /tmp: the box has its own
        root = Path(tmp) / "proj"
        root.mkdir()
        subprocess.run(["git", "init", "-q"], cwd=root, check=True)
        lines = ["| command | median per command (min–max) |", "|---|---|"]
        for command in COMMANDS:
            boxed, unboxed, network = [], [], []
            for _ in range(runs):
                boxed.append(timed(command, root, sandbox.Box()))
                unboxed.append(timed(command, root, None))
                if command == "true":  # what the user-mode network stack adds to a command
                    network.append(timed(command, root, sandbox.Box(network=True)))
            lines += [row(f"`{command}` boxed", boxed), row(f"`{command}` unboxed", unboxed)]
            lines += [row(f"`{command}` boxed, sandbox_network", network)] if network else []
        lines += grants(root, runs)
    sys.stdout.write(
        "\n".join(lines)
        + f"\n\n{runs} runs each, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}\n"
    )


if __name__ == "__main__":
    main()
