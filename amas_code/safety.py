"""Guards: shell permission rules, secret redaction, paths outside the project."""

import fnmatch
import os
import re
from pathlib import Path

LAST_RULE = {"command": None, "rule": None, "verdict": None}  # for /permissions
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.I)


def permission(command: str, config: dict) -> str:
    """'deny', 'allow' or 'ask' for a shell command line; deny always wins."""
    perms = config.get("permissions") or {}
    verdict, rule = "ask", None
    for kind in ("deny", "allow"):
        rule = next((p for p in perms.get(kind) or [] if fnmatch.fnmatchcase(command.strip(), p)), None)
        if rule is not None:
            verdict = kind
            break
    LAST_RULE.update(command=command, rule=rule, verdict=verdict)
    return verdict


def secrets(config: dict) -> list[str]:
    """Values to hide: the api_key and env vars named like keys, tokens, secrets, passwords."""
    values = [v for k, v in os.environ.items() if SECRET_NAME.search(k) and len(v) >= 8]
    if config.get("api_key") and len(str(config["api_key"])) >= 8:
        values.append(str(config["api_key"]))
    return sorted(set(values), key=len, reverse=True)  # longest first: no half-redacted overlaps


def redact(text: str, config: dict) -> str:
    for value in secrets(config):
        text = text.replace(value, "[REDACTED]")
    return text


def outside(path: str | Path, root: Path) -> bool:
    """True when path, symlinks resolved, lies outside the project root."""
    return not Path(path).resolve().is_relative_to(root.resolve())
