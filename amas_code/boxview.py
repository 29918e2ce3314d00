"""What the box sees of the files, as bubblewrap's mount arguments built from what is on disk now:
of the home only the toolchains' places, the project writable (never the home or above it),
credential places and Unix sockets hidden, and in the project the repositories (nested ones and
the hooks folder too) and what steers amas or the user's tools read-only, with empty stand-ins
where those are missing. Also what a boxed command left that runs outside amas (planted)."""

import contextlib
import dataclasses
import errno
import functools
import os
from pathlib import Path

from amas_code import project, redact

RC_FILES = (
    "~/.bashrc ~/.bash_profile ~/.bash_login ~/.profile ~/.zshrc ~/.zprofile ~/.zshenv".split()
)
SKIP = {"/proc", "/sys", "/dev"}  # replaced whole in the box, not hidden one by one
# of the home, only these are in the box, read-only (with the user's own `sandbox_read` places):
# the toolchains; credential places among them stay hidden (redact.CREDENTIALS). Of git's config,
# a generated one (see _gitconfig)
HOME_READ = redact.TOOLCHAINS
# what the box shows of the user's git config: identity and core settings (an `url.insteadOf` or
# a credential helper's may hold a token)
GIT_SECTIONS = ("user.", "core.")
# a steering name that is a file's (AGENTS.md, .envrc, mise.toml): an empty folder of that name is
# a stand-in left behind
FILES = (".md", ".toml", ".yml", ".yaml", ".json", ".jsonc", ".lua", "rc", "-versions")
# other tools' tokens and browser profiles, and git's config (the generated one stands in for it):
# hidden too where the box shows the home (a read-only project that holds it); elsewhere the home
# is hidden whole
TOOL_CREDENTIALS = (
    "~/.codex ~/.claude ~/.claude.json ~/.cache/huggingface ~/.s3cfg ~/.mozilla ~/snap/firefox "
    "~/.config/google-chrome ~/.config/chromium ~/.config/BraveSoftware ~/snap/chromium "
    "~/.config/git"
).split()
STARTUP = ("sitecustomize.py", "usercustomize.py")  # with *.pth: what python runs at its start
# where a folder the walk after a command looks at is (see Tree): in a virtual environment, its
# site-packages, a dot-folder, a steering folder
VENV, SITE, DOTTED, STEERS = 1, 2, 4, 8
# where the sockets of the user's session are, and its credentials (podman's auth.json is in
# $XDG_RUNTIME_DIR): always hidden; the others where no seccomp filter refuses Unix sockets
RUNTIME = ("/run/user",)
UNIX_SOCKET_PLACES = ("/run/dbus", "/var/run/docker.sock", "/run/docker.sock")
LISTENING = (*RUNTIME, *UNIX_SOCKET_PLACES)  # where programs outside the box listen: no grant
# bubblewrap's mount options and how many arguments each takes (see seen); those that mount
# something empty, or other than a host place, at their last one (MOUNTS)
ARITY = {"--bind": 2, "--ro-bind": 2, "--dev-bind": 2, "--ro-bind-data": 2, "--symlink": 2}
ARITY |= {"--tmpfs": 1, "--remount-ro": 1, "--dev": 1, "--proc": 1, "--size": 1, "--perms": 1}
MOUNTS = ("--tmpfs", "--dev", "--proc", "--ro-bind-data")
# the user's git config: what runs at every git command
GIT_HOME = ("~/.gitconfig", "~/.config/git")
# of a gitdir, what a commit writes (with its lock files): all a repository grant makes writable
WRITTEN = set(
    "objects refs logs index HEAD ORIG_HEAD FETCH_HEAD COMMIT_EDITMSG packed-refs MERGE_HEAD "
    "MERGE_MSG MERGE_MODE AUTO_MERGE CHERRY_PICK_HEAD REVERT_HEAD lfs".split()
)
# what git reads in a gitdir as its configuration or code: where missing under a repository grant,
# an empty read-only folder, or file, stands in ("." for commondir: git dies on an empty one)
GIT_FOLDERS = ("hooks", "info", "worktrees", "modules")
GIT_FILES = ("config", "config.worktree", "commondir", "objects/info/alternates")


