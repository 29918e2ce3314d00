"""Project rules (.amas/rules.md, AGENTS.md) and skills (.amas/skills/*.md, ~/.amas/skills/*.md)."""

import re
from pathlib import Path

from amas_code import config as config_file
from amas_code import home, ui

FRONT = re.compile(r"\A---\s*\n(.*?)\n---\s*\n?", re.DOTALL)


def _read(path: Path) -> str:
    """One of amas's own files, never through a symlink (a clone could point one at ~/.ssh)."""
    try:
        return home.read_private(path).strip() if path.is_file() or path.is_symlink() else ""
    except (OSError, home.ConfigError) as e:
        ui.warning(f"skipped {path}: {e}")
        return ""


def rules(root: Path, trusted: bool | None = None) -> str:
    """The project's rules, verbatim; none from a folder the user has not trusted (trusted: known already)."""
    if not (home.trusted(root) if trusted is None else trusted):
        return ""
    # a link to CLAUDE.md in the repository is fine; one out of it is not
    agents = (root / "AGENTS.md").resolve()
    agents = agents if agents.is_relative_to(root.resolve()) else root / "AGENTS.md"
    return "\n\n".join(filter(None, (_read(root / ".amas" / "rules.md"), _read(agents))))


def parse(path: Path) -> dict:
    """One skill file: optional YAML front matter (name, description, keywords), then the body."""
    text = _read(path)
    meta = {}
    match = FRONT.match(text)
    if match:
        try:
            meta = config_file.parse_yaml(match.group(1), str(path)) or {}
        except home.ConfigError as e:
            ui.warning(f"{e}; its front matter is ignored")
            meta = {}
        text = text[match.end() :]
    meta = meta if isinstance(meta, dict) else {}
    keywords = meta.get("keywords") or re.split(r"[-_\s]+", path.stem)
    if isinstance(keywords, str):
        keywords = re.split(r"[,\s]+", keywords)
    first = next((line.strip("# ").strip() for line in text.splitlines() if line.strip()), "")
    return {
        "name": str(meta.get("name") or path.stem),
        "description": str(meta.get("description") or first),
        "keywords": [str(k).lower() for k in keywords if str(k).strip()],
        "body": text.strip(),
    }


def load(root: Path, trusted: bool | None = None) -> list[dict]:
    """User-wide skills, then the project's; a project skill wins over a user skill of the same name only in a
    folder the user trusts (untrusted, its skills are not read at all)."""
    found = {}
    folders = [Path.home() / ".amas" / "skills"]
    if home.trusted(root) if trusted is None else trusted:
        folders.append(root / ".amas" / "skills")
    for folder in folders:
        for path in (
            sorted(folder.glob("*.md")) if folder.is_dir() and not folder.is_symlink() else []
        ):
            skill = parse(path)
            found[skill["name"]] = skill
    return list(found.values())


def matches(skill: dict, message: str) -> bool:
    """A keyword of the skill appears as a word in the message."""
    words = set(re.findall(r"[\w.+#-]+", message.lower()))
    return any(k in words or (" " in k and k in message.lower()) for k in skill["keywords"])
