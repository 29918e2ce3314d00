"""The model's tools: each handler beside its schema, one table at the end, one dispatcher."""

import contextlib
import difflib
import fnmatch
import json
import os
import re
import signal
import subprocess
from pathlib import Path

from amas_code import safety, ui

MAX_READ = 50_000  # bytes of a file shown at once
MAX_RESULT = 60_000  # characters of any tool result the model gets
MAX_LINES = 300  # lines of search and list output
STATE = {"root": Path.cwd(), "config": {}, "checkpoint": None, "accept_all": False, "browser": None}


def setup(root: Path, config: dict, checkpoint=None) -> None:
    STATE.update(root=Path(root).resolve(), config=config, checkpoint=checkpoint, accept_all=False)


def _path(path: str) -> Path:
    p = Path(path).expanduser()
    return p if p.is_absolute() else STATE["root"] / p


def _show(p: Path) -> str:
    """Path as the user thinks of it: relative inside the project."""
    return os.path.relpath(p, STATE["root"]) if not safety.outside(p, STATE["root"]) else str(p)


def _cap(text: str, limit: int, how: str) -> str:
    return text if len(text) <= limit else f"{text[:limit]}\n[output capped at {limit} characters; {how}]"


def read_file(path: str, offset: int = 0, limit: int = 2000) -> str:
    """Read a text file with line numbers."""
    p = _path(path)
    warn = ""
    if safety.outside(p, STATE["root"]):
        ui.warning(f"reading {p}, outside the project root")
        warn = "[warning: this file is outside the project root]\n"
    data = p.read_bytes()
    if b"\0" in data[:8192]:
        return "Binary file, cannot display"
    lines, offset = data.decode("utf-8", errors="replace").splitlines(), max(0, offset)
    out, size, end = [], 0, min(len(lines), offset + max(1, limit))
    for i in range(offset, end):
        size += len(lines[i]) + 8
        if size > MAX_READ:
            end = i
            break
        out.append(f"{i + 1:6}\t{lines[i]}")
    if end < len(lines):
        why = "truncated at 50 KB" if size > MAX_READ else "more lines follow"
        out.append(f"[{why}: lines {offset + 1}-{end} of {len(lines)} shown; read_file offset={end} reads on]")
    return warn + "\n".join(out) if out else warn + f"(empty file: {_show(p)})"


def _approve(question: str, outside: bool) -> bool:
    """Auto-accept unless the path is outside the project; 'a' accepts the rest of the session."""
    if (STATE["accept_all"] or STATE["config"].get("auto_accept")) and not outside:
        return True
    answer = ui.confirm(question + (" (OUTSIDE the project root)" if outside else ""))
    STATE["accept_all"] |= answer == "a" and not outside
    return answer in ("y", "a")


def _change(p: Path, new: str, verb: str) -> str:
    """Show the diff, ask, write, checkpoint."""
    old = p.read_bytes().decode("utf-8", errors="replace") if p.exists() else ""
    name, outside = _show(p), safety.outside(p, STATE["root"])
    ui.show_diff(old, new, name)
    if not _approve(f"Apply {verb} to {name}?", outside):
        return "Edit declined by user."
    snap = _checkpoint("begin", [str(p)]) if not outside else None
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(new.encode("utf-8"))
    sha = _checkpoint("commit", snap, f"{verb} {name}")
    return f"{verb.capitalize()} {name}: {len(new.splitlines())} lines" + (f" (checkpoint {sha})" if sha else "")


def _checkpoint(method: str, *args):
    """Call the checkpoint; a git failure warns but never undoes or hides the change itself."""
    if STATE["checkpoint"] is None or (method == "commit" and not args[0]):
        return None
    try:
        return getattr(STATE["checkpoint"], method)(*args)
    except Exception as e:
        ui.warning(f"checkpoint failed, /undo will not cover this change: {str(e).strip()[:300]}")
        return None


def write_file(path: str, content: str) -> str:
    """Write a whole file."""
    return _change(_path(path), content, "write")


def create_file(path: str, content: str) -> str:
    """Create a new file."""
    p = _path(path)
    if p.exists():
        return f"Error: {path} already exists; use edit_file to change it or write_file to replace it"
    return _change(p, content, "create")


