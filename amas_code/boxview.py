"""What the box sees of the files, as bubblewrap's mount arguments built from what is on disk now:
of the home only the toolchains' places, the project writable (never the home or above it),
credential places and Unix sockets hidden, and in the project the repositories (nested ones and
the hooks folder too) and what steers amas or the user's tools read-only, with empty stand-ins
where those are missing. Also what a boxed command left that runs outside amas (planted)."""

import contextlib
import functools
import os
import subprocess
from pathlib import Path

from amas_code import project, redact

RC_FILES = (
    "~/.bashrc ~/.bash_profile ~/.bash_login ~/.profile ~/.zshrc ~/.zprofile ~/.zshenv".split()
)
SKIP = {"/proc", "/sys", "/dev"}  # replaced whole in the box, not hidden one by one
# of the home, only these are in the box, read-only (with the user's own `sandbox_read` places):
# the toolchains and git's identity; credential places among them stay hidden (redact.CREDENTIALS)
HOME_READ = (*redact.TOOLCHAINS, "~/.gitconfig", "~/.config/git")
# what steers amas or the user's tools: read-only in the box; where missing, an empty read-only
# folder stands in for it (git shows no empty folder; no file of that name can be made)
STEERING = ("AGENTS.md", ".amas", ".vscode", ".idea", ".envrc")
FILES = ("AGENTS.md", ".envrc")  # an empty folder of such a name is a stand-in left behind
# what hook managers run at the user's next commit (husky v9's bodies, pre-commit's, lefthook's)
HOOK_TOOLS = (".husky", ".pre-commit-config.yaml", "lefthook.yml", ".lefthook.yml")
# other tools' tokens and browser profiles: hidden too where the box shows the home (a read-only
# project that holds it); elsewhere the home is hidden whole
TOOL_CREDENTIALS = (
    "~/.codex ~/.claude ~/.claude.json ~/.cache/huggingface ~/.s3cfg ~/.mozilla ~/snap/firefox "
    "~/.config/google-chrome ~/.config/chromium ~/.config/BraveSoftware ~/snap/chromium"
).split()
STARTUP = ("sitecustomize.py", "usercustomize.py")  # with *.pth: what python runs at its start
CLOCK = 20_000_000  # ns: files' times come from the kernel's coarse clock, a tick behind time_ns()
UNIX_SOCKET_PLACES = ("/run/user", "/run/dbus", "/var/run/docker.sock", "/run/docker.sock")


def unix_sockets_hidden() -> list[str]:
    """Without a seccomp filter: the places of the sockets that run programs outside the box (the
    session bus, systemd's, docker's), hidden. The private /tmp already hides X11's."""
    args = []
    own = os.environ.get("XDG_RUNTIME_DIR")  # where it is not under /run/user
    for place in [*UNIX_SOCKET_PLACES, *([own] if own else [])]:
        path = os.path.realpath(place)
        if os.path.isdir(path):
            args += ["--tmpfs", path]
        elif os.path.exists(path):
            args += ["--ro-bind", "/dev/null", path]
    return args


def _hidden(places=(*redact.CREDENTIALS, *RC_FILES)) -> list[str]:
    """Mounts that hide each credential place that exists: an empty folder, or an empty file."""
    args = []
    for place in places:
        if place in SKIP or place.startswith("/proc"):
            continue
        path = os.path.realpath(os.path.expanduser(place))
        if os.path.isdir(path):
            args += ["--tmpfs", path]
        elif os.path.exists(path):
            args += ["--ro-bind", "/dev/null", path]
    return args


def files(root: Path, read: tuple[str, ...] = (), grant: str = "", plan: bool = False) -> list[str]:
    """What the box sees of the files, as bubblewrap's arguments after / read-only and /tmp: of
    the home only the toolchains' places and read (the user's `sandbox_read`), the project writable
    (read-only where it holds the home, see writable_root, and in plan mode), credential places
    hidden, and in the project the repository and what steers amas or the user's tools read-only,
    but for one run's grant (sandbox.Box.grant). One value, built from what is on disk now."""
    root = Path(root)
    writable = writable_root(root)
    hidden = _home() if writable else None  # else the project shows the home, read-only
    shown = _shown(hidden, read) if hidden else []
    args = _home_view(hidden, shown)
    if writable and not plan:
        args += ["--bind", str(root), str(root)]
    elif str(root) != "/":  # / is there, read-only; bound again, it would bring the host's /proc
        args += ["--ro-bind", str(root), str(root)]
    if hidden:  # of the credential places, only those the box shows need hiding
        args += _in_sight(_hidden(), hidden, [*shown, str(root)])
    else:  # the home is in sight: other tools' tokens and browser profiles hidden too
        args += _hidden() + _hidden(TOOL_CREDENTIALS)
    if writable and not plan:
        args += _repository(root, grant) + _steering_read_only(root)
    if plan and (root / ".amas" / "config.yaml").is_file():  # its key stays unreadable
        args += ["--ro-bind", "/dev/null", str(root / ".amas" / "config.yaml")]
    if grant.startswith("/"):  # a folder the person made writable for one run
        args += ["--bind", grant, grant]
    return args + (["--remount-ro", hidden] if hidden else [])


