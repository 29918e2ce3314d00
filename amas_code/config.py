"""Configuration: defaults < ~/.amas < .amas (limited until trusted) < env < flags; amas's own private files."""

import functools
import hashlib
import json
import os
import re
import shutil
import stat
from pathlib import Path

DEFAULT_CONFIG = {
    "model": "gemini/gemini-2.5-flash",  # any litellm model string
    "api_key": None,  # else the provider's usual env var (GEMINI_API_KEY, OPENAI_API_KEY, ...)
    "api_base": None,  # e.g. http://localhost:11434 for Ollama
    "auto_accept": False,  # apply edits and run commands without asking
    "max_context_tokens": 32000,  # compact the conversation past this (or the server's own context size)
    "max_tokens": 8192,  # cap on one reply, so a rambling local model stops
    "checkpoint_on_edit": True,  # checkpoint every change so /undo can take it back
    "stream": True,  # show the answer as it arrives
    "shell_timeout": 30,  # seconds before a shell_command is killed
    "sandbox": "auto",  # run commands in bubblewrap: auto (where it works), on, off
    "sandbox_network": False,  # let boxed commands reach the network
    "ignore": ["node_modules", "__pycache__", ".git", "*.pyc", "dist", "build", ".amas", ".venv"],
    "permissions": {
        "allow": [],
        "deny": [],
        "env": [],
    },  # shell rules; env: secret variables children may see
    "preload": "auto",  # import litellm while the REPL waits: auto (2 GB+ RAM), true, false
    "text_tools": "auto",  # tool calls written as text: auto (when native ones fail), true, false
    "search_backend": "google",  # google, duckduckgo or searxng
    "searxng_url": "http://localhost:8888",  # a SearXNG instance with the JSON API on
    "browser_path": None,  # a Chromium binary; else a headless shell, Playwright's own, or a system Chromium
    "browser_headless": True,
}
TRISTATE, NUMBER, NULLABLE = (
    (True, False, "auto"),
    (int, float),
    {"api_key", "api_base", "browser_path", "max_tokens"},
)
POSITIVE = {"max_context_tokens", "max_tokens", "shell_timeout"}
STRINGS = lambda v: isinstance(v, list) and all(isinstance(s, str) for s in v)  # noqa: E731
CHECKS = {  # key -> (test, what it should be); None is allowed where the default is None
    "model": (
        lambda v: isinstance(v, str) and re.fullmatch(r"\S+", v),
        "a litellm model string, e.g. openai/gpt-4.1",
    ),
    "ignore": (STRINGS, "a list of glob patterns"),
    "permissions": (
        lambda v: (
            isinstance(v, dict)
            and set(v) <= {"allow", "deny", "env"}
            and all(map(STRINGS, v.values()))
        ),
        "a mapping with allow, deny and env lists of strings",
    ),
    "preload": (lambda v: v in TRISTATE, "true, false or auto"),
    "sandbox": (
        lambda v: v in ("auto", "on", "off", *TRISTATE),
        "auto, on or off",
    ),  # YAML: off is False
    "text_tools": (lambda v: v in TRISTATE, "true, false or auto"),
    "search_backend": (
        lambda v: v in ("google", "duckduckgo", "searxng"),
        "google, duckduckgo or searxng",
    ),
}
KIND_NAMES = {bool: "true or false", int: "a whole number", str: "a string", NUMBER: "a number"}
ENV = {"AMAS_MODEL": "model", "AMAS_API_BASE": "api_base", "AMAS_API_KEY": "api_key"}
SET, ON = lambda v: v is not None, lambda v: v is False  # noqa: E731
LOOSER = dict(  # what an untrusted project may not set: each loosens a guard or sends your work elsewhere
    auto_accept=bool,
    browser_path=SET,
    checkpoint_on_edit=ON,
    searxng_url=SET,
    api_base=SET,
    model=SET,
    api_key=SET,
)
# a clone may not take its commands out of the box
LOOSER["sandbox"] = lambda v: v in ("off", False)
LOOSER["sandbox_network"] = lambda v: v is True
# outside git: what /undo covers
LOOSER["ignore"] = lambda v: not set(v or []) <= set(DEFAULT_CONFIG["ignore"])
# a config line whose key names a secret (api_key:, token:): its value is never shown, whatever it looks like
SECRET_LINE = re.compile(
    r"(?im)^(\s*-?\s*[\w.-]*(?:key|token|secret|pass|pwd|cred|auth)[\w.-]*\s*:\s*)\S.*$"
)
GITIGNORE = "# local state of amas; rules.md and skills/ are meant to be shared\nhistory.jsonl\ninput_history\n"
GITIGNORE += "map_cache.json\nmap_index.db\nproject_map.md\n*.tmp\n"


