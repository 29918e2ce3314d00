"""Configuration: defaults < ~/.amas < .amas (limited until trusted) < env < flags,
each value checked."""

import functools
import os
import re
from pathlib import Path

from amas_code import home
from amas_code.home import ConfigError, read_private

DEFAULT_CONFIG = {
    "model": "gemini/gemini-2.5-flash",  # any litellm model string
    "api_key": None,  # else the provider's usual env var (GEMINI_API_KEY, OPENAI_API_KEY, ...)
    "api_base": None,  # e.g. http://localhost:11434 for Ollama
    "auto_accept": False,  # apply edits and run commands without asking
    # compact the conversation past this (or the server's own context size)
    "max_context_tokens": 32000,
    "max_tokens": 8192,  # cap on one reply, so a rambling local model stops
    "checkpoint_on_edit": True,  # checkpoint every change so /undo can take it back
    # after an edit, tell the model at once of a syntax error it brought (languages the map parses)
    "check_syntax": True,
    "stream": True,  # show the answer as it arrives
    "shell_timeout": 30,  # seconds before a shell_command is killed
    "checkpoint_max_mb": 200,  # a command whose checkpoint would copy more is asked about first
    "sandbox": "auto",  # run commands in bubblewrap: auto (where it works), on, off
    "sandbox_network": False,  # let boxed commands reach the network
    "sandbox_read": [],  # more places of your home boxed commands may read (~/.m2, ~/go)
    "ignore": ["node_modules", "__pycache__", ".git", "*.pyc", "dist", "build", ".amas", ".venv"],
    # shell rules; env: secret variables children may see
    "permissions": {
        "allow": [],
        "deny": [],
        "env": [],
    },
    "preload": "auto",  # import the model's library while the REPL waits: auto, true, false
    "text_tools": "auto",  # tool calls written as text: auto (when native ones fail), true, false
    "search_backend": "google",  # google, duckduckgo or searxng
    "searxng_url": "http://localhost:8888",  # a SearXNG instance with the JSON API on
    # a Chromium binary; else a headless shell, Playwright's own, or a system Chromium
    "browser_path": None,
    "browser_headless": True,
}
TRISTATE = (True, False, "auto")
NUMBER = (int, float)
NULLABLE = {"api_key", "api_base", "browser_path", "max_tokens"}
POSITIVE = {"max_context_tokens", "max_tokens", "shell_timeout", "checkpoint_max_mb"}


def STRINGS(v) -> bool:  # a list of strings
    return isinstance(v, list) and all(isinstance(s, str) for s in v)


CHECKS = {  # key -> (test, what it should be); None is allowed where the default is None
    "model": (
        lambda v: isinstance(v, str) and re.fullmatch(r"\S+", v),
        "a litellm model string, e.g. openai/gpt-4.1",
    ),
    "ignore": (STRINGS, "a list of glob patterns"),
    "sandbox_read": (STRINGS, "a list of paths, e.g. [~/.m2, ~/go]"),
    "permissions": (
        lambda v: (
            isinstance(v, dict)
            and set(v) <= {"allow", "deny", "env"}
            and all(map(STRINGS, v.values()))
        ),
        "a mapping with allow, deny and env lists of strings",
    ),
    "preload": (lambda v: v in TRISTATE, "true, false or auto"),
    # YAML: off is False
    "sandbox": (
        lambda v: v in ("auto", "on", "off", *TRISTATE),
        "auto, on or off",
    ),
    "text_tools": (lambda v: v in TRISTATE, "true, false or auto"),
    "check_syntax": (lambda v: isinstance(v, bool), "true or false"),
    "sandbox_network": (lambda v: v in (True, False, "lan"), "true, false or lan"),
    "search_backend": (
        lambda v: v in ("google", "duckduckgo", "searxng"),
        "google, duckduckgo or searxng",
    ),
}
KIND_NAMES = {bool: "true or false", int: "a whole number", str: "a string", NUMBER: "a number"}
ENV = {"AMAS_MODEL": "model", "AMAS_API_BASE": "api_base", "AMAS_API_KEY": "api_key"}