def _repository(root: Path, grant: str) -> list[str]:
    """The repository read-only; for one run granted "repository", only its config and hooks."""
    if grant != "repository":
        return _git_read_only(root)
    gitdir, common, hooks = _git_places(root)
    places = {str(p / name) for p in (gitdir, common) if p for name in ("config", "hooks")}
    args = []
    for place in sorted(p for p in places if os.path.exists(p)):
        args += ["--ro-bind", place, place]
    return args + _hooks_read_only(root, hooks, set())


def writable_root(root: Path) -> bool:
    """Whether the box may make a project writable: never the home folder, `/`, or a folder above
    the home (what the user runs later is there: ~/.bashrc, ~/.local/bin, ~/.config/autostart)."""
    real = Path(os.path.realpath(root))
    home = Path(os.path.realpath(os.path.expanduser("~")))
    return real != home and real not in home.parents


def _home() -> str | None:
    """The user's home as it really is, or None when there is none to hide (missing, or /)."""
    home = os.path.realpath(os.path.expanduser("~"))
    return home if home != "/" and os.path.isdir(home) else None


def _home_view(home: str | None, shown: list[str]) -> list[str]:
    """The home hidden: an empty folder (made read-only last, see files) in which only the
    toolchains' places and the user's own `sandbox_read` ones (shown) are mounted, read-only."""
    if not home:
        return []
    args = ["--tmpfs", home]
    for place in shown:
        args += ["--ro-bind", os.path.realpath(place), place]
    return args


def _in_sight(hiding: list[str], home: str, shown: list[str]) -> list[str]:
    """Of the mounts that hide credential places (see _hidden), those the box would show: outside
    the hidden home, or in a place of it that is shown (~/.cargo/credentials.toml)."""
    kept = []
    at = 0
    while at < len(hiding):
        width = 2 if hiding[at] == "--tmpfs" else 3
        place = Path(hiding[at + width - 1])
        if not place.is_relative_to(home) or any(place.is_relative_to(p) for p in shown):
            kept += hiding[at : at + width]
        at += width
    return kept


def _shown(home: str, read: tuple[str, ...] = ()) -> list[str]:
    """The places of HOME_READ and of read that exist in the home, each before what it holds."""
    places = set()
    for place in [*HOME_READ, *read]:
        path = os.path.join(home, place[2:]) if place.startswith("~/") else os.path.abspath(place)
        if path.startswith(home + "/") and os.path.exists(path):
            places.add(os.path.normpath(path))
    return sorted(places, key=lambda path: Path(path).parts)


def _git_read_only(root: Path) -> list[str]:
    """The project's repositories read-only, each a mount point, so it can neither be written
    nor renamed away and replaced: the .git (a folder, or a gitfile and the gitdir and commondir
    it names), the nested repositories git finds (see _nested_read_only), and the folder
    core.hooksPath names."""
    gitdir, common, hooks = _git_places(root)
    places = {str(p) for p in (root / ".git", gitdir, common) if p and os.path.exists(p)}
    args = []
    for place in sorted(places):
        args += ["--ro-bind", place, place]
    return args + _nested_read_only(root) + _hooks_read_only(root, hooks, places)


def _git(root: Path, *args: str) -> str | None:
    """What git says on the user's repository, reading only; None when it fails or is missing."""
    env = project.git_env(GIT_OPTIONAL_LOCKS="0", LC_ALL="C")
    try:
        done = project.git(root, *args, env=env)
    except (OSError, subprocess.SubprocessError):
        return None
    return os.fsdecode(done.stdout) if done.returncode == 0 else None


def _git_places(root: Path) -> tuple[Path | None, Path | None, Path | None]:
    """The repository's gitdir, its commondir and the folder it takes hooks from (hooksPath),
    asked again only when the .git or the user's git config changed (the box cannot change them;
    a worktree's shared config, changed outside, is seen at amas's next start)."""
    marks = [root / ".git", *map(Path, ("~/.gitconfig", "~/.config/git/config"))]
    changed = []
    for mark in marks:
        with contextlib.suppress(OSError):
            info = mark.expanduser().lstat()
            changed += [str(mark), info.st_ino, info.st_mtime_ns]
    return _asked_places(str(root), tuple(changed))