def unix_sockets_hidden(filtered: bool = False) -> list[str]:
    """The user's runtime folder (/run/user, $XDG_RUNTIME_DIR: its sockets and podman's
    credentials), hidden always; without a seccomp filter (filtered False) the places of the
    sockets that run programs outside the box too (the system bus, docker's). The private /tmp
    already hides X11's."""
    places = [*RUNTIME, os.environ.get("XDG_RUNTIME_DIR") or RUNTIME[0]]
    if not filtered:
        places += UNIX_SOCKET_PLACES
    args = []
    for place in dict.fromkeys(os.path.realpath(place) for place in places):
        if os.path.isdir(place):
            args += ["--tmpfs", place]
        elif os.path.exists(place):
            args += ["--ro-bind", "/dev/null", place]
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
    hidden = None  # the home, hidden; none where the project holds it (it shows it, read-only)
    shown = []
    if writable:
        hidden = _home()
    if hidden:
        shown = _shown(hidden, read)
    folder = []
    if grant.startswith("/"):
        folder = [grant]
    args = _binds(root, writable and not plan, hidden, _places(hidden, shown, folder))
    args += _credentials_hidden(hidden, [*shown, str(root), *folder])
    args += _inside(root, writable, grant, plan) + _git_outside(root, folder)
    if hidden:
        args += ["--remount-ro", hidden]
    return args


def _places(home: str | None, shown: list[str], folder: list[str]) -> list[list[str]]:
    """The binds besides the project's: the home's places shown read-only, git's identity (a copy
    without the tokens ~/.gitconfig may hold), and a folder granted for one run, writable."""
    places = [["--ro-bind", os.path.realpath(place), place] for place in shown]
    gitconfig = _gitconfig(home)
    if gitconfig:
        places.append(gitconfig)
    return places + [["--bind", f, f] for f in folder]


def _credentials_hidden(home: str | None, seen: list[str]) -> list[str]:
    """Credential places and other tools' tokens hidden: in a hidden home only those the box shows
    (in seen), else every one, and git's config over by amas's copy."""
    hiding = _hidden() + _hidden(TOOL_CREDENTIALS)
    if home:
        return _in_sight(hiding, home, seen)
    return hiding + _gitconfig(_home(), over=True)


def _inside(root: Path, writable: bool, grant: str, plan: bool) -> list[str]:
    """In a writable project, the repository and what steers read-only (but for a grant); in plan
    mode, where the project is read-only whole, the project config's key unreadable."""
    config = root / ".amas" / "config.yaml"
    if plan and config.is_file():
        return ["--ro-bind", "/dev/null", str(config)]
    if writable and not plan:
        return _repository(root, grant) + _steering_read_only(root)
    return []


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
    what a commit writes (see _written_only),
    other repositories in the project staying read-only."""
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


def _gitconfig(home: str | None, over: bool = False) -> list[str]:
    """The user's git config as the box shows it at ~/.gitconfig: a file amas writes (in
    ~/.amas/box/) holding only its GIT_SECTIONS, so `git config user.name` works and a token in an
    `url.insteadOf` or a credential helper's setting is not there; read-only. over: the home is in
    sight, read-only, where no file can be made: only over a ~/.gitconfig there is."""
    if not home or (over and not os.path.isfile(os.path.join(home, ".gitconfig"))):
        return []
    marks = []
    for mark in (".gitconfig", ".config/git/config"):
        with contextlib.suppress(OSError):
            info = os.stat(os.path.join(home, mark))
            marks += [mark, info.st_ino, info.st_mtime_ns, info.st_size]
    made = _generated_gitconfig(home, tuple(marks))
    if made and not os.path.isfile(made):  # removed since: written again
        _generated_gitconfig.cache_clear()
        made = _generated_gitconfig(home, tuple(marks))
    if not made:
        return []
    return ["--ro-bind", made, os.path.join(home, ".gitconfig")]


@functools.lru_cache(maxsize=4)
def _generated_gitconfig(home: str, marks: tuple) -> str:
    """The generated git config's path (see _gitconfig), written again only when the user's
    changed (marks); "" where it cannot be written."""
    said = project.read_git(Path(home), "config", "--global", "--includes", "--list", "-z") or ""
    sections = {}
    for entry in said.split("\0"):
        key, _, value = entry.partition("\n")
        section, _, name = key.rpartition(".")
        if key.startswith(GIT_SECTIONS) and name:
            sections.setdefault(section, []).append(f"\t{name} = {_quoted(value)}\n")
    text = "".join(f"[{_section(s)}]\n" + "".join(lines) for s, lines in sections.items())
    path = Path(home, ".amas", "box", "gitconfig")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        project.write(path, [text.encode()], mode=0o600)
    except OSError:
        return ""
    return str(path)


def _section(name: str) -> str:
    """A section's header as git writes it: `core`, or `branch "main"` for branch.main."""
    head, _, sub = name.partition(".")
    if not sub:
        return head
    return f"{head} {_quoted(sub)}"