# An untrusted project's value is kept only where it is at least as strict as the value under it
# (the defaults, then the user's own config): each key's test says so, and a key without one is
# never kept (tests/test_trust.py holds every key to having one).
def SAME(new, old) -> bool:  # no order: another model, server, program or search engine
    return new == old


def LOWER(new, old) -> bool:  # a ceiling: seconds a command runs, MB copied unasked, tokens spent
    return new is not None and (old is None or new <= old)


def OFF(new, old) -> bool:  # a guard's switch, off (auto_accept): never turned on
    return not new or bool(old)


def ON(new, old) -> bool:  # a guard's switch, on (checkpoint_on_edit): never turned off
    return bool(new) or not old


def FEWER(new, old) -> bool:  # places shown to the box, files left out of checkpoints
    return set(new or []) <= set(old or [])


def BOXED(new, old) -> bool:  # the sandbox: never turned off (YAML reads a bare `off` as false)
    return new not in ("off", False) or old in ("off", False)


def NETWORK(new, old) -> bool:  # sandbox_network: off < on < lan
    rank = [False, True, "lan"]
    return new in rank and rank.index(new) <= rank.index(old if old in rank else False)


def ANY(new, old) -> bool:  # guards nothing: how the answer shows, when litellm loads
    return True


STRICTER = {  # in the order a warning names what it ignored
    "auto_accept": OFF,
    "browser_path": SAME,
    "checkpoint_on_edit": ON,
    "searxng_url": SAME,
    "search_backend": SAME,
    "api_base": SAME,
    "model": SAME,
    "api_key": SAME,
    "sandbox": BOXED,
    "sandbox_network": NETWORK,
    "sandbox_read": FEWER,
    "ignore": FEWER,
    "shell_timeout": LOWER,
    "checkpoint_max_mb": LOWER,
    "max_tokens": LOWER,
    "max_context_tokens": LOWER,
    "check_syntax": ANY,
    "stream": ANY,
    "preload": ANY,
    "text_tools": ANY,
    "browser_headless": ANY,
}

WHAT = {  # what a setting an untrusted project may not make does, once the folder is trusted
    "sandbox": "commands run outside the box",
    "sandbox_network": "boxed commands reach the network",
    "auto_accept": "edits and commands run without asking",
    "permissions.allow": "these commands run unasked",
    "api_base": "your prompts and files go to this server",
    "model": "your prompts and files go to this model",
    "api_key": "this key is used for the model",
    "browser_path": "this program is run as the browser",
    "checkpoint_on_edit": "changes get no checkpoint (/undo cannot take them back)",
    "searxng_url": "your searches go to this server",
    "search_backend": "your searches go to this engine",
    "sandbox_read": "the box shows these places of your home",
    "ignore": "these files are left out of checkpoints",
    "permissions.env": "commands get these secret variables",
    "shell_timeout": "a command may run this many seconds",
    "checkpoint_max_mb": "a checkpoint copies this many MB into ~/.amas unasked",
    "max_tokens": "a reply may take this many tokens (what it costs)",
    "max_context_tokens": "a request may carry this many tokens (what it costs)",
}
DANGEROUS = list(WHAT)[:8]  # shown first, marked: each takes work or data out of amas's guard


def loosenings(project: dict, base: dict | None = None) -> list[tuple[str, str, bool]]:
    """What trusting a folder turns on, from its config, over base (the defaults and the user's
    own config, read when not given): (setting: value, what it does, whether it is dangerous),
    the dangerous first. Values are shown whole (a key never)."""
    if base is None:
        base = _base()
    _, cut = untrusted(project, base)
    found = []
    for key in sorted(cut, key=lambda k: (k not in DANGEROUS, list(WHAT).index(k))):
        value = project.get(key) if "." not in key else project["permissions"][key[12:]]
        shown = "[REDACTED]" if key == "api_key" else _shown(value)
        found.append((f"{key}: {shown}", WHAT[key], key in DANGEROUS))
    return found


def _base() -> dict:
    """The values an untrusted project's are held to: the defaults, then the user's own config."""
    try:
        user = layer(Path.home() / ".amas" / "config.yaml", [])
    except ConfigError:
        user = {}
    return {**DEFAULT_CONFIG, **user}


