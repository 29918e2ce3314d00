"""Project map benchmark (issue 14): is the answer file of "where is X handled?" in the system
prompt?

    python bench/mapbench.py --repo psf/requests=/tmp/repos/requests \
        --repo expressjs/express=/tmp/repos/express ... [--before /tmp/amas-before] \
        [--aider /tmp/aider-venv/bin/python] [--costs] [--recall] [--out FILE]

Each checkout is copied to a temp dir per amas version, so no .amas/ mixes with another. Scores, per
repository, how many answers (of bench/map_questions.json) appear as a path in the prompt (spelled
out, or as a name on its folder's line in `More files:`, a tree of folders), with a neutral prompt
and with the question itself:
- after (a): `repomap.prompt_map(root, prompt, set(), BUDGET)` of this tree, directly (BUDGET: the
  room a one-shot leaves the map, measured through mode b and shown in its rows);
- before (b) / after (b) with --oneshot: `amas init`, then a real one-shot
  `python -m amas_code PROMPT` against a local capture server, reading the system prompt of the
  first request (--before is a worktree of the old commit);
- aider: its RepoMap at the same budget (bench/map_aider.py, run with aider's own Python).
--costs: init CPU time and peak memory, first run and incremental (one file touched),
before and after.
--recall: per language, the share of Universal Ctags' definitions
that the map lists on the same line.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download of the price list
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
QUESTIONS = ROOT / "bench" / "map_questions.json"
NEUTRAL = "hello"
# tokens: what the 2,000-token system prompt leaves the map in a one-shot (mode b measures ~1,515)
BUDGET = 1500
# agent.PROMPT_BUDGET; the map's room is this less the rest of the prompt, estimated as chars / 3
PROMPT_BUDGET = 2000
MAP_HEADER = "\n### Project map\n"  # how the agent appends the map to its system prompt
TOKENIZERS = (
    "litellm/litellm_core_utils/tokenizers"  # tiktoken's files, bundled with litellm (no download)
)
CTAGS_KINDS = {  # the kinds of definition the map means to list, by language
    "Python": {"class", "function", "member"},
    "JavaScript": {"function", "class", "method", "generator"},
    "Go": {"func", "struct", "interface", "type", "methodSpec", "talias"},
    "Rust": {
        "module",
        "struct",
        "interface",
        "implementation",
        "function",
        "enum",
        "typedef",
        "macro",
        "method",
    },
    "Java": {"annotation", "class", "enum", "interface", "method"},
    "TypeScript": {"function", "class", "interface", "enum", "method", "namespace", "alias"},
    "C": {"function", "struct", "union"},
}
EXTENSIONS = {
    "Python": ".py",
    "JavaScript": ".js",
    "Go": ".go",
    "Rust": ".rs",
    "Java": ".java",
    "TypeScript": ".ts",
}
EXTENSIONS["C"] = ".c"


def copy(checkout: Path, name: str) -> Path:
    """A fresh clone of the checkout in a temp dir (hard links: cheap), without any .amas/."""
    dest = Path(tempfile.mkdtemp(prefix=f"mapbench-{name}-")) / checkout.name
    subprocess.run(["git", "clone", "-q", str(checkout), str(dest)], check=True)
    return dest


def amas_env(src: Path, home: Path, url: str = "") -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMAS_")}
    env.update(
        PYTHONPATH=str(src), HOME=str(home), LITELLM_LOCAL_MODEL_COST_MAP="True", NO_COLOR="1"
    )
    if url:
        env.update(AMAS_MODEL="openai/test", AMAS_API_BASE=url, AMAS_API_KEY="x")
    return env


def init_code(src: Path) -> str:
    """Python that runs `amas init` of the tree at src in the current directory
    (old name run, new name init)."""
    return (
        "from pathlib import Path\nfrom amas_code import repomap\n"
        "from amas_code.config import DEFAULT_CONFIG as C\n"
        "f = getattr(repomap, 'init', None)\n"
        "f(Path('.'), C['ignore']) if f else repomap.run(Path('.'), C)"
    )


def oneshot_prompts(src: Path, checkout: Path, prompts: list[str]) -> list[str]:
    """The system prompt of the first request of a real one-shot, per prompt, with amas from src."""
    from llm_server import ScriptedLLM

    work, home, llm, out = (
        copy(checkout, "oneshot"),
        Path(tempfile.mkdtemp(prefix="mapbench-home-")),
        ScriptedLLM(),
        [],
    )
    try:
        subprocess.run(
            [sys.executable, "-c", init_code(src)],
            cwd=work,
            env=amas_env(src, home),
            check=True,
            capture_output=True,
        )
        for prompt in prompts:
            seen = len(llm.requests)
            subprocess.run(
                [sys.executable, "-m", "amas_code", prompt],
                cwd=work,
                env=amas_env(src, home, llm.url),
                capture_output=True,
                timeout=300,
                stdin=subprocess.DEVNULL,
            )
            out.append(
                llm.requests[seen]["messages"][0]["content"] if len(llm.requests) > seen else ""
            )
    finally:
        llm.close()
    return out


def direct_prompts(checkout: Path, prompts: list[str]) -> list[str]:
    """prompt_map of this tree, as the agent will call it, after its own init."""
    from amas_code import repomap
    from amas_code.config import DEFAULT_CONFIG

    work = copy(checkout, "direct")
    repomap.init(work, DEFAULT_CONFIG["ignore"])
    return [repomap.prompt_map(work, prompt, set(), BUDGET) for prompt in prompts]


def aider_prompts(python: str, checkout: Path, prompts: list[str]) -> list[str]:
    work, result = copy(checkout, "aider"), Path(tempfile.mktemp(suffix=".json"))
    subprocess.run(
        [python, str(ROOT / "bench" / "map_aider.py"), str(work), str(BUDGET), str(result)],
        input=json.dumps(prompts),
        text=True,
        capture_output=True,
        check=True,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )
    return json.loads(result.read_text())


def tokens(text: str) -> int:
    import litellm

    os.environ.setdefault(
        "TIKTOKEN_CACHE_DIR", str(Path(litellm.__file__).parent.parent / TOKENIZERS)
    )
    import tiktoken

    return len(tiktoken.get_encoding("cl100k_base").encode(text))


def listed(answer: str, text: str) -> bool:
    """The answer's path is in the text:
    spelled out, or named in `More files:`, a tree of folders."""
    return answer in text or answer in more_files(text)


def more_files(text: str) -> list[str]:
    """The paths `More files:` names: `folder/: a.py, b.py` lines,
    each folder indented under its parent."""
    lines, stack, out = text.splitlines(), [], []
    for line in lines[lines.index("More files:") + 1 :] if "More files:" in lines else []:
        head, _, names = line.strip().partition(": ")
        stack[(len(line) - len(line.lstrip(" "))) // 2 :] = (
            [head.rstrip("/")] if head != "./" else []
        )
        out += ["/".join([*stack, name]) for name in names.split(", ") if names]
    return out


def room(text: str, exact: bool) -> str:
    """The map's budget in a captured system prompt: 2,000 less everything before the map, as the
    agent counted it (after: estimated as chars / 3; before: counted exactly)."""
    if MAP_HEADER not in text:
        return "no map"
    head = text[: text.index(MAP_HEADER)]
    return str(PROMPT_BUDGET - (tokens(head) if exact else len(head) // 3))


def score(texts: list[str], answers: list[str]) -> str:
    """'hits/n' for the questions; texts[0] is the neutral prompt's, scored against every answer."""
    neutral = sum(listed(answer, texts[0]) for answer in answers)
    asked = sum(listed(answer, text) for answer, text in zip(answers, texts[1:], strict=True))
    return f"{neutral}/{len(answers)} | {asked}/{len(answers)}"