class ConfigError(Exception):
    """A config file or value that cannot be used; the message names the file and key."""


def parse_yaml(text: str, where: str):
    """YAML as plain data; aliases are refused (a few lines of them expand to gigabytes: "billion laughs")."""
    import yaml

    try:
        events = yaml.parse(text, Loader=yaml.SafeLoader)
        alias = next((e for e in events if isinstance(e, yaml.AliasEvent)), None)
        if alias:
            line = alias.start_mark.line + 1
            raise ConfigError(f"{where}: line {line}: YAML aliases (*name) are not accepted")
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" line {mark.line + 1}:" if mark else ""
        problem = str(getattr(e, "problem", None) or e)[:200]
        raise ConfigError(f"{where}:{at} invalid YAML ({problem})") from None


def read_yaml(path: Path) -> dict:
    """One YAML mapping; errors name the file and line."""
    try:
        data = parse_yaml(read_private(path), str(path)) or {}
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: {getattr(e, 'strerror', None) or e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of keys to values")
    return data


def check(key: str, value, where: str) -> None:
    """Refuse a value of the wrong type with one line naming the key and where it came from."""
    default = DEFAULT_CONFIG[key]
    test, want = CHECKS.get(key) or (None, None)
    if test is None:
        kind = NUMBER if key == "shell_timeout" else str if default is None else type(default)
        test = lambda v: isinstance(v, kind) and not (kind is not bool and isinstance(v, bool))  # noqa: E731
        want = KIND_NAMES.get(kind, "a string")
    if not ((value is None and key in NULLABLE) or test(value)):
        raise ConfigError(f"{where}: {key} should be {want}, not {short(value)}")
    if key in POSITIVE and value is not None and value <= 0:
        raise ConfigError(f"{where}: {key} should be above 0, not {short(value)}")


def short(value, limit: int = 60) -> str:
    """A value as an error message shows it: never a whole structure."""
    import reprlib

    shown = reprlib.Repr()
    shown.maxstring = shown.maxother = limit
    text = shown.repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def layer(path: Path, warnings: list) -> dict:
    """The known, checked keys of one config file."""
    out = {}
    if path.exists() and not path.is_file():
        warnings.append(f"{path} is not a file; ignored")
    for key, value in (read_yaml(path) if path.is_file() else {}).items():
        if key not in DEFAULT_CONFIG:
            warnings.append(f"{path}: unknown config key {key!r} ignored")
            continue
        check(key, value, str(path))
        out[key] = value
    return out


def untrusted(project: dict) -> tuple[dict, list[str]]:
    """What an untrusted project file may set (it may add deny rules, not loosen anything), and what was cut."""
    cut = [k for k, test in LOOSER.items() if k in project and test(project[k])]
    perms = project.get("permissions") or {}
    cut += [f"permissions.{k}" for k in ("allow", "env") if perms.get(k)]
    kept = {k: v for k, v in project.items() if k not in cut}
    kept["permissions"] = {"deny": perms.get("deny") or []}
    return kept, cut


def load(root: Path, flags: dict | None = None) -> tuple[dict, list[str], list[str]]:
    """Merge every layer; return the config, warnings, and the project settings ignored until trusted."""
    warnings, home = [], Path.home() / ".amas" / "config.yaml"
    user, project_file = layer(home, warnings), root / ".amas" / "config.yaml"
    # amas run in your home: its .amas/ holds your own settings
    own = project_file.resolve() == home.resolve()
    project, ignored = {} if own else layer(project_file, warnings), []
    if project.get("api_key"):
        _ignore_config(root)
    secrets = [str(project["api_key"])] if project.get("api_key") else []
    if not own and not trusted(root):
        project, ignored = untrusted(project)
        user = _without_allow(user, warnings)
    env = {key: os.environ[var] for var, key in ENV.items() if os.environ.get(var)}
    config = {**DEFAULT_CONFIG, "permissions": {}, "secrets": secrets}
    for source in (user, project, env, {k: v for k, v in (flags or {}).items() if v is not None}):
        config.update({k: v for k, v in source.items() if k != "permissions"})
        # rules add up: a project cannot drop yours
        for kind, rules in (source.get("permissions") or {}).items():
            config["permissions"][kind] = [*config["permissions"].get(kind, []), *rules]
        config["secrets"] += [str(source["api_key"])] if source.get("api_key") else []
    check("model", config["model"], "the model setting")
    return config, warnings, ignored


def _without_allow(user: dict, warnings: list) -> dict:
    """Your settings without your allow rules: in a folder you have not trusted, a `make *` runs its Makefile."""
    perms = dict(user.get("permissions") or {})
    if perms.pop("allow", None):
        warnings.append(
            "your allow rules do not apply in this folder until you trust it (`amas --trust`)"
        )
    return {**user, "permissions": perms}


def endpoint(config: dict) -> str:
    """The banner's line naming where prompts and files go: the model and the server (credentials cut)."""
    from urllib.parse import urlsplit

    base = config.get("api_base")
    if not base:
        return f"model {config['model']} at its provider's own endpoint"
    parts = urlsplit(str(base))
    host = parts.netloc.rpartition("@")[2]
    return f"model {config['model']} at {parts._replace(netloc=host).geturl()}"


def _ignore_config(root: Path) -> None:
    """A project config holding a key is git-ignored, so it is never committed by accident."""
    try:
        private_dir(root / ".amas")
        _ignore_local(root / ".amas" / ".gitignore", "config.yaml\n")
    except (OSError, ConfigError):  # a read-only checkout: nothing to protect it from
        pass


def _ignore_local(path: Path, extra: str = "") -> None:
    """amas's local state (and extra) in .amas/.gitignore, whatever a clone shipped: lines added, none dropped; after
    a `!history.jsonl` that would undo them, all of them again."""
    if path.is_symlink():  # never followed: a link to /dev/null would ignore nothing
        path.unlink()
    if path.exists() and not path.is_file():  # a folder is left alone
        return
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    lines = text.splitlines()  # a line counts only after the last `!…`, which may undo it
    after = lines[
        max((i for i, line in enumerate(lines) if line.startswith("!")), default=-1) + 1 :
    ]
    missing = [line for line in (GITIGNORE + extra).splitlines() if line not in after]
    if missing:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write("\n" * (text[-1:] not in ("", "\n")) + "\n".join(missing) + "\n")


def _digest(root: Path) -> str:
    path = root / ".amas" / "config.yaml"
    return hashlib.sha256(path.read_bytes() if path.is_file() else b"").hexdigest()


def project_id(root: Path, history: bool = True) -> str:
    """The project's identity, not its path: its folder's inode and birth time, and git's first commits.
    A repository cloned where another one was is a new project: it inherits no answer and no checkpoint.
    Without history (for checkpoints), the folder alone: a command that removed .git can still be undone."""
    root = Path(root).resolve()
    info = root.stat()
    first = _first_commits(str(root), _git_marks(root)) if history else ""
    born = _born(str(root), info.st_dev, info.st_ino, info.st_ctime_ns)
    mark = f"{info.st_ino}:{born}:{first}"
    name = re.sub(r"[^\w.-]", "_", root.name)[:40] or "root"
    return f"{name}-{hashlib.sha256(mark.encode()).hexdigest()[:16]}"


@functools.lru_cache(maxsize=64)
def _born(root: str, dev: int, ino: int, ctime: int) -> str:
    """When the folder was made (statx's birth time where Python cannot read it; empty where unknown);
    kept per folder as it is now (a folder made again at the same path has a new ctime)."""
    import subprocess

    info = os.stat(root)
    if hasattr(info, "st_birthtime"):
        return str(info.st_birthtime)
    try:
        found = subprocess.run(
            ["stat", "-c", "%W", "--", str(root)], capture_output=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return found.stdout.decode(errors="replace").strip()


def _git_marks(root: Path) -> tuple:
    """What changes when a repository is made, replaced or gets its first commit: the inode and
    modification time of .git, its HEAD, its branches and packed refs."""
    places = (".git", ".git/HEAD", ".git/refs/heads", ".git/packed-refs")
    marks = []
    for place in places:
        try:
            info = (root / place).lstat()
            marks.append((info.st_ino, info.st_mtime_ns))
        except OSError:
            marks.append(None)
    return tuple(marks)


@functools.lru_cache(maxsize=64)
def _first_commits(root: str, marks: tuple) -> str:
    """The repository's root commits (none outside git or before the first commit); no program of it
    runs. Kept while its marks stay the same: a start asks for the identity several times."""
    import subprocess

    from amas_code.checkpoint import GIT, git_env

    if marks[0] is None:
        return ""
    args = [*GIT, "rev-list", "--max-parents=0", "HEAD", "--"]
    try:
        found = subprocess.run(args, cwd=root, capture_output=True, env=git_env(), timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return " ".join(sorted(found.stdout.decode(errors="replace").split()))


def _projects() -> dict:
    try:
        data = json.loads(read_private(Path.home() / ".amas" / "projects.json"))
    except (OSError, ValueError, ConfigError):
        data = {}
    return data if isinstance(data, dict) else {}


def remembered(root: Path) -> dict:
    """What the user decided for this project, kept in their home where no clone can ship it."""
    entry = _projects().get(project_id(root))
    return entry if isinstance(entry, dict) else {}


def remember(root: Path, key: str, value) -> None:
    """Record a decision for this project (trust, approved commands or hosts) in ~/.amas/projects.json."""
    data, name = _projects(), project_id(root)
    data[name] = {**remembered(root), "path": str(Path(root).resolve()), key: value}
    write_private(Path.home() / ".amas" / "projects.json", json.dumps(data, indent=1))


def answered(root: Path) -> bool | None:
    """True or False as the user answered for this project and this exact config file; None if never asked."""
    answer = remembered(root).get("trust") or ""
    return {f"yes:{_digest(root)}": True, f"no:{_digest(root)}": False}.get(answer)


def trusted(root: Path) -> bool:
    """Whether the user trusts this folder as it is now: its settings, rules and skills are then used."""
    return answered(root) is True


def set_trust(root: Path, yes: bool) -> None:
    remember(root, "trust", f"{'yes' if yes else 'no'}:{_digest(root)}")


def shipped(root: Path) -> str:
    """What the folder brings that steers amas, for the trust question: its config (secrets masked) and the
    names of its rules and skills."""
    from amas_code import safety

    found = [name for name in ("AGENTS.md", ".amas/rules.md") if (root / name).is_file()]
    skills = root / ".amas" / "skills"
    count = len(list(skills.glob("*.md"))) if skills.is_dir() else 0
    found += [f".amas/skills/ ({count} skill{'s' * (count != 1)})"] * bool(count)
    lines = [f"It ships {', '.join(found)}."] if found else []
    config = root / ".amas" / "config.yaml"
    try:
        text = read_private(config) if config.is_file() else ""
    except ConfigError as e:
        text = str(e)
    if text:
        masked = SECRET_LINE.sub(r"\1[REDACTED]", text[:4000])
        masked = safety.Secrets({"permissions": {}, "secrets": []}).redact(masked)
        lines += [".amas/config.yaml:", masked.rstrip()]
    return "\n".join(lines)


def state_file(root: Path, name: str) -> Path:
    """amas's own state for a project (history.jsonl, input_history), in ~/.amas/projects/<id>/; the first
    time, the file amas kept in .amas/ is moved there if it is amas's own (an untracked private regular file)."""
    path = Path.home() / ".amas" / "projects" / project_id(root) / name
    old = Path(root) / ".amas" / name
    if not path.exists() and _own_state(root, old):
        private_dir(path.parent)
        shutil.move(old, path)
    return path


def _own_state(root: Path, path: Path) -> bool:
    """A file amas wrote: regular (no link, no FIFO), yours, private (a checkout makes 0644), untracked."""
    import subprocess

    from amas_code.checkpoint import GIT, git_env

    try:
        info = path.lstat()
    except OSError:
        return False
    mine = stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid()
    if not mine or info.st_mode & 0o077:
        return False
    args = [*GIT, "ls-files", "--error-unmatch", "--", str(path.relative_to(root))]
    found = subprocess.run(args, cwd=root, capture_output=True, env=git_env(), timeout=10)
    return found.returncode != 0


def private_dir(folder: Path) -> Path:
    """amas's own folder (.amas/ or ~/.amas/): never followed through a symlink, created 0700."""
    if folder.is_symlink():
        raise ConfigError(f"{folder} is a symlink; amas does not follow it (remove it to go on)")
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if folder.name == ".amas" and folder.parent != Path.home():
        _ignore_local(folder / ".gitignore")  # a project's local state stays out of its commits
    return folder


def read_private(path: Path) -> str:
    """Read one of amas's own files (config, rules, skills, history), never through a symlink."""
    if path.parent.is_symlink() or path.is_symlink():
        raise ConfigError(f"{path} is a symlink; amas does not follow it (remove it to go on)")
    if path.exists() and not path.is_file():  # a FIFO would wait forever for a writer
        raise ConfigError(f"{path} is not a regular file; amas does not read it")
    return path.read_text(encoding="utf-8", errors="replace")


def write_private(path: Path, text: str) -> None:
    """Write one of amas's own files whole: 0600, never through a symlink, replaced atomically."""
    private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)  # replaces a symlink at path itself, never writes through it


def append_private(path: Path, text: str) -> None:
    """Append to one of amas's own files (history): 0600, never through a symlink."""
    private_dir(path.parent)
    # non-blocking: opening a FIFO to write would wait forever for a reader
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK
    fd = os.open(path, flags, 0o600)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ConfigError(f"{path} is not a regular file; amas does not write to it")
    with os.fdopen(fd, "a", encoding="utf-8") as f:
        f.write(text)