@functools.lru_cache(maxsize=16)
def _asked_places(root: str, changed: tuple) -> tuple[Path | None, Path | None, Path | None]:
    """What git says of the repository at root (see _git_places)."""
    paths = "--git-dir", "--git-common-dir"
    said = _git(Path(root), "rev-parse", "--path-format=absolute", *paths)
    lines = said.splitlines() if said else []
    if len(lines) != 2:
        return None, None, None
    common = Path(lines[1])
    return Path(lines[0]), common, _hooks_path(Path(root), common)


def _hooks_path(root: Path, common: Path) -> Path:
    """The folder git takes hooks from: the one core.hooksPath names (amas's own -c, of scope
    "command", is not the repository's), else the common dir's hooks."""
    said = _git(root, "config", "--path", "--show-scope", "--get-all", "core.hooksPath") or ""
    lines = said.splitlines()
    named = [line.split("\t", 1)[1] for line in lines if not line.startswith("command\t")]
    return root / named[-1] if named and named[-1] else common / "hooks"


def _nested_read_only(root: Path) -> list[str]:
    """Each nested repository's .git read-only, in its folder bound to itself (a mount point: it
    cannot be renamed away and replaced), as are the folders above a gitlink: the user's `git
    status` goes into a gitlink's repository. A gitlink not checked out is read-only whole."""
    links, others = _nested(root)
    marks = {}
    for rel in links:
        marks.update((str(parent), "--bind") for parent in Path(rel).parents if str(parent) != ".")
    for rel in [*links, *others]:
        if os.path.lexists(root / rel / ".git"):
            marks[rel] = "--bind"
            marks[os.path.join(rel, ".git")] = "--ro-bind"
        else:
            marks[rel] = "--ro-bind"
    args = []
    for rel in sorted(marks, key=lambda rel: Path(rel).parts):  # what holds, before what it holds
        path = root / rel
        if (path.is_dir() and not path.is_symlink()) or (rel.endswith(".git") and path.exists()):
            args += [marks[rel], str(path), str(path)]
    return args


def _nested(root: Path) -> tuple[list[str], list[str]]:
    """The project's nested repositories, relative to it: the gitlinks in its index (submodules,
    and repositories staged as ones) and the untracked repositories git finds (not in ignored
    folders)."""
    listed = _git(root, "ls-files", "-z", "--others", "--exclude-standard") or ""
    others = [name.rstrip("/") for name in listed.split("\0") if name.endswith("/")]
    return list(_gitlinks(str(root), _index(root))), others


def _index(root: Path) -> tuple:
    """The identity of the index of the project's repository (None in it while there is none)."""
    gitdir = root / ".git"
    with contextlib.suppress(OSError, UnicodeDecodeError):
        if gitdir.is_file():  # a gitfile: `gitdir: <path>`, relative to the project
            gitdir = root / gitdir.read_text().removeprefix("gitdir:").strip()
        info = (gitdir / "index").stat()
        return str(gitdir), info.st_ino, info.st_mtime_ns, info.st_size
    return str(gitdir), None


@functools.lru_cache(maxsize=16)
def _gitlinks(root: str, index: tuple) -> tuple[str, ...]:
    """The paths of the gitlinks (mode 160000) in the index of the repository at root, read again
    only when the index changed (the box keeps it read-only)."""
    listed = _git(Path(root), "ls-files", "-z", "--stage") or ""
    return tuple(e.split("\t", 1)[1] for e in listed.split("\0") if e.startswith("160000 "))


def _hooks_read_only(root: Path, hooks: Path | None, gitdirs: set[str]) -> list[str]:
    """The folder core.hooksPath names, where it is in the project: read-only (husky's .husky/_:
    all of .husky, whose hook bodies its shims run); missing, an empty read-only stand-in."""
    if hooks is None or not hooks.is_relative_to(root) or hooks == root:
        return []
    if any(hooks.is_relative_to(gitdir) for gitdir in gitdirs):
        return []  # .git/hooks: read-only with the repository
    hooks = hooks.parent if hooks.name == "_" and hooks.parent != root else hooks
    if hooks.parent == root and hooks.name in HOOK_TOOLS:
        return []  # read-only with what steers (see _steering_read_only)
    if hooks.exists():
        return ["--ro-bind", str(hooks), str(hooks)]
    while not hooks.parent.exists():
        hooks = hooks.parent
    return _stand_in(str(hooks)) if os.access(root, os.W_OK) else []