def _quoted(value: str) -> str:
    """A value in double quotes, escaped as git's config reads it."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\n", "\\n").replace("\t", "\\t") + '"'


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
    (a worktree's), the submodules' under the common dir's modules/ and a gitlink's own .git
    folder."""
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
    """What git says on the user's repository, reading only (see project.read_git)."""
    return project.read_git(root, *args)


def _git_places(root: Path) -> tuple[Path | None, Path | None, Path | None]:
    """The repository's gitdir, its commondir and hooks folder (see project.git_places)."""
    return project.git_places(root)


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
    if hooks.name == "_" and hooks.parent != root:
        hooks = hooks.parent
    if hooks.parent == root and hooks.name in project.STEERING:
        return []  # read-only with what steers (see _steering_read_only)
    if hooks.exists():
        return ["--ro-bind", str(hooks), str(hooks)]
    while not hooks.parent.exists():
        hooks = hooks.parent
    return _made_stand_in(str(hooks))


def _steering_read_only(root: Path) -> list[str]:
    """What steers amas or the user's tools read-only (see _steering), and the project config
    empty in the box (its key unreadable). One that does not exist gets an empty read-only
    stand-in, so none can be made: amas makes it, and sandbox.run removes it after (see
    remove_stand_ins; one left by an amas killed mid-command goes after the next command)."""
    args = []
    try:
        for path, stand_in in _steering(root):
            args += _read_only(root, path, stand_in)
    except PermissionError:  # the command is not run: the stand-ins made so far go
        remove_stand_ins(args, root)
        raise
    if (root / ".amas" / "config.yaml").is_file():
        args += ["--ro-bind", "/dev/null", str(root / ".amas" / "config.yaml")]
    return args


def _read_only(root: Path, path: str, stand_in: bool) -> list[str]:
    """One steering place read-only; missing (or a stand-in left behind, or a link to nothing: a
    write would make what it leads to), a stand-in where one is due."""
    left = path.endswith(FILES) and _empty_folder(path)
    if os.path.exists(path) and not left:
        return ["--ro-bind", path, path]
    if stand_in and (left or not os.path.lexists(path)):
        return _made_stand_in(path)
    if stand_in and Path(os.path.realpath(path)).is_relative_to(root):
        return _made_stand_in(os.path.realpath(path))
    return []


def _steering(root: Path) -> list[tuple[str, bool]]:
    """Each place of what steers at the project's top (project.STEERING, what AGENTS.md links to)
    whose folder exists, and whether a stand-in takes its place where it is missing: amas's, the
    editors' and the environment managers' always, a hook manager's where its hooks are installed
    (what it reads runs at the next commit)."""
    hooks = project.git_places(root)[2]
    installed = [project.HOOK_MANAGERS[name] for name in project.installed(hooks)]
    stand_ins = {*project.AMAS, *project.TOOLS, *(name for names in installed for name in names)}
    found = [(str(root / name), name in stand_ins) for name in project.STEERING]
    target = project.agents_target(root)
    if target is not None:
        found.append((str(target), False))
    return [(path, stand_in) for path, stand_in in found if os.path.isdir(os.path.dirname(path))]


def _empty_folder(path: str) -> bool:
    """Whether path is a folder that holds nothing (one amas cannot read is not known empty)."""
    try:
        return os.path.isdir(path) and not os.listdir(path)
    except OSError:
        return False


