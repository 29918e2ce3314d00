"""Configuration: defaults < ~/.amas < .amas (limited until trusted) < env < flags; amas's own private files."""

import hashlib
import json
import os
import re
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
LOOSER = dict(
    auto_accept=bool, browser_path=SET, checkpoint_on_edit=ON, searxng_url=SET, api_base=SET
)  # untrusted: no
LOOSER["sandbox"] = lambda v: (
    v in ("off", False)
)  # a clone may not take its commands out of the box
LOOSER["sandbox_network"] = lambda v: v is True
LOOSER["ignore"] = lambda v: (
    not set(v or []) <= set(DEFAULT_CONFIG["ignore"])
)  # outside git: what /undo covers
GITIGNORE = "# local state of amas; rules.md and skills/ are meant to be shared\nhistory.jsonl\ninput_history\n"
GITIGNORE += "map_cache.json\nproject_map.md\n*.tmp\n"


class ConfigError(Exception):
    """A config file or value that cannot be used; the message names the file and key."""


def read_yaml(path: Path) -> dict:
    """One YAML mapping; errors name the file and line."""
    import yaml

    try:
        data = yaml.safe_load(read_private(path)) or {}
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}:" if mark else ""
        raise ConfigError(f"{path}:{where} invalid YAML ({getattr(e, 'problem', e)})") from None
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
        raise ConfigError(f"{where}: {key} should be {want}, not {value!r}")
    if key in POSITIVE and value is not None and value <= 0:
        raise ConfigError(f"{where}: {key} should be above 0, not {value!r}")


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


def untrusted(project: dict, mine: dict) -> tuple[dict, list[str]]:
    """What an untrusted project file may set (it may add deny rules, not loosen anything), and what was cut;
    mine: the user's own settings (home and environment)."""
    cut = [k for k, test in LOOSER.items() if k in project and test(project[k])]
    yours = (mine.get("model") or DEFAULT_CONFIG["model"]).split("/")[0]
    moved = (
        project.get("model")
        and project["model"].split("/")[0] != yours
        and not project.get("api_key")
    )
    cut += ["model"] * bool(
        moved and mine.get("api_key") and not mine.get("api_base")
    )  # your key to its provider
    if "api_base" in cut and project.get(
        "api_key"
    ):  # its own server with its own key: never the user's key
        cut.remove("api_base")
    perms = project.get("permissions") or {}
    cut += [f"permissions.{k}" for k in ("allow", "env") if perms.get(k)]
    kept = {k: v for k, v in project.items() if k not in cut}
    kept["permissions"] = {"deny": perms.get("deny") or []}
    return kept, cut


def load(root: Path, flags: dict | None = None) -> tuple[dict, list[str], list[str]]:
    """Merge every layer; return the config, warnings, and the project settings ignored until trusted."""
    warnings, home = [], Path.home() / ".amas" / "config.yaml"
    user, project_file = layer(home, warnings), root / ".amas" / "config.yaml"
    own = (
        project_file.resolve() == home.resolve()
    )  # amas run in your home: its .amas/ holds your own settings
    project, ignored, guarded = {} if own else layer(project_file, warnings), [], False
    if project.get("api_key"):
        _ignore_config(root)
    env = {key: os.environ[var] for var, key in ENV.items() if os.environ.get(var)}
    if project and not trusted(root):
        project, ignored = untrusted(project, {**user, **env})
        guarded = "api_base" in project  # kept only because the project gave its own key
    config = {**DEFAULT_CONFIG, "permissions": {}, "secrets": []}
    for source in (user, project, env, {k: v for k, v in (flags or {}).items() if v is not None}):
        config.update({k: v for k, v in source.items() if k != "permissions"})
        for kind, rules in (
            source.get("permissions") or {}
        ).items():  # rules add up: a project cannot drop yours
            config["permissions"][kind] = [*config["permissions"].get(kind, []), *rules]
        config["secrets"] += [str(source["api_key"])] if source.get("api_key") else []
    if guarded and config["api_base"] == project["api_base"]:
        config["api_key"] = project["api_key"]  # a project's api_base never receives your key
    check("model", config["model"], "the model setting")
    return config, warnings, ignored


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


def _projects() -> dict:
    try:
        data = json.loads(read_private(Path.home() / ".amas" / "projects.json"))
    except (OSError, ValueError, ConfigError):
        data = {}
    return data if isinstance(data, dict) else {}


def remembered(root: Path) -> dict:
    """What the user decided for this project, kept in their home where no clone can ship it."""
    entry = _projects().get(str(root.resolve()))
    return entry if isinstance(entry, dict) else {}


def remember(root: Path, key: str, value) -> None:
    """Record a decision for this project (trust, approved commands or hosts) in ~/.amas/projects.json."""
    data = _projects()
    data[str(root.resolve())] = {**remembered(root), key: value}
    write_private(Path.home() / ".amas" / "projects.json", json.dumps(data, indent=1))


def trusted(root: Path) -> bool | None:
    """True or False as the user answered for this exact config file; None if never asked (or it changed)."""
    answer = remembered(root).get("trust") or ""
    return {f"yes:{_digest(root)}": True, f"no:{_digest(root)}": False}.get(answer)


def set_trust(root: Path, yes: bool) -> None:
    remember(root, "trust", f"{'yes' if yes else 'no'}:{_digest(root)}")


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
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as f:
        f.write(text)