def edit_file(path: str, old_str: str, new_str: str) -> str:
    """Replace one exact, unique occurrence of old_str."""
    p = _path(path)
    content = p.read_bytes().decode("utf-8", errors="replace")
    count = content.count(old_str) if old_str else 0
    if count == 1:
        return _change(p, content.replace(old_str, new_str, 1), "edit")
    if count > 1:
        starts = [m.start() for m in re.finditer(re.escape(old_str), content)]
        lines = ", ".join(str(content.count("\n", 0, s) + 1) for s in starts)
        return f"Error: old_str occurs {count} times in {path} (lines {lines}); include more context to make it unique"
    return f"Error: old_str not found in {path}. " + _closest(content, old_str)


def _closest(content: str, old: str) -> str:
    """The file region most like old, with line numbers, so the model can retry exactly."""
    lines, k = content.splitlines(), max(1, len(old.splitlines()))
    if not lines:
        return "The file is empty."
    best = max(range(max(1, len(lines) - k + 1)),
               key=lambda i: difflib.SequenceMatcher(None, "\n".join(lines[i:i + k]), old).quick_ratio())
    region = "\n".join(f"{n + 1:6}\t{lines[n]}" for n in range(best, min(len(lines), best + k)))
    return f"The closest region (lines {best + 1}-{best + k}) is:\n{region}\nCopy old_str exactly from the file."


def shell_command(command: str, timeout: int | None = None) -> str:
    """Run a shell command in the project root; stdout, stderr and exit code."""
    config = STATE["config"]
    verdict = safety.permission(command, config)
    if verdict == "deny":
        return f"Error: command refused by the deny rule {safety.LAST_RULE['rule']!r} in permissions"
    if verdict == "ask" and not (config.get("auto_accept") or STATE["accept_all"]):
        answer = ui.confirm(f"Run `{command}`?")
        if answer == "n":
            return "Command declined by user."
        if answer == "a":
            _allow_always(command)
    snap = _checkpoint("begin")
    result = _run(command, timeout or config.get("shell_timeout", 30))
    sha = _checkpoint("commit", snap, f"shell: {command[:60]}")
    return result + (f"\n[files changed; checkpoint {sha}]" if sha else "")


def _allow_always(command: str) -> None:
    from amas_code import config as config_file

    STATE["config"].setdefault("permissions", {}).setdefault("allow", []).append(command)
    config_file.save_allow(STATE["root"], command)
    ui.info(f"added {command!r} to permissions.allow in .amas/config.yaml")


def _run(command: str, timeout: float) -> str:
    """Run in its own process group, so a timeout or Ctrl+C kills background children too."""
    proc = subprocess.Popen(command, shell=True, cwd=STATE["root"], stdin=subprocess.DEVNULL, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, errors="replace")
    note = ""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        out, err = proc.communicate()
        note = f"\n[timed out after {timeout}s; the command and its children were killed]"
    finally:  # also on Ctrl+C; and leave nothing running in the background
        _kill(proc)
    parts = [f"$ {command}", out.rstrip(), f"[stderr]\n{err.rstrip()}" if err.strip() else "",
             f"[exit code {proc.returncode}]{note}"]
    return "\n".join(p for p in parts if p)


def _kill(proc) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def project_files(base: Path, ignore: list[str] | None = None) -> list[Path]:
    """Files under base, honouring `ignore` (default: the config's) and .gitignore (git ls-files in a repo)."""
    ignore = (STATE["config"].get("ignore") or []) if ignore is None else ignore
    git = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=base,
                         capture_output=True, text=True)
    if git.returncode != 0:
        gitignore = base / ".gitignore"
        ignore = ignore + (gitignore.read_text().split() if gitignore.is_file() else [])
    skip = _ignore_regex(ignore)
    if git.returncode == 0:
        rels = [Path(r) for r in git.stdout.split("\0") if r]
    else:
        rels = []
        for folder, dirs, names in os.walk(base):
            dirs[:] = sorted(d for d in dirs if not skip.match(d))
            rels += [Path(folder, n).relative_to(base) for n in sorted(names)]
    return [base / r for r in rels if not any(skip.match(part) for part in r.parts)]