def _made_stand_in(path: str) -> list[str]:
    """A stand-in (see _stand_in) whose folder amas makes: as root, the box's own root cannot make
    one in a checkout of another user's, nor can bwrap. Where amas cannot make it either for want
    of permission, neither can the box (the same user, with no capabilities): none is needed.
    Otherwise the command is not run (PermissionError): what steers is never left open."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as e:
        if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return []
        said = f"the box could not keep {path} from being made ({e.strerror})"
        raise PermissionError(f"{said}, so the command was not run") from e
    return _stand_in(path)


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


def now() -> int:
    """Now, by the clock files' times come from (the kernel's coarse clock, up to a tick behind
    time_ns()): a file made or changed after this has a ctime of at least this. Read as the time
    a file made now has."""
    fd = os.memfd_create("amas-clock")
    try:
        return os.fstat(fd).st_ctime_ns
    finally:
        os.close(fd)


def planted(root: Path, since: int, tree: "Tree | None" = None) -> list[str]:
    """What a boxed command left that would run at the user's next ordinary action outside amas,
    relative to the project, found as git, python and the user's tools find it, in every folder
    (git-ignored ones too): a repository made or changed (git's own test: HEAD, objects and refs;
    a .git or a bare one), a virtual environment's startup files made or changed (in a folder with
    pyvenv.cfg: *.pth, sitecustomize.py, usercustomize.py), what steers (project.NAMES), and,
    outside what git ignores, a dot-file or a file in a dot-folder made or changed. since: when the
    command started (see now); tree: what the walk after the session's last command found (see
    Tree), brought up to date. The project's own repository is read-only in the box."""
    if tree is None or tree.root != str(root):
        tree = Tree(str(root))
    own = {str(place) for place in project.git_places(root)[:2] if place}
    found, dotted = tree.changes(since, own)
    ignored = project.ignored(root, sorted({*dotted, *tree.fresh}))
    tree.forget(ignored)
    return sorted({*found, *(rel for rel in dotted if rel not in ignored)})