def _steering_read_only(root: Path) -> list[str]:
    """What steers amas or the user's tools read-only (STEERING, HOOK_TOOLS), and the project
    config empty in the box (its key unreadable). A steering place that does not exist gets an
    empty read-only stand-in, so none can be made: bubblewrap leaves it on disk, and sandbox.run
    removes it after (see remove_stand_ins; one left by an amas killed mid-command goes after the
    next command)."""
    # bubblewrap makes them, in the box's user namespace: the folder must be writable, and ours
    # (as root in that namespace, a folder of another user's is not)
    stand_ins = os.access(root, os.W_OK) and os.stat(root).st_uid == os.geteuid()
    args = []
    for path in [str(root / name) for name in STEERING]:
        left = path.endswith(FILES) and os.path.isdir(path) and not os.listdir(path)
        if os.path.exists(path) and not left:
            args += ["--ro-bind", path, path]
        elif stand_ins and (left or not os.path.lexists(path)):
            args += _stand_in(path)
    for path in [str(root / name) for name in HOOK_TOOLS if (root / name).exists()]:
        args += ["--ro-bind", path, path]
    if (root / ".amas" / "config.yaml").is_file():
        args += ["--ro-bind", "/dev/null", str(root / ".amas" / "config.yaml")]
    return args


def _stand_in(path: str) -> list[str]:
    """An empty read-only folder where path is missing, so nothing of that name can be made:
    bubblewrap makes the folder on disk to mount it, and sandbox.run removes it after (see
    remove_stand_ins)."""
    return ["--tmpfs", path, "--remount-ro", path]


def remove_stand_ins(argv: list[str], root: Path) -> None:
    """The stand-ins bubblewrap made in the project for the box's mounts, removed while empty."""
    for at, arg in enumerate(argv[:-3]):
        path = argv[at + 1]
        stand_in = arg == "--tmpfs" and argv[at + 2 : at + 4] == ["--remount-ro", path]
        if stand_in and Path(path).is_relative_to(root) and Path(path) != root:
            with contextlib.suppress(OSError):
                os.rmdir(path)  # only if empty


def planted(root: Path, since: int) -> list[str]:
    """What a boxed command left that runs at the user's next ordinary action outside amas and
    that the box cannot stop, relative to the project: *.pth, sitecustomize.py or usercustomize.py
    made or changed in a virtual environment of the project, a new nested .git. since: when the
    command started (time.time_ns()); what the box keeps read-only cannot have changed."""
    found = []
    for path in [*_startup_files(root), *_git_folders(root)]:
        # a repository's .git folder changes whenever git locks its index: its HEAD is as old as it
        mark = os.path.join(path, "HEAD") if path.endswith(".git") and os.path.isdir(path) else path
        with contextlib.suppress(OSError):
            if os.lstat(mark).st_ctime_ns >= since - CLOCK:
                found.append(os.path.relpath(path, root))
    return sorted(found)


def _startup_files(root: Path) -> list[str]:
    """*.pth, sitecustomize.py and usercustomize.py in the site-packages of each virtual
    environment at the project's top (a folder holding pyvenv.cfg: .venv, venv, env)."""
    import glob

    found = []
    with contextlib.suppress(OSError):
        venvs = [e.path for e in os.scandir(root) if os.path.isfile(Path(e.path, "pyvenv.cfg"))]
        sites = [glob.glob(f"{glob.escape(venv)}/lib/python*/site-packages") for venv in venvs]
        for site in [path for paths in sites for path in paths]:
            names = os.listdir(site)
            found += [os.path.join(site, n) for n in names if n.endswith(".pth") or n in STARTUP]
    return found


def _git_folders(root: Path) -> list[str]:
    """The .git of the project, of its nested repositories (see _nested) and of its top folders (a
    repository there may be one git ignores)."""
    links, others = _nested(root) if os.path.exists(root / ".git") else ([], [])
    with contextlib.suppress(OSError):
        others += [e.name for e in os.scandir(root) if e.is_dir(follow_symlinks=False)]
    return [os.path.join(root, rel, ".git") for rel in dict.fromkeys(["", *links, *others])]


def planted_note(paths: list[str]) -> str:
    """The note a command's result ends with, naming what it left that runs outside amas."""
    if not paths:
        return ""
    shown = ", ".join(paths[:10]) + (f" and {len(paths) - 10} more" if len(paths) > 10 else "")
    return (
        "\n[left in the project, and run by python or git outside amas at their next start: "
        f"{shown}; look at them before you use that environment or repository]"
    )