def score_repos(args, questions: dict) -> list[str]:
    rows = [
        "| repository | version | neutral prompt | the question | map budget "
        "| map tokens (neutral, max) |",
        "|---|---|---|---|---|---|",
    ]
    for repo, checkout in ((repo, checkout) for repo, checkout in args.repo if questions[repo]):
        asked = questions[repo]
        prompts, answers = [NEUTRAL] + [q["question"] for q in asked], [q["answer"] for q in asked]
        runs = {"after (a: prompt_map)": (direct_prompts, checkout, prompts)}
        if args.before:
            runs["before (b: one-shot)"] = (oneshot_prompts, args.before, checkout, prompts)
        if args.oneshot:
            runs["after (b: one-shot)"] = (oneshot_prompts, ROOT, checkout, prompts)
        if args.aider:
            runs["aider"] = (aider_prompts, args.aider, checkout, prompts)
        for version, (run, *run_args) in runs.items():
            texts = run(*run_args)
            # a system prompt's map, or the map
            maps = [text.split("### Project map\n", 1)[-1] for text in texts]
            sizes = f"{tokens(maps[0])}, {max(map(tokens, maps))}"
            budget = (
                "-".join(sorted({room(t, "before" in version) for t in texts}))
                if "b:" in version
                else str(BUDGET)
            )
            rows.append(f"| {repo} | {version} | {score(texts, answers)} | {budget} | {sizes} |")
            print(rows[-1], flush=True)
    return rows


def measure_init(src: Path, checkout: Path) -> tuple[str, str]:
    """(first run, incremental run) as 'CPU s, peak MB' of `amas init` from the tree at src."""
    work, home, runs = copy(checkout, "costs"), Path(tempfile.mkdtemp(prefix="mapbench-home-")), []
    for _ in range(2):
        done = subprocess.run(
            ["/usr/bin/time", "-f", "%U %S %M", sys.executable, "-c", init_code(src)],
            cwd=work,
            env=amas_env(src, home),
            capture_output=True,
            text=True,
            check=True,
        )
        user, system, kb = done.stderr.split()[-3:]
        runs.append(f"{float(user) + float(system):.2f} s, {int(kb) / 1024:.0f} MB")
        tracked = subprocess.run(
            ["git", "ls-files"], cwd=work, capture_output=True, text=True
        ).stdout.split()
        source = next(
            work / f
            for f in tracked
            if Path(f).suffix in {".py", ".js", ".ts", ".go", ".rs", ".java"}
        )
        source.write_text(source.read_text() + "\n")
    return runs[0], runs[1]


