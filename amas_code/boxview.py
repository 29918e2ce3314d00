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
# bubblewrap's mount options and how many arguments each takes (see seen); those that mount
# something empty, or other than a host place, at their last one (MOUNTS)
ARITY = {"--bind": 2, "--ro-bind": 2, "--dev-bind": 2, "--ro-bind-data": 2, "--symlink": 2}
ARITY |= {"--tmpfs": 1, "--remount-ro": 1, "--dev": 1, "--proc": 1, "--size": 1, "--perms": 1}
MOUNTS = ("--tmpfs", "--dev", "--proc", "--ro-bind-data")
# the user's git config: what runs at every git command
GIT_HOME = ("~/.gitconfig", "~/.config/git")
# of a gitdir, what a commit writes (with its lock files): all a repository grant makes writable
WRITTEN = set(
    "objects refs logs index HEAD ORIG_HEAD FETCH_HEAD COMMIT_EDITMSG packed-refs MERGE_HEAD MERGE_MSG "
    "MERGE_MODE AUTO_MERGE CHERRY_PICK_HEAD REVERT_HEAD lfs".split()
)
# what git reads in a gitdir as its configuration or code: where missing under a repository grant,
# an empty read-only folder, or file, stands in ("." for commondir: git dies on an empty one)
GIT_FOLDERS = ("hooks", "info", "worktrees", "modules")
GIT_FILES = ("config", "config.worktree", "commondir", "objects/info/alternates")


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
    (read-only where it holds the home, see writable_root, and in plan mode) and one run's grant
    (sandbox.Box.grant), then the read-only set over every writable bind: credential places hidden,
    the repository and what steers amas or the user's tools read-only. One value, built from what
    is on disk now."""
    root = Path(root)
    writable = writable_root(root)
    hidden = _home() if writable else None  # else the project shows the home, read-only
    shown = _shown(hidden, read) if hidden else []
    folder = []
    if grant.startswith("/"):
        folder = [grant]
    places = [["--ro-bind", os.path.realpath(place), place] for place in shown]
    # plan mode: the project bound read-only
    args = _binds(root, writable and not plan, hidden, places + [["--bind", f, f] for f in folder])
    if hidden:  # of the credential places, only those the box shows need hiding
        hiding = _hidden() + _hidden(TOOL_CREDENTIALS)
        args += _in_sight(hiding, hidden, [*shown, str(root), *folder])
    else:  # the home is in sight: other tools' tokens and browser profiles hidden too
        args += _hidden() + _hidden(TOOL_CREDENTIALS)
    if writable and not plan:
        args += _repository(root, grant) + _steering_read_only(root)
    if plan and (root / ".amas" / "config.yaml").is_file():  # its key stays unreadable
        args += ["--ro-bind", "/dev/null", str(root / ".amas" / "config.yaml")]
    args += _git_outside(root, folder)
    if hidden:
        args += ["--remount-ro", hidden]
    return args


def _binds(root: Path, writable: bool, home: str | None, places: list[list[str]]) -> list[str]:
    """The home hidden (an empty folder, made read-only last), the project writable (read-only
    where it holds the home) and places (shown read-only, a folder granted for one run), each
    bound before what it holds. The read-only set comes after them all (see files)."""
    binds = []
    if home:
        binds.append(["--tmpfs", home])
    if writable:
        binds.append(["--bind", str(root), str(root)])
    elif str(root) != "/":  # / is there, read-only; bound again, it would bring the host's /proc
        binds.append(["--ro-bind", str(root), str(root)])
    args = []
    # each before what it holds; at one place, a grant after a place shown, the hidden home last
    rank = {"--ro-bind": 0, "--bind": 1, "--tmpfs": 2}
    for bind in sorted([*places, *binds], key=lambda bind: (Path(bind[-1]).parts, rank[bind[0]])):
        args += bind
    return args


def _git_outside(root: Path, folder: list[str]) -> list[str]:
    """In a folder granted for one run, what steers git from outside the project read-only: the
    user's git config and the folder core.hooksPath names (see grantable's refusal of a folder
    that holds them: this is the second line)."""
    places = [os.path.expanduser(p) for p in GIT_HOME]
    hooks = _git_places(root)[2]
    if hooks:
        places.append(str(hooks))
    args = []
    for place in places:
        inside = any(Path(place).is_relative_to(f) for f in folder)
        if inside and os.path.exists(place) and not Path(place).is_relative_to(root):
            args += ["--ro-bind", place, place]
    return args


def _repository(root: Path, grant: str) -> list[str]:
    """The repository read-only; for one run granted "repository", each of its gitdirs holds only
    what a commit writes (see _written_only), other repositories in the project staying read-only."""
    if grant != "repository":
        return _git_read_only(root)
    gitdir, common, hooks = _git_places(root)
    if not gitdir:
        return _nested_read_only(root)
    args = []
    if (root / ".git").is_file():  # a gitfile: where it points stays as it is
        args += ["--ro-bind", str(root / ".git"), str(root / ".git")]
    args += _nested_read_only(root)
    gitdirs = gitdirs_of(root)
    for place in gitdirs:
        args += _written_only(place)
    return args + _hooks_read_only(root, hooks, set(map(str, gitdirs)))


def seen(path: str, mounts: list[str]) -> tuple[str, str]:
    """How a box with these mounts (bubblewrap's arguments) shows a host path: "writable" (the
    host's, or a folder of the box's own bound there: its /tmp), "read-only" (the host's), "hidden"
    (an empty place stands for what the host has there, writable or not); and the place of the
    mount it is seen through."""
    where, source, writable = "/", "/", False
    at = 0
    while at < len(mounts) and mounts[at] != "--chdir":
        width = ARITY.get(mounts[at], 0)
        place = mounts[at + width]
        if width and (path == place or path.startswith(place.rstrip("/") + "/")):
            if mounts[at] == "--remount-ro":
                writable = writable and place != where
            elif mounts[at] in ("--bind", "--ro-bind", "--dev-bind"):
                where, source, writable = place, mounts[at + 1], mounts[at] != "--ro-bind"
            elif mounts[at] in MOUNTS:
                where, source, writable = place, "", mounts[at] != "--ro-bind-data"
        at += width + 1
    if writable and (source or where == "/tmp"):  # a fresh /tmp is the box's own too
        return "writable", where
    if source and os.path.realpath(source) == os.path.realpath(where):
        return "read-only", where
    return "hidden", where


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


def _in_sight(hiding: list[str], home: str, shown: list[str]) -> list[str]:
    """Of the mounts that hide credential places (see _hidden), those the box would show: outside
    the hidden home, in a place of it that is shown (~/.cargo/credentials.toml) or holding one
    (~/.ssh, were ~/.ssh/config listed in `sandbox_read`)."""
    kept = []
    at = 0
    while at < len(hiding):
        width = 2 if hiding[at] == "--tmpfs" else 3
        place = Path(hiding[at + width - 1])
        near = any(place.is_relative_to(p) or Path(p).is_relative_to(place) for p in shown)
        if not place.is_relative_to(home) or near:
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


def gitdirs_of(root: Path) -> list[Path]:
    """Every gitdir of the project's repository, each before what it holds: its own, the common one
    (a worktree's), the submodules' under the common dir's modules/ and a gitlink's own .git folder."""
    gitdir, common, _ = _git_places(root)
    if not gitdir or not common:
        return []
    found = {gitdir, common, *_modules(common / "modules")}
    for rel in _gitlinks(str(root), _index(root)):
        dot = root / rel / ".git"
        if dot.is_dir() and not dot.is_symlink():
            found.add(dot)
    return sorted(found, key=lambda path: path.parts)


def hooks_folder(root: Path) -> Path | None:
    """The folder git takes the project's hooks from (core.hooksPath's, wherever it is)."""
    return _git_places(root)[2]


def _modules(folder: Path, depth: int = 0) -> list[Path]:
    """The submodules' gitdirs under a modules/ folder (a name may hold slashes; a submodule's own
    modules/ holds its submodules'), at most 8 folders deep."""
    found = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            path = Path(entry.path)
            if depth > 8 or not entry.is_dir(follow_symlinks=False):
                continue
            if (path / "HEAD").is_file():
                found += [path, *_modules(path / "modules", depth + 1)]
            else:
                found += _modules(path, depth + 1)
    return found


def _written_only(gitdir: Path) -> list[str]:
    """A gitdir bound to itself (a mount point: it cannot be renamed away and replaced), in which
    only what a commit writes (WRITTEN, with lock files) stays writable: each other entry read-only,
    and what git reads as configuration or code given a read-only stand-in where missing."""
    args = ["--bind", str(gitdir), str(gitdir)]
    with contextlib.suppress(OSError):
        for name in sorted(os.listdir(gitdir)):
            if name.removesuffix(".lock") not in WRITTEN and not name.startswith("sharedindex."):
                args += ["--ro-bind", str(gitdir / name), str(gitdir / name)]
    alternates = gitdir / "objects" / "info" / "alternates"
    if os.path.lexists(alternates):
        args += ["--ro-bind", str(alternates), str(alternates)]
    # bubblewrap makes a stand-in on disk, in the box's user namespace: the gitdir must be ours
    if not os.access(gitdir, os.W_OK) or gitdir.stat().st_uid != os.geteuid():
        return args
    for name in [*GIT_FOLDERS, *GIT_FILES]:
        path = gitdir / name
        if not os.path.lexists(path) or _left(path):
            kind = name.rsplit("/")[-1]
            if name in GIT_FOLDERS:
                kind = "folder"
            args += ["--ro-bind", _source(kind), str(path)]
    return args


def _source(kind: str) -> str:
    """What stands in for a missing place of git's in the box, kept in amas's own state (which the
    box never shows): an empty folder, an empty file, or for commondir a file that holds "." (the
    gitdir itself: the same as none; git dies on an empty one). remove_stand_ins knows them."""
    path = Path.home() / ".amas" / "box" / kind
    with contextlib.suppress(OSError):
        if kind == "folder":
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        elif not path.is_file():
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            text = ""
            if kind == "commondir":
                text = ".\n"
            path.write_text(text)
    return str(path)


def _left(path: Path) -> bool:
    """A stand-in an amas killed mid-command left: an empty commondir (on which git dies)."""
    return path.name == "commondir" and path.is_file() and path.stat().st_size == 0


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
    """The stand-ins bubblewrap made for the box's mounts, removed while empty: folders in the
    project (see _stand_in) and git's places in a gitdir (see _written_only)."""
    sources = os.path.join(os.path.expanduser("~"), ".amas", "box") + "/"
    for at, arg in enumerate(argv[:-3]):
        path = argv[at + 1]
        stand_in = arg == "--tmpfs" and argv[at + 2 : at + 4] == ["--remount-ro", path]
        if stand_in and Path(path).is_relative_to(root) and Path(path) != root:
            with contextlib.suppress(OSError):
                os.rmdir(path)  # only if empty
        elif arg == "--ro-bind" and path.startswith(sources):
            _remove_empty(argv[at + 2])


def _remove_empty(path: str) -> None:
    """An empty folder or an empty file removed (a stand-in's mount point, left on disk)."""
    with contextlib.suppress(OSError):
        if os.path.isdir(path) and not os.path.islink(path):
            os.rmdir(path)
        elif os.path.isfile(path) and not os.path.islink(path) and os.path.getsize(path) == 0:
            os.unlink(path)


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
