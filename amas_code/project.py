"""The user's tree and git: the one place a git argv is built, listing the project's files, atomic
writes, and what in the tree steers amas or the user's tools."""

import contextlib
import errno
import fnmatch
import functools
import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path

# every git amas runs: no hooks, fsmonitor, bare repository found by walking up, or transport (a
# lazy fetch runs the repository's sshCommand); no line-ending conversion, modes and links as they
# are; names only Windows refuses (git~1, `.git.`) are plain files here
GIT = (
    "git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c safe.bareRepository=explicit "
    "-c protocol.allow=never -c core.autocrlf=false -c core.filemode=true -c core.symlinks=true "
    "-c core.untrackedCache=true -c gc.auto=0 -c core.bigFileThreshold=10m -c core.compression=1 "
    "-c core.protectNTFS=false"
).split()

CHUNK = 1 << 16  # bytes of git's output read at a time


def git_env(**extra: str) -> dict:
    """The environment for git: none of the user's GIT_ variables (the shadow never works on the
    user's repository), and no fetching of missing objects, which would run the repository's
    programs (git 2.44+; older: protocol)."""
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
    """The path, if it is a file to read:
    a FIFO or a device is never opened (it blocks, or never ends)."""
    if p.is_dir():
        raise ValueError(f"{name} is a folder; list_files shows what it holds")
    if p.exists() and not p.is_file():
        raise ValueError(f"{name} is not a regular file")
    return p


def project_files(base: Path, ignore: list[str], literal: str | None = None) -> Iterator[str]:
    """Paths of the files under base, honouring `ignore` and .gitignore (git in a repository, with
    none of its hooks); with a literal, only those git grep finds it in (a fixed string: its time
    says nothing of what a file holds). Streamed as git names them, as strings: a tree of any size
    is never held whole (and a Path each would intern every name, growing the interpreter's table of
    interned strings for good)."""
    ask = ["ls-files", "-z", "-co", "--exclude-standard"]
    if literal:
        ask = ["grep", "-lzIF", "--untracked", "-e", literal, "--", "."]
    names = _git_names(base, ask)
    if names is None:  # not a repository (or no git): every file, walked
        yield from project_files(base, ignore) if literal else _walk(base, ignore)
        return
    skip = _globs(ignore)
    for name in names:
        if not any(skip.match(part) for part in name.split("/")):
            yield os.path.join(base, name)


def _git_names(base: Path, args: list[str]) -> Iterator[str] | None:
    """The NUL-separated names git writes, as they come; None when it fails before naming any
    (`ls-files` exits 1 only on an error; `grep` does when it finds nothing)."""
    try:
        argv = git_argv(*args)
    except FileNotFoundError:
        return None
    out = subprocess.PIPE
    proc = subprocess.Popen(argv, cwd=base, env=git_env(), stdout=out, stderr=subprocess.DEVNULL)
    first = proc.stdout.read1(CHUNK)
    if not first:
        code = proc.wait()
        proc.stdout.close()
        return None if code not in (0, 1) or (code == 1 and args[0] == "ls-files") else iter(())
    return _split(proc, first)


def _split(proc: subprocess.Popen, chunk: bytes) -> Iterator[str]:
    """The names in git's output from chunk on; git is stopped when the reader stops early."""
    rest = b""
    try:
        while chunk:
            names = (rest + chunk).split(b"\0")
            rest = names.pop()
            yield from (name.decode(errors="surrogateescape") for name in names if name)
            chunk = proc.stdout.read1(CHUNK)
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()


def _globs(patterns: list[str]) -> re.Pattern:
    return re.compile(
        "|".join(fnmatch.translate(p.strip("/")) for p in patterns if p.strip("/")[:1] not in "#")
        or "(?!)"
    )


def _walk(base: Path, ignore: list[str]) -> Iterator[str]:
    """Files under a folder that is not in git: `ignore` and every .gitignore on the way read as git
    reads them (pathspec: negations, anchors, `dir/*.md`, a .gitignore in a subfolder)."""
    import pathspec

    chains = {".": [(".", pathspec.GitIgnoreSpec.from_lines(ignore))]}
    for folder, dirs, names in os.walk(base):
        here = os.path.relpath(folder, base)
        chain = chains.pop(here, [])  # the rules of the folders above, nearest last
        own = _gitignore(Path(folder))
        if own is not None:
            chain = [*chain, (here, own)]
        dirs[:] = sorted(d for d in dirs if not _ignored(chain, _joined(here, d) + "/"))
        chains.update((_joined(here, d), chain) for d in dirs)
        kept = sorted(n for n in names if not _ignored(chain, _joined(here, n)))
        yield from (os.path.join(folder, n) for n in kept)


