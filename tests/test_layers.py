"""The layout is the architecture: modules stand on floors and import only downward (PLAN draws its
diagram from FLOORS). Imports inside functions count; a lazy import may defer a heavy package, never
hide an upward edge."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).parent.parent / "amas_code"
FLOORS = {
    # the leaves: what several floors need, importing nothing of amas
    "effects": 0,  # Change, Command, Verdict, Declined: the vocabulary the floors share
    "redact": 0,  # secrets: redaction, placeholders, the environment children get
    "project": 0,  # the user's tree and git: the only git argv, file listing, atomic writes
    "toolcalls": 0,  # text tool calls both ways
    "report": 0,  # the JSON contract for scripts
    "webproxy": 0,  # the browser's way out: only to hosts its gated requests reached
    "ui": 0,  # every line the user sees
    "seccomp": 0,  # the box's seccomp filter, built with libseccomp
    "cgroups": 0,  # the box's limits that hold for root too; a child's start
    "home": 1,  # amas's own state in ~/.amas: identity, trust, remembered answers, private files
    "sandbox": 1,  # run one command, boxed or not
    "netstack": 1,  # the box's network: slirp4netns on its own namespace
    "boxview": 1,  # what the box sees of the files: its mounts as a value
    "browser": 1,  # search, fetch, Chromium
    "direct": 1,  # the openai SDK for a server of the user's own: the direct path
    "config": 2,  # settings: defaults, checks, layers
    "policy": 2,  # the gate: judge an effect
    "checkpoint": 2,  # the shadow repository: record, undo, redo
    "memory": 2,  # the user's notes across sessions, in ~/.amas
    "providers": 2,  # the only litellm call
    "repomap": 2,  # the project map
    "tools": 3,  # the model's tools
    "skills": 3,  # rules, AGENTS.md, skills
    "agent": 4,  # the loop
    "act": 4,  # one tool call end to end
    "context": 4,  # what the model sees
    "history": 4,  # the conversation log
    "repl": 5,  # the REPL and its slash commands
    "amas": 6,  # the CLI: one-shot or the REPL
    "__main__": 7,
    "__init__": 0,
}
NEIGHBOURS = {("agent", "act"), ("agent", "context"), ("agent", "history")}  # the loop's own parts
NEIGHBOURS |= {("sandbox", "netstack"), ("sandbox", "boxview")}  # the box's own parts


def imports(path: Path) -> set[str]:
    """The amas modules a file imports, anywhere in it."""
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    return (imported(path.read_text()) & modules) - {path.stem}


def imported(source: str) -> set[str]:
    """Every name an import in source may bring from amas_code, in every form: `import amas_code.x`,
    `from amas_code import x`, `from amas_code.x import y`, `from . import x`, `from .x import y`,
    and `importlib.import_module("amas_code.x")` or `__import__` with a written name."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            parts = (node.module or "").split(".")
            if parts[0] == "amas_code" or node.level:
                found |= {parts[-1]} | {alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[-1] for a in node.names if a.name.startswith("amas_code.")}
        elif isinstance(node, ast.Call) and _dynamic(node):
            found.add(node.args[0].value.split(".")[-1])
    return found - {"", "amas_code"}


def _dynamic(node: ast.Call) -> bool:
    """importlib.import_module("amas_code.x") or __import__("amas_code.x")."""
    name = ast.unparse(node.func)
    written = node.args and isinstance(node.args[0], ast.Constant)
    named = written and str(node.args[0].value).startswith("amas_code.")
    return name in ("importlib.import_module", "import_module", "__import__") and bool(named)


def edges() -> set[tuple[str, str]]:
    return {(p.stem, m) for p in PACKAGE.glob("*.py") for m in imports(p)}


def test_every_module_has_a_floor():
    assert {p.stem for p in PACKAGE.glob("*.py")} - set(FLOORS) == set()


def upward() -> set[tuple[str, str]]:
    """Imports of a module on the same floor or above (but the loop's own parts)."""
    up = {(a, b) for a, b in edges() if FLOORS.get(a, 2) <= FLOORS.get(b, 2)}
    return up - NEIGHBOURS


def test_imports_go_only_down():
    assert upward() == set()


def test_every_import_form_counts():
    """An upward import cannot hide in another spelling: each form names the module it brings."""
    forms = {
        "from . import agent": {"agent"},
        "from .agent import Agent": {"agent", "Agent"},
        "from amas_code import agent as a": {"agent"},
        "from amas_code.agent import Agent": {"agent", "Agent"},
        "import amas_code.agent": {"agent"},
        "def f():\n    from .. import agent": {"agent"},
        "import importlib\nimportlib.import_module('amas_code.agent')": {"agent"},
        "__import__('amas_code.agent')": {"agent"},
    }
    for source, names in forms.items():
        assert imported(source) == names, source
