"""Configuration: defaults, YAML files, environment and flags, merged in that order."""

import os
from pathlib import Path

DEFAULT_CONFIG = {
    "model": "gemini/gemini-2.5-flash",  # any litellm model string
    "api_key": None,  # else the provider's usual env var (GEMINI_API_KEY, OPENAI_API_KEY, ...)
    "api_base": None,  # e.g. http://localhost:11434 for Ollama
    "auto_accept": False,  # apply edits and run commands without asking
    "max_context_tokens": 32000,  # compact the conversation past this
    "checkpoint_on_edit": True,  # git-commit every change so /undo can take it back
    "stream": True,  # show the answer as it arrives
    "shell_timeout": 30,  # seconds before a shell_command is killed
    "ignore": ["node_modules", "__pycache__", ".git", "*.pyc", "dist", "build", ".amas", ".venv"],
    "permissions": {"allow": [], "deny": []},  # glob patterns over shell command lines
    "preload": "auto",  # import litellm while the REPL waits: auto (2 GB+ RAM), true, false
    "search_backend": "google",  # google, duckduckgo or searxng
    "searxng_url": "http://localhost:8888",  # a SearXNG instance with the JSON API on
    "browser_path": None,  # a Chromium binary when Playwright's own is absent
    "browser_headless": True,
}
KINDS = {"preload": (bool, str), "shell_timeout": (int, float)}  # where the default's type is too narrow
ENV = {"AMAS_MODEL": "model", "AMAS_API_BASE": "api_base", "AMAS_API_KEY": "api_key"}


class ConfigError(Exception):
    """A config file that cannot be read."""


def files(root: Path) -> list[Path]:
    """The config files that apply, user-wide first."""
    return [Path.home() / ".amas" / "config.yaml", root / ".amas" / "config.yaml"]


def read_yaml(path: Path) -> dict:
    """One YAML mapping; errors name the file and line."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{path}:{where}: invalid YAML ({getattr(e, 'problem', e)})") from None
    except OSError as e:
        raise ConfigError(f"{path}: {e.strerror}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of keys to values")
    return data


def load(root: Path, flags: dict | None = None) -> tuple[dict, list[str]]:
    """Merge defaults < ~/.amas < .amas < AMAS_* env < flags; return config and warnings."""
    config, warnings = {**DEFAULT_CONFIG, "permissions": {"allow": [], "deny": []}}, []
    for path in files(root):
        if path.is_file():
            for key, value in read_yaml(path).items():
                if key not in DEFAULT_CONFIG:
                    warnings.append(f"{path}: unknown config key {key!r} ignored")
                    continue
                want = KINDS.get(key) or type(DEFAULT_CONFIG[key])
                if value is not None and DEFAULT_CONFIG[key] is not None and not isinstance(value, want):
                    raise ConfigError(f"{path}: {key} should be {getattr(want, '__name__', 'true, false or auto')}"
                                      f", not {value!r}")
                config[key] = value
    config.update({key: os.environ[var] for var, key in ENV.items() if os.environ.get(var)})
    config.update({k: v for k, v in (flags or {}).items() if v is not None})
    return config, warnings


def save_allow(root: Path, pattern: str) -> None:
    """Add a shell allow pattern to the project's .amas/config.yaml."""
    import yaml

    path = root / ".amas" / "config.yaml"
    data = read_yaml(path) if path.is_file() else {}
    perms = data.setdefault("permissions", {})
    perms.setdefault("allow", []).append(pattern)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def private_dir(folder: Path) -> Path:
    """amas's own folder (.amas/ or ~/.amas/): never followed through a symlink, created 0700."""
    if folder.is_symlink():
        raise ConfigError(f"{folder} is a symlink; amas does not follow it (remove it to go on)")
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return folder


def write_private(path: Path, text: str) -> None:
    """Write one of amas's own files whole: 0600, never through a symlink, replaced atomically."""
    private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)  # replaces a symlink at path itself, never writes through it