def _ignore_regex(patterns: list[str]) -> re.Pattern:
    """One regex for all the glob patterns: a name matches if any pattern does."""
    globs = [fnmatch.translate(p.strip("/")) for p in patterns if p.strip("/") and not p.startswith("#")]
    return re.compile("|".join(globs) or "(?!)")


def search_files(pattern: str, path: str = ".") -> str:
    """Regex search over project files: path:line: text."""
    regex, base, hits = re.compile(pattern), _path(path), []
    anywhere = re.compile(pattern, re.MULTILINE)  # ^ and $ at every line, as in the per-line search
    files = project_files(base) if base.is_dir() else [base]
    for f in files:
        try:
            if f.stat().st_size > 2_000_000:
                continue
            text = f.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if not anywhere.search(text):  # most files do not match: skip splitting them into lines
            continue
        hits += [f"{_show(f)}:{n}: {line.strip()[:200]}" for n, line in enumerate(text.splitlines(), 1)
                 if regex.search(line)]
        if len(hits) > MAX_LINES:
            return "\n".join(hits[:MAX_LINES]) + f"\n[capped at {MAX_LINES} matches; narrow the pattern or path]"
    return "\n".join(hits) or f"No matches for {pattern!r}"


def list_files(path: str = ".") -> str:
    """Tree of project files."""
    base = _path(path)
    rels = sorted(f.relative_to(base).as_posix() for f in project_files(base))
    lines, shown = [], set()
    for rel in rels[:MAX_LINES]:
        parts = rel.split("/")
        for depth in range(len(parts) - 1):
            folder = "/".join(parts[:depth + 1])
            if folder not in shown:
                shown.add(folder)
                lines.append("  " * depth + parts[depth] + "/")
        lines.append("  " * (len(parts) - 1) + parts[-1])
    more = f"\n[{len(rels) - MAX_LINES} more files not shown; list a subfolder]" if len(rels) > MAX_LINES else ""
    return "\n".join(lines) + more if lines else f"No files under {path}"


def search_google(query: str, num_results: int = 5) -> str:
    """Web search through the configured backend."""
    from amas_code import web

    return web.search(query, num_results, STATE["config"])


def fetch_url(url: str) -> str:
    """A web page as readable text."""
    from amas_code import web

    return web.fetch(url)


def _browser():
    if STATE["browser"] is None:
        from amas_code.browser import Browser

        STATE["browser"] = Browser(STATE["config"])
    STATE["browser_used"] = True
    return STATE["browser"]


def close(idle_only: bool = False) -> None:
    """Free the browser (~500 MB); with idle_only, only if no tool used it since the last call."""
    if STATE["browser"] is not None and not (idle_only and STATE.get("browser_used")):
        STATE["browser"].close()
        STATE["browser"] = None
    STATE["browser_used"] = False


def navigate(url: str) -> str:
    return _browser().navigate(url)


def click(selector: str) -> str:
    return _browser().click(selector)


def type_text(selector: str, text: str) -> str:
    return _browser().type(selector, text)


def screenshot(path: str = "screenshot.png") -> str:
    return _browser().screenshot(str(_path(path)))


def get_text(selector: str = "body") -> str:
    return _browser().get_text(selector)


def schema(name: str, description: str, **params) -> dict:
    """An OpenAI tool schema; each param is (type, description) or (type, description, False) if optional."""
    props = {k: {"type": v[0], "description": v[1]} for k, v in params.items()}
    required = [k for k, v in params.items() if len(v) < 3 or v[2]]
    return {"type": "function", "function": {"name": name, "description": description,
                                             "parameters": {"type": "object", "properties": props,
                                                            "required": required}}}