def _joined(here: str, name: str) -> str:
    return os.path.normpath(os.path.join(here, name))


def _gitignore(folder: Path):
    """The rules of a folder's own .gitignore, or None."""
    import pathspec

    path = folder / ".gitignore"
    if not path.is_file():
        return None
    return pathspec.GitIgnoreSpec.from_lines(path.read_text(errors="replace").splitlines())


def _ignored(chain: list, path: str) -> bool:
    """Whether git would ignore path: the nearest .gitignore whose patterns decide wins, each
    matched from its own folder."""
    for folder, spec in reversed(chain):
        rel = path
        if folder != ".":
            rel = path[len(folder) + 1 :]
        decided = spec.check_file(rel).include
        if decided is not None:
            return decided
    return False


def ignored(root: Path, rels: list[str]) -> set[str]:
    """Of paths in the project, those git ignores: as `git check-ignore` says in a repository (a
    tracked file is never ignored), else as the .gitignore files on their way say (an ignored
    folder ignores all it holds). Where git fails, none."""
    if not rels:
        return set()
    if not (root / ".git").exists():
        return {rel for rel in rels if _ignored_here(root, rel)}
    data = "\0".join(rels).encode(errors="surrogateescape") + b"\0"
    try:
        done = git(root, "check-ignore", "-z", "--stdin", env=git_env(LC_ALL="C"), data=data)
    except (OSError, subprocess.SubprocessError):
        return set()
    if done.returncode not in (0, 1):
        return set()
    return {name.decode(errors="surrogateescape") for name in done.stdout.split(b"\0") if name}


def _ignored_here(root: Path, rel: str) -> bool:
    """Whether the .gitignore files from the project's top down to rel ignore it (outside git)."""
    parts = rel.split("/")
    chain = []
    for depth in range(len(parts)):
        here = "/".join(parts[:depth]) or "."
        own = _gitignore(root / here)
        if own is not None:
            chain.append((here, own))
        if depth and _ignored(chain, here + "/"):
            return True
    return _ignored(chain, rel)


def mentioned(line: str, cwd: Path) -> list[tuple[str, Path]]:
    """The files a message names with @path that exist (@property, @functools.cache, a name no
    file has: words, left as they are)."""
    found = []
    for word in re.findall(r"(?<!\S)@(\S+)", line):
        name = word.rstrip(".,;:!?)")
        path = cwd / os.path.expanduser(name)
        try:
            there = path.exists()
        except (OSError, ValueError):  # a name too long, or with a NUL: no file's
            there = False
        if there:
            found.append((name, path))
    return found


def shown(root: Path, path: Path | str) -> str:
    """A path as the user thinks of it: relative inside the project, whole outside it."""
    text, top = str(path), str(root)
    if text.startswith(top + os.sep) and os.path.isabs(top):  # a search names thousands: no relpath
        return os.path.normpath(text[len(top) + 1 :])
    inside = os.path.isabs(path) and os.path.commonpath((path, root)) == str(root)
    if inside:
        return os.path.relpath(path, root)
    return str(path)


def resolved(root: Path, raw: str, write: bool = False) -> Path:
    """The absolute path a tool names, from the project's root (ValueError for a name no file can
    have)."""
    if write and raw.endswith("/"):
        example = f"{raw}file.txt"
        raise ValueError(
            f"{raw} ends with /, which names a folder; give the file's name, e.g. {example}"
        )
    return (root / Path(raw).expanduser()).resolve()


class Moved(PermissionError):
    """A folder on the way to a write is no longer one (a link put in its place since the question):
    nothing is written."""


def write(
    path: Path, pieces: Iterable[bytes], beneath: Path | None = None, mode: int | None = None
) -> None:
    """The one atomic writer: the pieces, whole, through a temporary file and a rename (a link at
    path is replaced, never written through). The file keeps its permission bits, a new one gets
    0o666 under the umask; with `mode`, it gets `mode` under the umask either way. With `beneath`
    (an ancestor of path, both resolved), the folders from there down are opened one name at a
    time and never through a link, so the file lands where its path was approved;
    Moved otherwise."""
    folder = _opened(path.parent, beneath)
    # short, whatever the name's length
    tmp = f".amas-write-{os.urandom(4).hex()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    try:
        with os.fdopen(os.open(tmp, flags, mode or 0o666, dir_fd=folder), "wb") as f:
            f.writelines(pieces)
            if mode is None:
                _keep_mode(f.fileno(), path.name, folder)
        os.replace(tmp, path.name, src_dir_fd=folder, dst_dir_fd=folder)
    finally:
        with contextlib.suppress(FileNotFoundError):  # only if the rename did not happen
            os.unlink(tmp, dir_fd=folder)
        os.close(folder)


