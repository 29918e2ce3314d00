"""What naming what a command left costs per command (SPEC §6, §8): `python bench/planted.py
[--runs N] [--files N] [--packages N]`.

Builds a git project of N files (--files, 15,000 by default, ten to a folder, a dot-file in every
tenth folder) with a git-ignored node_modules of N packages (--packages, 1,000: twenty files each,
three of them dot-files, in four folders), then times boxview.planted after a command that
changed nothing and after one that left a nested repository, a .pth in a venv and an .envrc in a
subfolder. Prints the median (min–max) as markdown.
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
from amas_code import boxview  # noqa: E402

PACKAGE = {  # one package of node_modules
    "package.json": "{}\n",
    ".npmignore": "test/\n",
    ".eslintrc.json": "{}\n",
    ".editorconfig": "root = true\n",
    "README.md": "# pkg\n",
    **{f"lib/m{i}.js": "module.exports = 1\n" for i in range(8)},
    **{f"lib/util/u{i}.js": "module.exports = 2\n" for i in range(4)},
    **{f"dist/d{i}.js": "x\n" for i in range(3)},
}


def build(root: Path, files: int, packages: int) -> None:
    """The project: its own files and its dependencies."""
    for i in range(files):
        folder = root / f"src/p{i // 1000}/f{i // 10}"
        folder.mkdir(parents=True, exist_ok=True)
        name = ".env.example" if i % 100 == 0 else f"m{i}.py"
        (folder / name).write_text("x = 1\n")
    for p in range(packages):
        for rel, text in PACKAGE.items():
            path = root / "node_modules" / f"pkg{p}" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    (root / ".gitignore").write_text("node_modules/\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)


def plant(root: Path) -> None:
    """What a command could leave: a nested repository, a venv's .pth, a subfolder's .envrc."""
    subprocess.run(["git", "init", "-q", str(root / "node_modules/pkg7/.tool")], check=True)
    site = root / "api/.venv/lib/python3.11/site-packages"
    site.mkdir(parents=True, exist_ok=True)
    (root / "api/.venv/pyvenv.cfg").write_text("home = /usr\n")
    (site / "evil.pth").write_text("import os\n")
    (root / "src/p1/.envrc").write_text("echo hi\n")


def unplant(root: Path) -> None:
    """What plant left, removed (outside a command: not named)."""
    import shutil

    shutil.rmtree(root / "node_modules/pkg7/.tool")
    shutil.rmtree(root / "api")
    (root / "src/p1/.envrc").unlink()


def timed(root: Path, since: int, tree: boxview.Tree) -> tuple[float, list[str]]:
    start = time.perf_counter()
    found = boxview.planted(root, since, tree)
    return time.perf_counter() - start, found


def row(name: str, times: list[float]) -> str:
    ms = [t * 1000 for t in times]
    return f"| {name} | {statistics.median(ms):.1f} ms ({min(ms):.1f}–{max(ms):.1f}) |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--files", type=int, default=15_000)
    parser.add_argument("--packages", type=int, default=1_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        root = Path(tmp)
        build(root, args.files, args.packages)
        since = boxview.now()
        first = [timed(root, since, boxview.Tree(str(root)))[0] for _ in range(args.runs)]
        tree = boxview.Tree(str(root))  # the session's, kept from one command to the next
        timed(root, since, tree)
        quiet = [timed(root, boxview.now(), tree)[0] for _ in range(args.runs)]
        planted = []
        for _ in range(args.runs):
            since = boxview.now()
            plant(root)
            planted.append(timed(root, since, tree))
            unplant(root)
            timed(root, boxview.now(), tree)
        entries = sum(len(names) + len(dirs) for _, dirs, names in os.walk(root))
    lines = ["| the walk after a command | median per command (min–max) |", "|---|---|"]
    lines += [row("the session's first (every folder listed)", first)]
    lines += [row("a later one, after a command that changed nothing", quiet)]
    lines += [
        row(
            f"a later one, after a command that left {', '.join(planted[0][1])}",
            [t for t, _ in planted],
        )
    ]
    sys.stdout.write(
        "\n".join(lines) + f"\n\n{entries:,} files and folders, {args.runs} runs each, "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}\n"
    )


if __name__ == "__main__":
    main()
