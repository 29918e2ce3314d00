"""Aider's repo map for the map benchmark: run with aider's own Python;
prints one map per prompt as JSON.

Usage: /tmp/aider-venv/bin/python bench/map_aider.py ROOT BUDGET OUT.json < prompts.json
(aider prints to stdout)
The prompts' mentioned files and identifiers are found the way aider's coder does (whole path, or a
base name with `.`, `_` or `-` in it; every word as an identifier). map_mul_no_files=1: the same
budget with no file in chat (aider's default multiplies it by 8 then).
"""

import json
import os
import re
import subprocess
import sys


def mentions(text: str, files: list[str]) -> tuple[set[str], set[str]]:
    words = {w.rstrip(",.!;:?").strip("\"'`*_") for w in text.split()}
    named = {f for f in files if f in words}
    by_name = {}
    for f in files:
        if any(c in os.path.basename(f) for c in "._-"):
            by_name.setdefault(os.path.basename(f), []).append(f)
    named |= {fs[0] for name, fs in by_name.items() if name in words and len(fs) == 1}
    return named, set(re.split(r"\W+", text))


def main() -> None:
    from aider.io import InputOutput
    from aider.models import Model
    from aider.repomap import RepoMap

    root, budget = os.path.abspath(sys.argv[1]), int(sys.argv[2])
    rels = subprocess.run(
        ["git", "ls-files"], cwd=root, capture_output=True, text=True
    ).stdout.split()
    io = InputOutput(yes=True, pretty=False, fancy_input=False)
    repo_map = RepoMap(
        map_tokens=budget, root=root, main_model=Model("gpt-4o"), io=io, map_mul_no_files=1
    )
    out = []
    for prompt in json.load(sys.stdin):
        named, idents = mentions(prompt, rels)
        text = repo_map.get_repo_map(
            [],
            [os.path.join(root, r) for r in rels],
            {os.path.join(root, f) for f in named},
            idents,
            force_refresh=True,
        )
        out.append(text or "")
    with open(sys.argv[3], "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