def costs(args) -> list[str]:
    rows = [
        "| repository | version | init, first run (CPU, peak RSS) | init, one file changed |",
        "|---|---|---|---|",
    ]
    for repo, checkout in args.repo:
        for version, src in [("before", args.before), ("after", ROOT)]:
            if src:
                first, again = measure_init(src, checkout)
                rows.append(f"| {repo} | {version} | {first} | {again} |")
                print(rows[-1], flush=True)
    return rows


def ctags(checkout: Path, language: str) -> dict[str, set[int]]:
    """{file: lines} of Universal Ctags' definitions of the kinds the map means to list."""
    done = subprocess.run(
        [
            "ctags",
            "--output-format=json",
            "--fields=+nKZs",
            f"--languages={language}",
            "-R",
            "-f",
            "-",
            ".",
        ],
        cwd=checkout,
        capture_output=True,
        text=True,
        check=True,
    )
    found = defaultdict(set)
    for line in done.stdout.splitlines():
        tag = json.loads(line)
        # callbacks, not definitions
        anonymous = tag.get("name", "").startswith(("AnonymousFunction", "__anon"))
        # inside a body: the map never lists it
        local = tag.get("scopeKind") in (
            "function",
            "method",
            "generator",
        )
        # TypeScript's `import { type X }` is an "alias"
        imported = tag.get("pattern", "").startswith("/^import")
        if (
            tag.get("_type") == "tag"
            and tag.get("kind") in CTAGS_KINDS[language]
            and not (anonymous or local or imported)
        ):
            found[tag["path"].removeprefix("./")].add(tag["line"])
    return found


SYMBOL_LINES = """import json, sys
from pathlib import Path
from amas_code import repomap
out = {}
for rel in json.loads(sys.stdin.read()):
    language = repomap.EXTENSIONS[Path(rel).suffix]
    source = Path(rel).read_bytes()
    if rel.endswith('.h') and hasattr(repomap, 'CPP') and repomap.CPP.search(source):
        language = 'cpp'
    out[rel] = sorted({s[1] for s in repomap.symbols(source, language)})
print(json.dumps(out))
"""


def recall(args) -> list[str]:
    """Per language: the share of ctags' definitions with a symbol on the same line,
    before and after."""
    rows = ["| language (repository) | ctags definitions | before | after |", "|---|---|---|---|"]
    for repo, checkout in args.repo:
        for language, ext in EXTENSIONS.items():
            expected = {
                f: lines for f, lines in ctags(checkout, language).items() if f.endswith(ext)
            }
            total = sum(map(len, expected.values()))
            if total < 50:
                continue
            cells = []
            for src in (args.before, ROOT):
                done = (
                    subprocess.run(
                        [sys.executable, "-c", SYMBOL_LINES],
                        cwd=checkout,
                        input=json.dumps(list(expected)),
                        env=amas_env(src, checkout),
                        capture_output=True,
                        text=True,
                        check=True,
                    )
                    if src
                    else None
                )
                got = json.loads(done.stdout) if done else {}
                hit = sum(len(lines & set(got.get(f, []))) for f, lines in expected.items())
                cells.append(f"{hit / total:.1%}" if done else "n/a")
            rows.append(f"| {language} ({repo}) | {total} | {cells[0]} | {cells[1]} |")
            print(rows[-1], flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--repo",
        action="append",
        default=[],
        type=lambda s: (s.split("=")[0], Path(s.split("=")[1])),
        help="owner/name=checkout path (repeat)",
    )
    parser.add_argument(
        "--before", type=Path, help="a worktree of amas before the change, for mode b and costs"
    )
    parser.add_argument(
        "--oneshot", action="store_true", help="also score this tree through a real one-shot"
    )
    parser.add_argument("--aider", help="aider's Python, to score its repo map")
    parser.add_argument("--costs", action="store_true", help="measure init time and memory")
    parser.add_argument(
        "--recall", action="store_true", help="extraction recall against Universal Ctags"
    )
    parser.add_argument("--out", type=Path, help="write the tables to this markdown file")
    args = parser.parse_args()
    questions = defaultdict(list)
    for q in json.loads(QUESTIONS.read_text()):
        questions[q["repo"]].append(q)
    tables = [score_repos(args, questions)]
    tables += [costs(args)] if args.costs else []
    tables += [recall(args)] if args.recall else []
    text = "\n\n".join("\n".join(table) for table in tables) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
