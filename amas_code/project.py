"""The user's tree and git: the one place a git argv is built, listing the project's files, atomic writes."""

import fnmatch
import os
import re
import shutil
import subprocess
from pathlib import Path

GIT = (  # every git amas runs: no hooks, fsmonitor, bare repository found by walking up, or transport (a lazy
    # fetch runs the repository's sshCommand); no line-ending conversion, modes and links as they are; names only
    # Windows refuses (git~1, `.git.`) are plain files here
    "git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c safe.bareRepository=explicit -c protocol.allow=never "
    "-c core.autocrlf=false -c core.filemode=true -c core.symlinks=true -c core.untrackedCache=true -c gc.auto=0 "
    "-c core.bigFileThreshold=10m -c core.compression=1 -c core.protectNTFS=false"
).split()


def git_env(**extra: str) -> dict:
    """The environment for git: none of the user's GIT_ variables (the shadow never works on the user's repository),
    and no fetching of missing objects, which would run the repository's programs (git 2.44+; older: protocol)."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") and k != "LANGUAGE"}
    return {**kept, "GIT_CONFIG_NOSYSTEM": "1", "GIT_NO_LAZY_FETCH": "1", **extra}


def git_argv(*args: str) -> list[str]:
    """git with GIT's options before args, git itself found outside the project (program)."""
    found = program("git")
    if not found:
        raise FileNotFoundError("git not found in PATH's folders outside the project")
    return [found, *GIT[1:], *args]


def git(cwd: Path, *args: str, env: dict | None = None, data: bytes | None = None):
    """git as every git amas runs (GIT's options, git_env's environment unless given), its output
    captured as bytes."""
    argv = git_argv(*args)
    env = env or git_env()
    return subprocess.run(argv, cwd=cwd, env=env, input=data, capture_output=True, timeout=600)


def looks_binary(data: bytes) -> bool:
    return b"\0" in data[:8192]


def regular(p: Path, name: str) -> Path:
    """The path, if it is a file to read: a FIFO or a device is never opened (it blocks, or never ends)."""
    if p.is_dir():
        raise ValueError(f"{name} is a folder; list_files shows what it holds")
    if p.exists() and not p.is_file():
        raise ValueError(f"{name} is not a regular file")
    return p


def project_files(base: Path, ignore: list[str], literal: str | None = None) -> list[Path]:
    """Files under base, honouring `ignore` and .gitignore (git in a repository, with none of its hooks); with a
    literal, only those git grep finds it in (a fixed string: its time says nothing of what a file holds)."""
    ask = ["ls-files", "-z", "-co", "--exclude-standard"]
    if literal:
        ask = ["grep", "-lzIF", "--untracked", "-e", literal, "--", "."]
    found = git(base, *ask)
    if found.returncode not in (0, 1) or (found.returncode == 1 and ask[0] == "ls-files"):
        return project_files(base, ignore) if literal else _walk(base, ignore)
    skip = _globs(ignore)
    names = found.stdout.decode(errors="surrogateescape")
    return [
        base / r for r in names.split("\0") if r and not any(skip.match(p) for p in r.split("/"))
    ]


def _globs(patterns: list[str]) -> re.Pattern:
    return re.compile(
        "|".join(fnmatch.translate(p.strip("/")) for p in patterns if p.strip("/")[:1] not in "#")
        or "(?!)"
    )


def _walk(base: Path, ignore: list[str]) -> list[Path]:
    """Files under a folder that is not in git: `ignore` and its .gitignore's names honoured."""
    gitignore = base / ".gitignore"
    skip, found = (
        _globs(
            ignore + (gitignore.read_text(errors="replace").split() if gitignore.is_file() else [])
        ),
        [],
    )
    for folder, dirs, names in os.walk(base):
        dirs[:] = sorted(d for d in dirs if not skip.match(d))
        found += [Path(folder, n) for n in sorted(names) if not skip.match(n)]
    return found


def write(path: Path, data: bytes) -> None:
    """Write whole, through a temporary file and a rename, keeping the file's mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # short, whatever the name's length
    tmp = path.with_name(f".amas-write-{os.urandom(4).hex()}.tmp")
    try:
        with os.fdopen(
            os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666), "wb"
        ) as f:
            f.write(data)
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # only if the rename did not happen


def program(name: str) -> str | None:
    """The absolute path of a program amas starts outside the box, looked up only in PATH's absolute
    folders outside the project: a relative entry (`node_modules/.bin`, which `npm run` puts first)
    or one in the project is where a clone could plant a program of that name."""
    return shutil.which(name, path=os.pathsep.join(outside_path()))


def outside_path() -> list[str]:
    """PATH's folders a program amas starts may come from: absolute, and not in the project."""
    entries = os.environ.get("PATH", os.defpath).split(os.pathsep)
    return [e for e in entries if os.path.isabs(e) and not in_project(e)]


def in_project(path: str) -> bool:
    """Whether path (links followed) is in the project amas runs in: the nearest folder up from
    here with .git or .amas/ (not the home's), else this folder."""
    here = Path.cwd()
    marked = (f for f in [here, *here.parents] if _marks_project(f))
    project = os.path.realpath(next(marked, here))
    real = os.path.realpath(path)
    return project != "/" and (real == project or real.startswith(project + "/"))


def _marks_project(folder: Path) -> bool:
    return (folder / ".git").exists() or ((folder / ".amas").is_dir() and folder != Path.home())
