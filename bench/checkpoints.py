"""Checkpoint benchmark (SPEC §8): `python bench/checkpoints.py [--runs N] [--project PATH]`.

Prints the median (min, max) of N runs of: edit_file with its checkpoint (in-process,
`Agent.execute`); a shell command's checkpoint in a project with 10,000 untracked files, the first
(its baseline) and later ones; a later shell command's checkpoint with 0 and with 3 submodules (each
read before and after the command, its small untracked files kept); /undo of an edit and of a shell
command; and the first baseline of a large project, with the shadow repository's disk, borrowing the
user's objects (what amas does) and copying them (for comparison). Every run has its own temp HOME,
so shadow repositories start empty. --project names a git work tree to use as the large project,
read only (default: a generated one of 20,000 tracked files of 8 kB, 160 MB, that compress to half).
"""

import argparse
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from conftest import toolbox  # noqa: E402

from amas_code.checkpoint import Checkpoint  # noqa: E402

IGNORE = toolbox(ROOT).config["ignore"]


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def make_project(path: Path, tracked: int, untracked: int = 0, size: int = 200) -> Path:
    """A git repository with `tracked` committed files and `untracked` others, in folders of 100."""
    for n in range(tracked + untracked):
        folder = path / ("src" if n < tracked else "scratch") / f"d{n // 100}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{n}.txt").write_bytes(
            f"file {n}\n".encode() + os.urandom(size // 2).hex().encode()
        )
    git(path, "init", "-q")
    git(path, "add", "src")
    git(path, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "bench")
    return path


def fresh_home(base: Path) -> None:
    os.environ["HOME"] = tempfile.mkdtemp(dir=base)


def disk(path: Path) -> float:
    """Megabytes a folder takes on disk (allocated blocks)."""
    return sum(f.lstat().st_blocks * 512 for f in path.rglob("*")) / (1 << 20)


def timed(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def show(metric: str, values: list[float], unit: str = "ms", bar: str = "report") -> None:
    scale = 1000 if unit == "ms" else 1
    median, low, high = (scale * v for v in (statistics.median(values), min(values), max(values)))
    print(
        f"| {metric} | {median:.2f} {unit} | {low:.2f} {unit} | {high:.2f} {unit} | {bar} |",
        flush=True,
    )


def bench_edit(base: Path, runs: int) -> None:
    root = make_project(base / "edit", 1000)
    fresh_home(base)
    box = toolbox(root, checkpoint=True, auto_accept=True)
    target = root / "src" / "d0" / "f0.txt"
    target.write_text("edit -1\n" + "a line of code\n" * 200)

    def edit(n: int) -> None:
        old = target.read_text().split("\n")[0]
        result = box.execute(
            "edit_file",
            json.dumps({"path": "src/d0/f0.txt", "old_str": old, "new_str": f"edit {n}"}),
        )
        assert "checkpoint:" in result, result

    edit(0)  # the shadow repository is made once per project
    show(
        "edit_file with its checkpoint, in-process",
        [timed(lambda n=n: edit(n + 1)) for n in range(runs * 4)],
        bar="≤ 20 ms",
    )
    undos = []
    for n in range(runs * 2):
        edit(100 + n)
        undos.append(timed(lambda: box.checkpoint.undo(1)))
    show("/undo of an edit", undos, bar="≤ 200 ms")


def shell_change(cp: Checkpoint, path: Path, text: str) -> None:
    """What a shell command's checkpoint costs: the recording around a one-file change."""
    with cp.recording("shell: bench") as rec:
        path.write_text(text)
    assert "checkpoint:" in rec.note, rec.note


def bench_shell(base: Path, runs: int) -> None:
    root = make_project(base / "shell", 200, untracked=10_000)
    target, firsts, laters, undos = root / "scratch" / "bench.txt", [], [], []
    for run in range(runs):
        fresh_home(base)
        cp = Checkpoint(root, IGNORE, "bench")
        firsts.append(timed(lambda cp=cp, run=run: shell_change(cp, target, f"run {run}\n")))
        laters += [
            timed(lambda cp=cp, n=n: shell_change(cp, target, f"change {n}\n")) for n in range(4)
        ]
        undos.append(timed(lambda cp=cp: cp.undo(1)))
    show("shell command's checkpoint, 10,000 untracked files: the first (baseline)", firsts, "s")
    show("shell command's checkpoint, 10,000 untracked files: later ones", laters, "s", "≤ 0.3 s")
    show("/undo of a shell command, 10,000 untracked files", undos, bar="≤ 200 ms")


def with_submodules(path: Path, count: int) -> Path:
    """A project of 200 tracked files and `count` submodules of 100 files each, two of them
    untracked (the user's work in progress)."""
    root = make_project(path, 200)
    for n in range(count):
        sub = make_project(path.parent / f"{path.name}-sub{n}", 100)
        add = ["-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), f"sub{n}"]
        git(root, *add)
        for name in ("wip.txt", "notes.md"):
            (root / f"sub{n}" / name).write_text(f"work in progress {n}\n" * 20)
    if count:
        git(root, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "submodules")
    return root


def bench_nested(base: Path, runs: int) -> None:
    for count in (0, 3):
        root = with_submodules(base / f"nested{count}", count)
        fresh_home(base)
        cp = Checkpoint(root, IGNORE, "bench")
        target = root / "made.txt"
        shell_change(cp, target, "first\n")  # the baseline
        laters = [
            timed(lambda cp=cp, target=target, n=n: shell_change(cp, target, f"{n}\n"))
            for n in range(runs * 4)
        ]
        show(f"shell command's checkpoint, later ones, {count} submodules", laters)


def bench_baseline(base: Path, runs: int, root: Path) -> None:
    files = int(
        subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True).stdout.count(
            "\n"
        )
    )
    print(
        f"\nlarge project: {root} — {files:,} tracked files, "
        f"work tree {disk(root) - disk(root / '.git'):.0f} MB\n"
    )
    for borrow in (True, False):
        times, sizes = [], []
        for _ in range(runs):
            fresh_home(base)
            cp = Checkpoint(root, IGNORE, "bench")
            # "" reads nothing of the user's: every file copied
            cp.borrowed = None if borrow else ""
            rec = cp.recording("shell: baseline")
            times.append(timed(rec.__enter__))  # its before snapshot is the baseline
            rec.__exit__(None, None, None)
            sizes.append(disk(cp.dir))
        how = (
            "borrowing the user's objects" if borrow else "copying every file (not what amas does)"
        )
        show(f"first baseline, {how}", times, "s")
        print(
            f"| shadow repository on disk, {how} | {statistics.median(sizes):.1f} MB | | | report |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--project", type=Path, help="a git work tree to baseline (default: generated)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        print("| metric | median | min | max | SPEC bar |\n|---|---|---|---|---|")
        with contextlib.redirect_stderr(io.StringIO()):  # the tools' diffs and notes
            bench_edit(base, args.runs)
            bench_shell(base, args.runs)
            bench_nested(base, args.runs)
            large = (
                args.project.resolve()
                if args.project
                else make_project(base / "large", 20_000, size=8000)
            )
            bench_baseline(base, args.runs, large)


if __name__ == "__main__":
    main()