def _keep_mode(fd: int, name: str, folder: int) -> None:
    """The permission bits of the file `name` in folder, if there is one, given to fd."""
    with contextlib.suppress(FileNotFoundError):
        os.chmod(fd, os.stat(name, dir_fd=folder).st_mode & 0o7777)


def _opened(folder: Path, beneath: Path | None) -> int:
    """A descriptor of the folder, made if missing: from `beneath` down, a name at a time, each
    opened with O_NOFOLLOW|O_DIRECTORY from the one above (a link or a file there is Moved)."""
    if beneath is None:
        folder.mkdir(parents=True, exist_ok=True)
        return os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    held = os.open(beneath, os.O_RDONLY | os.O_DIRECTORY)
    at = beneath
    for name in folder.relative_to(beneath).parts:
        at = at / name
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, dir_fd=held)
            below = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=held)
        except OSError as e:
            if e.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            said = (
                f"the path changed since it was approved: {at} is no longer a folder (a link now?)"
            )
            raise Moved(f"{said}; nothing was written") from e
        finally:
            os.close(held)
        held = below
    return held


def program(name: str) -> str | None:
    """The absolute path of a program amas starts outside the box, looked up only in PATH's absolute
    folders outside the project: a relative entry (`node_modules/.bin`, which `npm run` puts first)
    or one in the project is where a clone could plant a program of that name."""
    return shutil.which(name, path=os.pathsep.join(outside_path()))


def outside_path() -> list[str]:
    """PATH's folders a program amas starts may come from: absolute, and not in the project."""
    entries = os.environ.get("PATH", os.defpath).split(os.pathsep)
    here = _project_here()  # once: every git amas runs looks git up
    return [e for e in entries if os.path.isabs(e) and not _within(os.path.realpath(e), here)]


def in_project(path: str) -> bool:
    """Whether path (links followed) is in the project amas runs in: the nearest folder up from
    here with .git or .amas/ (not the home's), else this folder."""
    return _within(os.path.realpath(path), _project_here())


def _project_here() -> str:
    here = Path.cwd()
    marked = (f for f in [here, *here.parents] if _marks_project(f))
    return os.path.realpath(next(marked, here))


def _within(real: str, project: str) -> bool:
    return project != "/" and (real == project or real.startswith(project + "/"))


def _marks_project(folder: Path) -> bool:
    return (folder / ".git").exists() or ((folder / ".amas").is_dir() and folder != Path.home())


# -- what steers: amas, or the user's tools at their next ordinary action -----------------------
# One definition, used by the box (read-only, with stand-ins where missing), the edit tools (asked
# in every case) and trust (amas's part). Each is a path from a folder of the project: a name
# steers in any folder, a path with a folder in it only from the top (`.config/mise`).
# amas's settings, rules and skills; AGENTS.md is rules (and so is its link's target)
AMAS = (".amas", "AGENTS.md")
# with .amas/skills/*.md, what trust digests and what the prompt carries
AMAS_FILES = (".amas/config.yaml", ".amas/rules.md", "AGENTS.md")
# lefthook reads one of its configs and merges its -local one; its script folders hold what runs
LEFTHOOK = tuple(
    f"{dot}lefthook{local}.{ext}"
    for dot in ("", ".")
    for local in ("", "-local")
    for ext in ("yml", "yaml", "json", "jsonc", "toml")
)
# a hook manager, as its installed hooks name it -> what its hooks run at the next commit
HOOK_MANAGERS = {
    "husky": (".husky",),
    "pre-commit": (".pre-commit-config.yaml",),
    "lefthook": (
        *LEFTHOOK,
        ".lefthook",
        ".lefthook-local",
        *(f".config/{n}" for n in LEFTHOOK[:10]),
    ),
    "overcommit": (".overcommit.yml", ".git-hooks"),
}
# editors' task and language-server files, and the environment managers that run code when the
# folder is opened or entered (direnv, mise, asdf)
TOOLS = tuple(
    ".vscode .idea .zed .helix .devcontainer .devcontainer.json .nvim.lua .nvimrc .exrc .envrc "
    ".tool-versions mise.toml .mise.toml mise.local.toml .mise.local.toml "
    ".mise .config/mise".split()
)
GLOBS = ("*.code-workspace", "*.sublime-project")  # a workspace file runs its tasks wherever it is
SUFFIXES = tuple(glob[1:] for glob in GLOBS)
STEERING = (*AMAS, *TOOLS, *(name for names in HOOK_MANAGERS.values() for name in names))
NAMES = {entry.lower() for entry in STEERING if "/" not in entry}  # steer in any folder
TOP = [entry.lower() for entry in STEERING if "/" in entry]  # steer at the project's top