PATH, CONTENT = ("string", "File path, relative to the project root"), ("string", "The complete file content")
TOOLS = [
    schema("read_file", "Read a file with line numbers. Read before editing.", path=PATH,
           offset=("integer", "First line to show, 0-based", False), limit=("integer", "Lines to show", False)),
    schema("write_file", "Replace a file's whole content (give the FULL content).", path=PATH, content=CONTENT),
    schema("create_file", "Create a new file; fails if it exists.", path=PATH, content=CONTENT),
    schema("edit_file", "Replace one exact, unique occurrence of old_str with new_str.", path=PATH,
           old_str=("string", "Exact text to replace, with enough context to be unique"),
           new_str=("string", "Replacement text")),
    schema("shell_command", "Run a shell command in the project root; returns stdout, stderr, exit code.",
           command=("string", "The command line"), timeout=("integer", "Seconds before it is killed", False)),
    schema("search_files", "Regex search in project files; returns path:line: text.",
           pattern=("string", "Python regular expression"), path=("string", "Folder or file to search", False)),
    schema("list_files", "List project files as a tree (ignored files left out).",
           path=("string", "Folder to list", False)),
    schema("search_google", "Search the web; returns title, url and snippet per result.",
           query=("string", "Search query"), num_results=("integer", "How many results (default 5)", False)),
    schema("fetch_url", "Fetch a web page as readable text.", url=("string", "http(s) URL")),
    schema("navigate", "Browser: open a URL; returns the title and visible text.", url=("string", "URL")),
    schema("click", "Browser: click the element matching a CSS selector.", selector=("string", "CSS selector")),
    schema("type", "Browser: type text into the element matching a CSS selector.",
           selector=("string", "CSS selector"), text=("string", "Text to type")),
    schema("screenshot", "Browser: save a PNG of the page; returns its path.",
           path=("string", "Where to save the PNG", False)),
    schema("get_text", "Browser: visible text of the page or of one element.",
           selector=("string", "CSS selector (default: the whole page)", False)),
]
HANDLERS = {"read_file": read_file, "write_file": write_file, "create_file": create_file, "edit_file": edit_file,
            "shell_command": shell_command, "search_files": search_files, "list_files": list_files,
            "search_google": search_google, "fetch_url": fetch_url, "navigate": navigate, "click": click,
            "type": type_text, "screenshot": screenshot, "get_text": get_text}
TYPES = {"string": str, "integer": int, "boolean": bool}


def parse_args(name: str, raw) -> dict | str:
    """The call's arguments checked against the schema, or an error string for the model."""
    if name not in HANDLERS:
        return f"Error: unknown tool {name!r}; available tools: {', '.join(HANDLERS)}"
    try:
        args = json.loads(raw or "{}") if isinstance(raw, str) else raw
    except ValueError as e:
        return f"Error: arguments for {name} are not valid JSON ({e}); send one JSON object"
    if not isinstance(args, dict):
        return f"Error: arguments for {name} must be a JSON object, got {type(args).__name__}"
    params = next(t["function"]["parameters"] for t in TOOLS if t["function"]["name"] == name)
    if missing := [k for k in params["required"] if k not in args]:
        return f"Error: {name} is missing required argument(s): {', '.join(missing)}"
    if unknown := [k for k in args if k not in params["properties"]]:
        return f"Error: {name} has no argument(s) {', '.join(unknown)}; it takes {', '.join(params['properties'])}"
    for key, value in args.items():
        want = params["properties"][key]["type"]
        if want == "integer" and isinstance(value, str) and value.strip().lstrip("-").isdigit():
            args[key] = int(value)
        elif not isinstance(value, TYPES[want]) or (want == "integer" and isinstance(value, bool)):
            return f"Error: argument {key!r} of {name} must be a {want}, got {type(value).__name__}"
    return args


def execute(name: str, raw_args) -> str:
    """Run one tool call from the model's raw arguments; always text, never raises (but for Ctrl+C)."""
    args = parse_args(name, raw_args)
    return args if isinstance(args, str) else run(name, args)


def run(name: str, args: dict) -> str:
    """Run a tool on checked arguments: its result, or its error, capped and with secrets redacted."""
    try:
        result = HANDLERS[name](**args)
    except Exception as e:  # the model reads this and tries again
        result = f"Error: {type(e).__name__}: {e}"
    result = _cap(str(result or "Tool executed successfully (no output)"), MAX_RESULT,
                  "ask for less, e.g. a line range or a narrower pattern")
    return safety.redact(result, STATE["config"])