def _shown(value) -> str:
    """A setting's value as a person reads it: a list joined, true and false as on and off."""
    if isinstance(value, list):
        return ", ".join(map(str, value))
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def parse_yaml(text: str, where: str):
    """YAML as plain data; aliases are refused
    (a few lines of them expand to gigabytes: "billion laughs")."""
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


def _of_kind(kind, v) -> bool:
    """v is of kind (a bool is no number)."""
    return isinstance(v, kind) and not (kind is not bool and isinstance(v, bool))


def check_value(key: str, value, where: str) -> None:
    """Refuse a value of the wrong type with one line naming the key and where it came from."""
    default = DEFAULT_CONFIG[key]
    test, want = CHECKS.get(key) or (None, None)
    if test is None:
        kind = NUMBER if key == "shell_timeout" else str if default is None else type(default)
        test = functools.partial(_of_kind, kind)
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
        check_value(key, value, str(path))
        out[key] = value
    return out


def untrusted(project: dict, base: dict) -> tuple[dict, list[str]]:
    """What an untrusted project file may set, and what was cut: a value only where it is at least
    as strict as base's (STRICTER); of the permissions, deny rules only."""
    cut = [k for k in STRICTER if k in project and not STRICTER[k](project[k], base.get(k))]
    cut += [k for k in project if k not in STRICTER and k != "permissions"]
    perms = project.get("permissions") or {}
    cut += [f"permissions.{k}" for k in ("allow", "env") if perms.get(k)]
    kept = {k: v for k, v in project.items() if k not in cut}
    kept["permissions"] = {"deny": perms.get("deny") or []}
    return kept, cut


def load(root: Path, flags: dict | None = None) -> tuple[dict, list[str], list[str]]:
    """Merge every layer; return the config, warnings,
    and the project settings ignored until trusted."""
    warnings = []
    user_file = Path.home() / ".amas" / "config.yaml"
    user = layer(user_file, warnings)
    project_file = root / ".amas" / "config.yaml"
    # amas run in your home: its .amas/ holds your own settings
    own = project_file.resolve() == user_file.resolve()
    project = {} if own else layer(project_file, warnings)
    ignored = []
    if project.get("api_key"):
        home.ignore_config(root)
    secrets = [str(project["api_key"])] if project.get("api_key") else []
    if not own and not home.trusted(root):
        project, ignored = untrusted(project, {**DEFAULT_CONFIG, **user})
        user = _without_allow(user, warnings)
    env = {key: os.environ[var] for var, key in ENV.items() if os.environ.get(var)}
    given = {k: v for k, v in (flags or {}).items() if v is not None}
    config = _merged([user, project, env, given], secrets)
    check_value("model", config["model"], "the model setting")
    return config, warnings, ignored


def _merged(sources: list[dict], secrets: list[str]) -> dict:
    """The defaults, then each source over them; permission rules add up (a project cannot drop
    yours), and so do the keys to hide."""
    config = {**DEFAULT_CONFIG, "permissions": {}, "secrets": secrets}
    for source in sources:
        config.update({k: v for k, v in source.items() if k != "permissions"})
        for kind, rules in (source.get("permissions") or {}).items():
            config["permissions"][kind] = [*config["permissions"].get(kind, []), *rules]
        config["secrets"] += [str(source["api_key"])] if source.get("api_key") else []
    return config


def _without_allow(user: dict, warnings: list) -> dict:
    """Your settings without your allow rules:
    in a folder you have not trusted, a `make *` runs its Makefile."""
    perms = dict(user.get("permissions") or {})
    if perms.pop("allow", None):
        warnings.append(
            "your allow rules do not apply in this folder until you trust it (`amas --trust`)"
        )
    return {**user, "permissions": perms}


def endpoint(config: dict) -> str:
    """The banner's line naming where prompts and files go:
    the model and the server (credentials cut)."""
    from urllib.parse import urlsplit

    base = config.get("api_base")
    if not base:
        return f"model {config['model']} at its provider's own endpoint"
    parts = urlsplit(str(base))
    host = parts.netloc.rpartition("@")[2]
    return f"model {config['model']} at {parts._replace(netloc=host).geturl()}"
