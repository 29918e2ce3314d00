"""amas's own state, in the user's home where no clone can ship it: the project's identity, trust
and remembered answers, and the private files amas reads and writes (never through a link)."""

import contextlib
import functools
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

from amas_code import project

GITIGNORE = (
    "# local state of amas; rules.md and skills/ are meant to be shared\n"
    "history.jsonl\ninput_history\n"
)
GITIGNORE += "map_cache.json\nmap_index.db\nproject_map.md\n*.tmp\n"


class ConfigError(Exception):
    """A config file or value that cannot be used; the message names the file and key."""


def ignore_config(root: Path) -> None:
    """A project config holding a key is git-ignored, so it is never committed by accident."""
    try:
        private_dir(root / ".amas")
        _ignore_local(root / ".amas" / ".gitignore", "config.yaml\n")
    except (OSError, ConfigError):  # a read-only checkout: nothing to protect it from
        pass


def _ignore_local(path: Path, extra: str = "") -> None:
    """amas's local state (and extra) in .amas/.gitignore, whatever a clone shipped: lines added,
    none dropped; after a `!history.jsonl` that would undo them, all of them again."""
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
        added = "\n".join(missing) + "\n"
        if text[-1:] not in ("", "\n"):  # the last line the file had, ended first
            added = "\n" + added
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write(added)


def steering_files(root: Path) -> dict[str, bytes]:
    """Each file in the project that steers amas (project.AMAS_FILES and .amas/skills/*.md), by
    its path, as it is now: read once, at the start, and those bytes are what trust digests and
    what the prompt carries (a change on disk after, by a command or anyone, is seen at the next
    start). AGENTS.md is read through a link in the project (to CLAUDE.md, say); amas's own files
    never through a link, and nothing that is not a regular file."""
    found = [root / name for name in project.AMAS_FILES]
    skills = root / ".amas" / "skills"
    if skills.is_dir() and not skills.is_symlink():
        found += sorted(skills.glob("*.md"))
    files = {}
    for path in found:
        with contextlib.suppress(OSError, ConfigError):
            files[path.relative_to(root).as_posix()] = _steering_bytes(root, path)
    return files


def _steering_bytes(root: Path, path: Path) -> bytes:
    """One steering file's bytes; OSError or ConfigError where it is not to be read (see
    steering_files)."""
    if path.name == "AGENTS.md" and path.parent == root:
        target = project.agents_target(root)
        if target is None and path.is_symlink():  # a link out of the project
            raise ConfigError(f"{path} links out of the project")
        path = target or path
    elif path.is_symlink() or path.parent.is_symlink():
        raise ConfigError(f"{path} is a symlink")
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # a FIFO never waits
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ConfigError(f"{path} is not a regular file")
        return f.read()


def steering(root: Path, files: dict[str, bytes] | None = None) -> dict[str, str]:
    """A digest of each file that steers amas in the project, by its path (see steering_files;
    files: as read already)."""
    if files is None:
        files = steering_files(root)
    return {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}


def _digest(root: Path, files: dict[str, bytes] | None = None) -> str:
    return hashlib.sha256(json.dumps(steering(root, files), sort_keys=True).encode()).hexdigest()


def project_id(root: Path, history: bool = True) -> str:
    """The project's identity, not its path: its folder's inode and birth time, and git's first
    commits. A repository cloned where another one was is a new project: it inherits no answer and
    no checkpoint. Without history (for checkpoints), the folder alone: a command that removed .git
    can still be undone."""
    root = Path(root).resolve()
    info = root.stat()
    first = _first_commits(str(root), _git_marks(root)) if history else ""
    born = _born(str(root), info.st_dev, info.st_ino, info.st_ctime_ns)
    mark = f"{info.st_ino}:{born}:{first}"
    name = re.sub(r"[^\w.-]", "_", root.name)[:40] or "root"
    return f"{name}-{hashlib.sha256(mark.encode()).hexdigest()[:16]}"


@functools.lru_cache(maxsize=64)
def _born(root: str, dev: int, ino: int, ctime: int) -> str:
    """When the folder was made (statx's birth time where Python cannot read it; empty where
    unknown); kept per folder as it is now (a folder made again at the same path has a new
    ctime)."""
    info = os.stat(root)
    if hasattr(info, "st_birthtime"):
        return str(info.st_birthtime)
    program = project.program("stat")  # never one the project planted on PATH
    if not program:
        return ""
    try:
        found = subprocess.run(
            [program, "-c", "%W", "--", str(root)], capture_output=True, timeout=5
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
    if marks[0] is None:
        return ""
    try:
        found = project.git(Path(root), "rev-list", "--max-parents=0", "HEAD", "--")
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
    """Record a decision for this project (trust, approved commands or hosts) in
    ~/.amas/projects.json."""
    data = _projects()
    name = project_id(root)
    data[name] = {**remembered(root), "path": str(Path(root).resolve()), key: value}
    write_private(Path.home() / ".amas" / "projects.json", json.dumps(data, indent=1))


def answered(root: Path, files: dict[str, bytes] | None = None) -> bool | None:
    """True or False as the user answered for this project and what steers it now (files: as read
    already, see steering_files); None if never asked."""
    answer = remembered(root).get("trust") or ""
    digest = _digest(root, files)
    return {f"yes:{digest}": True, f"no:{digest}": False}.get(answer)


def trusted(root: Path, files: dict[str, bytes] | None = None) -> bool:
    """Whether the user trusts this folder as it is now (or as files were read): its settings,
    rules and skills are then used."""
    return answered(root, files) is True


def set_trust(root: Path, yes: bool) -> None:
    """Trust the folder as it is now (or not): any change to what steers asks again."""
    remember(root, "trusted_files", steering(root) if yes else {})
    remember(root, "trust", f"{'yes' if yes else 'no'}:{_digest(root)}")


def changed_since_trusted(root: Path) -> list[str]:
    """The files that steer amas and changed (or came or went) since the user trusted the folder;
    none when it was never trusted or nothing changed."""
    saved = remembered(root)
    if not str(saved.get("trust", "")).startswith("yes:") or answered(root):
        return []
    was = saved.get("trusted_files") if isinstance(saved.get("trusted_files"), dict) else {}
    now = steering(root)
    changed = sorted(name for name in {*was, *now} if was.get(name) != now.get(name))
    return changed or [".amas/config.yaml"]  # a record from before trust covered every file


def state_file(root: Path, name: str) -> Path:
    """amas's own state for a project (history.jsonl, input_history), in ~/.amas/projects/<id>/; the
    first time, the file amas kept in .amas/ is moved there if it is amas's own (an untracked
    private regular file)."""
    path = Path.home() / ".amas" / "projects" / project_id(root) / name
    old = Path(root) / ".amas" / name
    if not path.exists() and _own_state(root, old):
        private_dir(path.parent)
        shutil.move(old, path)
    return path


def _own_state(root: Path, path: Path) -> bool:
    """A file amas wrote: regular (no link, no FIFO), yours, private
    (a checkout makes 0644), untracked."""
    try:
        info = path.lstat()
    except OSError:
        return False
    mine = stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid()
    if not mine or info.st_mode & 0o077:
        return False
    rel = str(path.relative_to(root))
    return project.git(root, "ls-files", "--error-unmatch", "--", rel).returncode != 0


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
    project.write(path, [text.encode()], mode=0o600)


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