def steers(root: Path, path: Path, hooks: Path | None = None) -> bool:
    """Whether a path in the project steers amas or the user's tools (STEERING, GLOBS), is what
    AGENTS.md links to, or is in the folder git takes hooks from (hooks). Names are compared in any
    case (a disk of macOS or Windows reads `.VSCode` as `.vscode`)."""
    if hooks is not None and path.is_relative_to(hooks):
        return True
    if path == agents_target(root):
        return True
    parts = [part.lower() for part in path.relative_to(root).parts]
    if any(part in NAMES or any(fnmatch.fnmatchcase(part, g) for g in GLOBS) for part in parts):
        return True
    return any(f"{'/'.join(parts)}/".startswith(f"{entry}/") for entry in TOP)


def agents_target(root: Path) -> Path | None:
    """What AGENTS.md links to in the project (CLAUDE.md, say), or None:
    rules as much as AGENTS.md is."""
    agents = root / "AGENTS.md"
    if not agents.is_symlink():
        return None
    target = agents.resolve()
    if not target.is_relative_to(Path(root).resolve()):
        return None
    return target


def installed(hooks: Path | None) -> list[str]:
    """The hook managers whose hooks are installed in the folder git takes hooks from (their hook
    scripts name them), each with what it reads (HOOK_MANAGERS)."""
    said = ""
    if hooks is None:
        return []
    with contextlib.suppress(OSError):
        for entry in os.scandir(hooks):
            if entry.is_file() and not entry.name.endswith(".sample"):
                with open(entry.path, "rb") as hook:
                    said += hook.read(4096).decode(errors="replace").lower()
    return [name for name in HOOK_MANAGERS if name in said]


def read_git(root: Path, *args: str) -> str | None:
    """What git says on the user's repository, reading only; None when it fails or is missing."""
    env = git_env(GIT_OPTIONAL_LOCKS="0", LC_ALL="C")
    try:
        done = git(root, *args, env=env)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode:
        return None
    return os.fsdecode(done.stdout)


def git_places(root: Path) -> tuple[Path | None, Path | None, Path | None]:
    """The repository's gitdir, its commondir and the folder it takes hooks from (hooksPath), asked
    again only when the .git or the user's git config changed (the box cannot change them; a
    worktree's shared config, changed outside, is seen at amas's next start)."""
    marks = [root / ".git", *map(Path, ("~/.gitconfig", "~/.config/git/config"))]
    changed = []
    for mark in marks:
        with contextlib.suppress(OSError):
            info = mark.expanduser().lstat()
            changed += [str(mark), info.st_ino, info.st_mtime_ns]
    return _asked_places(str(root), tuple(changed))


@functools.lru_cache(maxsize=16)
def _asked_places(root: str, changed: tuple) -> tuple[Path | None, Path | None, Path | None]:
    """What git says of the repository at root (see git_places)."""
    said = read_git(
        Path(root), "rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir"
    )
    lines = (said or "").splitlines()
    if len(lines) != 2:
        return None, None, None
    common = Path(lines[1])
    return Path(lines[0]), common, _hooks_path(Path(root), common)


def _hooks_path(root: Path, common: Path) -> Path:
    """The folder git takes hooks from: the one core.hooksPath names (amas's own -c, of scope
    "command", is not the repository's), else the common dir's hooks."""
    said = read_git(root, "config", "--path", "--show-scope", "--get-all", "core.hooksPath") or ""
    lines = said.splitlines()
    named = [line.split("\t", 1)[1] for line in lines if not line.startswith("command\t")]
    if named and named[-1]:
        return root / named[-1]
    return common / "hooks"