@dataclasses.dataclass
class Tree:
    """The project as the walk after a command last found it: each folder's ctime (which a command
    cannot set back: it changes whenever a name in the folder is made, removed or renamed), and
    the files that can change in place and matter (dot-files, what steers, a venv's startup
    files, a repository's config and hooks). The first walk lists every folder; each after it
    lists only the folders whose ctime moved, and looks at the files it keeps (one lstat each)."""

    root: str
    folders: dict = dataclasses.field(default_factory=dict)  # path -> (ctime, rel, Place bits)
    files: dict = dataclasses.field(default_factory=dict)  # path -> (what to name, always)
    # of one walk (see changes): when the command started, the project's own gitdirs, and the
    # files made or changed in a dot-folder then
    since: int = 0
    own: set = dataclasses.field(default_factory=set)
    dotted: set = dataclasses.field(default_factory=set)
    fresh: dict = dataclasses.field(default_factory=dict)  # dot-files kept now: rel -> path

    def changes(self, since: int, own: set[str]) -> tuple[set[str], set[str]]:
        """What changed since: (named whatever git ignores, named unless it ignores them)."""
        self.since, self.own, self.dotted, self.fresh = since, own, set(), {}
        found = set()
        stack = []
        if not self.folders:  # the session's first walk: every folder
            stack.append((self.root, "", 0))
        for path, (ctime, rel, place) in list(self.folders.items()):
            now = _ctime(path)
            if now is None:
                del self.folders[path]
            elif now != ctime:
                stack.append((path, rel, place))
        while stack:
            stack += self.folder(*stack.pop())
        for path, (name, always) in list(self.files.items()):
            now = _ctime(path, follow=always)
            if now is None:
                del self.files[path]
            elif now >= since and always:
                found.add(name)
            elif now >= since:
                self.dotted.add(name)
        return found, self.dotted

    def folder(self, path: str, rel: str, place: int) -> list[tuple]:
        """One folder listed: its files to keep, and the folders in it not known yet, to walk."""
        ctime = _ctime(path)
        try:
            with os.scandir(path) as listing:
                entries = list(listing)
        except OSError:
            return []
        self.folders[path] = (ctime, rel, place)
        names = {entry.name for entry in entries}
        # a repository, by git's own test: a HEAD, and objects and refs here or in its commondir
        if "HEAD" in names and ({"objects", "refs"} <= names or "commondir" in names):
            if path not in self.own:
                self.repository(path, rel)
            return []  # not walked into
        if "pyvenv.cfg" in names:
            place |= VENV
            self.files[os.path.join(path, "pyvenv.cfg")] = (f"{rel}/pyvenv.cfg".lstrip("/"), True)
        if place & VENV and os.path.basename(path) == "site-packages":
            place |= SITE
        # in a dot-folder changed now, each file made or changed in it (atomic writes too)
        new = bool(place & DOTTED) and (ctime or 0) >= self.since
        folders = [self.entry(entry, rel, place, new) for entry in entries]
        return [folder for folder in folders if folder and folder[0] not in self.folders]

    def entry(self, entry: os.DirEntry, rel: str, place: int, new: bool) -> tuple | None:
        """A folder to walk (its path, its rel and what it is in), or a file kept (None)."""
        name = entry.name.lower()
        path = f"{rel}/{entry.name}".lstrip("/")
        steers = name in project.NAMES or name.endswith(project.SUFFIXES)
        if entry.is_dir(follow_symlinks=False):
            place &= ~SITE
            if steers:
                place |= STEERS
            if name.startswith("."):
                place |= DOTTED
            return (entry.path, path, place)
        startup = place & SITE and (name.endswith(".pth") or name in STARTUP)
        # a .git file anywhere: git follows it to the repository it names
        if steers or place & STEERS or startup or name == ".git":
            self.files[entry.path] = (path, True)
        elif name.startswith("."):
            self.files[entry.path] = (path, False)
            self.fresh[path] = entry.path
        elif new and (_ctime(entry.path) or 0) >= self.since:
            self.dotted.add(path)
        return None

    def forget(self, ignored: set[str]) -> None:
        """The dot-files kept in this walk that git ignores, no longer kept: they are never named
        (a build's outputs, node_modules), so no walk after looks at them."""
        for rel in ignored:
            self.files.pop(self.fresh.get(rel, ""), None)

    def repository(self, gitdir: str, rel: str) -> None:
        """A repository's places that decide what git runs, kept: HEAD (new with it), config,
        commondir, the hooks folder and each hook; and the config and hooks of the common dir it
        names, where git reads them."""
        common = gitdir
        with contextlib.suppress(OSError, UnicodeDecodeError):
            with open(os.path.join(gitdir, "commondir"), encoding="utf-8") as named:
                common = os.path.normpath(os.path.join(gitdir, named.read().strip()))
        marks = [os.path.join(gitdir, name) for name in ("HEAD", "commondir")]
        for folder in dict.fromkeys([gitdir, common]):
            marks += [os.path.join(folder, name) for name in ("config", "hooks")]
            with contextlib.suppress(OSError):
                marks += [entry.path for entry in os.scandir(os.path.join(folder, "hooks"))]
        for mark in marks:
            if os.path.lexists(mark):
                self.files[mark] = (rel, True)


def _ctime(path: str, follow: bool = False) -> int | None:
    """A file's or folder's ctime (ns), or None where there is none; follow: a link's or what it
    leads to's, whichever changed last (an .envrc linked to a script runs that script)."""
    try:
        ctime = os.lstat(path).st_ctime_ns
    except OSError:
        return None
    if follow and os.path.islink(path):
        with contextlib.suppress(OSError):
            ctime = max(ctime, os.stat(path).st_ctime_ns)
    return ctime


def planted_note(paths: list[str]) -> str:
    """The note a command's result ends with, naming what it left that runs outside amas."""
    if not paths:
        return ""
    shown = ", ".join(paths[:10])
    if len(paths) > 10:
        shown += f" and {len(paths) - 10} more"
    return (
        "\n[left in the project, and run outside amas by git, python, your editor or your shell "
        f"at your next use of them: {shown}; look at them before you do]"
    )
