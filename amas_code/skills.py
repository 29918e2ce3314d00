"""Project rules (.amas/rules.md, AGENTS.md) and skills (.amas/skills/*.md, ~/.amas/skills/*.md)."""

import re
from pathlib import Path

from amas_code import config as config_file
from amas_code import home, ui

FRONT = re.compile(r"\A---\s*\n(.*?)\n---\s*\n?", re.DOTALL)
RULES = (".amas/rules.md", "AGENTS.md")  # the project's rules, in this order


def _read(path: Path) -> str:
    """One of amas's own files, never through a symlink (a clone could point one at ~/.ssh)."""
    try:
        return home.read_private(path).strip() if path.is_file() or path.is_symlink() else ""
    except (OSError, home.ConfigError) as e:
        ui.warning(f"skipped {path}: {e}")
        return ""


def rules(files: dict[str, bytes]) -> str:
    """The project's rules, verbatim, from the steering files as read at the start (see
    home.steering_files; none from a folder the user has not trusted: pass {})."""
    found = [files.get(name, b"").decode(errors="replace").strip() for name in RULES]
    return "\n\n".join(filter(None, found))


def parse(path: Path, data: bytes | None = None) -> dict:
    """One skill file (or its bytes, as read already): optional YAML front matter (name,
    description, keywords), then the body."""
    text = _read(path) if data is None else data.decode(errors="replace").strip()
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


def load(
    root: Path, trusted: bool | None = None, files: dict[str, bytes] | None = None
) -> list[dict]:
    """User-wide skills, then the project's; a project skill wins over a user skill of the same
    name only in a folder the user trusts (untrusted, its skills are not read at all). files: the
    steering files as read at the start (home.steering_files), whose skills are the project's."""
    found = {}
    folder = Path.home() / ".amas" / "skills"
    if folder.is_dir() and not folder.is_symlink():
        for path in sorted(folder.glob("*.md")):
            skill = parse(path)
            found[skill["name"]] = skill
    if trusted is None:
        trusted = home.trusted(root)
    if not trusted:
        return list(found.values())
    if files is None:
        files = home.steering_files(root)
    for name, data in files.items():
        if name.startswith(".amas/skills/"):
            skill = parse(root / name, data)
            found[skill["name"]] = skill
    return list(found.values())


def matches(skill: dict, message: str) -> bool:
    """A keyword of the skill appears as a word in the message."""
    words = set(re.findall(r"[\w.+#-]+", message.lower()))
    return any(k in words or (" " in k and k in message.lower()) for k in skill["keywords"])
