"""Running a shell command: in a bubblewrap box where it works, with limits, its output read in bounded memory."""

import contextlib
import dataclasses
import functools
import os
import re
import selectors
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from amas_code import cgroups, effects, netstack, project, redact, seccomp

KEEP = 100_000  # bytes kept of each stream's head and of its tail; the middle is counted, not kept
RC_FILES = (
    "~/.bashrc ~/.bash_profile ~/.bash_login ~/.profile ~/.zshrc ~/.zprofile ~/.zshenv".split()
)
SKIP = {"/proc", "/sys", "/dev"}  # replaced whole in the box, not hidden one by one
NETWORK = re.compile(  # what a command says when it has no network
    r"Temporary failure in name resolution|Could not resolve host|Name or service not known|"
    r"Network is unreachable|getaddrinfo|No address associated with hostname|Connection refused|"
    r"Failed to establish a new connection|Couldn't connect to server|unable to access 'https?:"
)
READ_ONLY = re.compile(  # `touch: cannot touch '/x': Read-only…`, `[Errno 30] Read-only file system: '/x'`
    r"([^\s'\"`‘’]+)['\"`’]?: Read-only file system|Read-only file system: ['\"`‘]?([^\s'\"`’]+)"
    r"|could not (?:write|lock) config file ([^\s:]+)"
)
# of the home, only these are in the box, read-only (with the user's own `sandbox_read` places):
# the toolchains and git's identity; credential places among them stay hidden (redact.CREDENTIALS)
HOME_READ = (
    "~/.local/bin ~/.local/lib ~/.local/share/pipx ~/.local/share/uv ~/.cargo ~/.rustup ~/.pyenv "
    "~/.nvm ~/.npm ~/.cache/pip ~/.cache/uv ~/.gitconfig ~/.config/git"
).split()
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
# git run by amas on the user's repository, reading only: nothing of the repository's runs
STARTUP = ("sitecustomize.py", "usercustomize.py")  # with *.pth: what python runs at its start
CLOCK = 20_000_000  # ns: files' times come from the kernel's coarse clock, a tick behind time_ns()
SANDBOX_LINE = "commands run in a sandbox (bubblewrap): {net}, writes only in the project{weaker}"
WEAKER = "; weaker: no seccomp filter (install libseccomp2), only the known Unix sockets are hidden"
UNIX_SOCKET_PLACES = ("/run/user", "/run/dbus", "/var/run/docker.sock", "/run/docker.sock")
UNBOXED_LINE = "no sandbox: {why}; every command will be asked, allow rules off"


@dataclass(frozen=True)
class Box:
    """How a command is boxed: with the network or not, and the limits it runs under."""

    network: bool = False
    procs: int = 512  # processes in the box: a fork bomb stops here
    memory: int = 0  # bytes a process may allocate (0: three quarters of the machine's memory)
    file_size: int = 2 << 30  # bytes one file may grow to: `yes > file` stops here
    tmp: int = 256 << 20  # bytes of the private /tmp and of /dev/shm, which live in memory
    scratch: str = ""  # the session's folder the box sees as /tmp ("": a fresh /tmp each command)
    # more places of the home shown read-only (the user's `sandbox_read`)
    read: tuple[str, ...] = ()
    # one run's capability beyond the box, granted by the person: "network", "repository" (.git
    # writable, its hooks and config not) or a folder's absolute path (writable)
    grant: str = ""

    def close(self) -> None:
        """The session's /tmp removed: amas is leaving."""
        if self.scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)


def box(config: dict) -> Box | None:
    """The box commands run in under this config, or None when they run unboxed."""
    if status(config)[0] != "on":
        return None
    read = tuple(config.get("sandbox_read") or ())
    return Box(network=bool(config.get("sandbox_network")), read=read)


def session(config: dict) -> Box | None:
    """The box of one amas session: its commands share one /tmp, a folder in ~/.amas/tmp made at the
    first command and removed by Box.close."""
    import secrets

    found = box(config)
    if found is None:
        return None
    name = f"{os.getpid()}-{secrets.token_hex(4)}"
    return dataclasses.replace(found, scratch=str(Path.home() / ".amas" / "tmp" / name))


def status(config: dict) -> tuple[str, str]:
    """The mode in force (on, off, unavailable) and one line saying so to the user."""
    if config.get("sandbox") in ("off", False):  # YAML reads a bare `off` as false
        return "off", UNBOXED_LINE.format(why="sandbox is off in the config")
    why = probe()
    if why:
        return "unavailable", UNBOXED_LINE.format(why=why)
    net = "no network"
    if config.get("sandbox_network"):
        net = (
            "with the network"
            if project.program(netstack.NETWORK_STACK)
            else f"no network ({netstack.NETWORK_STACK} missing)"
        )
    return "on", SANDBOX_LINE.format(net=net, weaker="" if seccomp.program() else WEAKER)


def bwrap() -> str | None:
    """bubblewrap, which starts every box, itself outside one: never the project's."""
    return project.program("bwrap")


@functools.cache
def probe() -> str:
    """Why the box cannot run here, or "" when it can (tried once per process: ~20 ms)."""
    if not bwrap():
        return "bwrap not found (install bubblewrap and util-linux)"
    if not project.program("prlimit"):
        return "prlimit not found (install bubblewrap and util-linux)"
    # its own user namespace, as root too: without one bwrap leaves /proc/sys writable to root
    trial = [bwrap(), "--unshare-user", "--ro-bind", "/", "/", "--unshare-pid", "--unshare-net"]
    trial += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "true"]
    try:
        done = subprocess.run(trial, capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bwrap cannot run ({e})"
    if done.returncode:
        said = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no reason given"]
        return f"bwrap cannot run here (user namespaces off?): {said[0]}"
    return ""


def refused(result: str) -> list[str]:
    """What the box may have refused a failed command, as the grants that could let it run once
    more: "network", "repository", "folder". The output only decides what is offered: which folder
    becomes writable is the person's to say (see grantable), never the command's."""
    if _succeeded(result):
        return []
    # what it printed, not the `$ command` line
    said = result.partition("\n")[2] if result.startswith("$ ") else result
    offers = ["network"] * bool(NETWORK.search(said))
    place = Path(read_only_repository(said) or "")
    # its hooks and config stay read-only in every grant: the model changes them with its edit tools
    git_data = ".git" in place.parts and "hooks" not in place.parts and place.name != "config"
    offers += ["repository"] * git_data
    found = _read_only(said)
    path = (found[1] or found[2] or found[3]) if found else ""
    if path.startswith(("/", "~")) and ".git" not in Path(path).parts:
        offers.append("folder")
    return offers


def grantable(folder: str, root: Path) -> str:
    """The folder a person typed, as the absolute path a grant makes writable for one run; "" when
    it may not be: missing, the project's own (already writable), the home, / or above the home,
    a credential place, amas's own state."""
    path = os.path.realpath(os.path.expanduser(folder.strip()))
    credentials = [os.path.realpath(os.path.expanduser(c)) for c in redact.CREDENTIALS]
    bad = not os.path.isdir(path) or not writable_root(Path(path)) or path.startswith("/proc")
    bad = bad or any(path == c or path.startswith(c + "/") for c in credentials)
    inside = path == str(root) or path.startswith(str(root) + "/")
    return "" if bad or inside else path


def read_only_repository(result: str) -> str | None:
    """The place in a git repository a finished command failed to write, or None: the box keeps
    the repository read-only, so `git commit` or `git add` fails in it (see _git_read_only)."""
    if _succeeded(result):
        return None
    for line in result.splitlines():
        found = READ_ONLY.search(line[-1000:]) if "Read-only file system" in line else None
        path = next(filter(None, found.groups()), "") if found else ""
        if ".git" in Path(path).parts:
            return path
    return None


def _succeeded(result: str) -> bool:
    """Whether a command's result ends with exit code 0."""
    return result[result.rfind("[exit code ") :].startswith("[exit code 0]")


def _read_only(result: str) -> re.Match | None:
    """The first "Read-only file system" complaint, looked for only in the lines that say so (a long
    line of output would make the pattern quadratic)."""
    marks = ("Read-only file system", "config file")
    said = [line[-1000:] for line in result.splitlines() if any(m in line for m in marks)]
    return next(filter(None, map(READ_ONLY.search, said)), None)


def run(command: effects.Command, root: Path, env: dict, box: Box | None = None, watch=None) -> str:
    """Run a shell line in root (boxed when box is given); stdout, stderr and exit code, each chunk
    also given to watch(text) as it comes. Whatever it started is gone when it returns."""
    import psutil

    _harden()
    before = {p.pid for p in psutil.Process().children()}
    box = _ready(box)
    started = time.time_ns()
    proc = _start(command.line, Path(root), env, box)
    try:
        out, err, note = _collect(proc, command.timeout, before, watch)
        note += _tidy_tmp(box)
    finally:  # also on Ctrl+C
        _kill(proc.pid, before)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(2)  # killed: its exit code is the signal's
        _remove_stand_ins(proc.args, Path(root))
    note += _planted_note(planted(Path(root), started)) if box else ""
    parts = [f"$ {command.line}", out.rstrip(), f"[stderr]\n{err.rstrip()}" if err.strip() else ""]
    return "\n".join(p for p in [*parts, f"[exit code {proc.returncode}]{note}"] if p)


def _start(command: str, root: Path, env: dict, box: Box | None) -> subprocess.Popen:
    """The shell line started, boxed or not, in its own session: a timeout or Ctrl+C kills all it started."""
    argv, groups = ["/bin/sh", "-c", command], cgroups.limited(box) if box else []
    given, kept = _descriptors(box)
    try:
        proc = subprocess.Popen(
            _bwrap(root, box, given) + _limits(box) + argv if box else argv,
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            pass_fds=tuple(given.values()),
            preexec_fn=functools.partial(cgroups.child, groups),
        )
    finally:  # the box's ends are the box's alone; amas's start the network (or see bwrap fail)
        for fd in given.values():
            os.close(fd)
        netstack.start(kept)
    return proc


def _bwrap(root: Path, box: Box, fds: dict[str, int]) -> list[str]:
    """bubblewrap's arguments: / read-only, a private /tmp, the files' view (see files), then the
    process side (see _process)."""
    args = [bwrap() or "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    args += _tmp(box) + files(root, box)
    args += [] if "seccomp" in fds else _unix_sockets_hidden()
    return args + ["--chdir", str(root)] + _process(box, fds)


def _process(box: Box, fds: dict[str, int]) -> list[str]:
    """The box's process side, given after its mounts: its own namespaces (a user namespace also as
    root, a network one always), /proc/sys read-only, a sized /dev/shm in a read-only /dev, and the
    descriptors bwrap reads (the seccomp filter; the network stack's start: --info-fd, --block-fd)."""
    args = ["--ro-bind", "/proc/sys", "/proc/sys"]
    args += ["--size", str(box.tmp), "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
    args += ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-net"]
    args += ["--new-session", "--die-with-parent", "--cap-drop", "ALL"]
    for name, fd in fds.items():
        args += [f"--{name}", str(fd)]
        # the box's resolver: slirp4netns's, for a host that resolves on its own loopback
        args += ["/etc/resolv.conf"] if name == "ro-bind-data" else []
    return args


def _tmp(box: Box) -> list[str]:
    """The box's /tmp: the session's folder, or a fresh tmpfs of the box's size."""
    if box.scratch:
        return ["--bind", box.scratch, "/tmp"]
    return ["--size", str(box.tmp), "--tmpfs", "/tmp"]


def _ready(box: Box | None) -> Box | None:
    """The box with its session folder made (the first time, with those of dead sessions swept);
    where it cannot be made, the box has a fresh /tmp each command."""
    if not box or not box.scratch or os.path.isdir(box.scratch):
        return box
    folder = Path(box.scratch)
    try:
        folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        _sweep_scratch(folder.parent)
        folder.mkdir(mode=0o700)
    except OSError:
        return dataclasses.replace(box, scratch="")
    return box


def _sweep_scratch(base: Path) -> None:
    """The /tmp folders of sessions whose amas was killed with -9, removed."""
    import psutil

    for stale in base.glob("*-*"):
        pid = stale.name.split("-")[0]
        if pid.isdigit() and not psutil.pid_exists(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)


def _tidy_tmp(box: Box | None) -> str:
    """A note when the session's /tmp grew past the box's size: it is emptied (a folder on disk has no
    size of its own; a command's files stay capped one by one)."""
    if not box or not box.scratch:
        return ""
    size = 0
    for folder, _, files in os.walk(box.scratch):
        for name in files:
            with contextlib.suppress(OSError):
                size += os.lstat(os.path.join(folder, name)).st_blocks * 512
    if size <= box.tmp:
        return ""
    shutil.rmtree(box.scratch, ignore_errors=True)
    with contextlib.suppress(OSError):
        os.mkdir(box.scratch, 0o700)
    return f"\n[/tmp held {size >> 20} MB, more than {box.tmp >> 20} MB: it was emptied]"


def _unix_sockets_hidden() -> list[str]:
    """Without a seccomp filter: the places of the sockets that run programs outside the box (the
    session bus, systemd's, docker's), hidden. The private /tmp already hides X11's."""
    args, own = [], os.environ.get("XDG_RUNTIME_DIR")  # where it is not under /run/user
    for place in [*UNIX_SOCKET_PLACES, *([own] if own else [])]:
        path = os.path.realpath(place)
        if os.path.isdir(path):
            args += ["--tmpfs", path]
        elif os.path.exists(path):
            args += ["--ro-bind", "/dev/null", path]
    return args


def _descriptors(box: Box | None) -> tuple[dict[str, int], tuple[int, int] | None]:
    """The descriptors the box is given, by bwrap's option, and those amas keeps to start the
    network stack: the read end of --info-fd and the write end of --block-fd."""
    given, kept = {}, None
    program = seccomp.program() if box else b""
    if program:
        given["seccomp"] = _data(program)
    online = box and (box.network or box.grant == "network")
    if online and project.program(netstack.NETWORK_STACK):
        info, block = os.pipe(), os.pipe()
        given.update({"info-fd": info[1], "block-fd": block[0]})
        kept = (info[0], block[1])
        if netstack.loopback_resolver(Path("/etc/resolv.conf")):  # systemd-resolved's 127.0.0.53
            given["ro-bind-data"] = _data(netstack.SLIRP_RESOLVER.encode())
    return given, kept


def _data(data: bytes) -> int:
    """A file holding data, at its start, for bwrap to read to its end."""
    fd = os.memfd_create("amas-box", 0)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


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


def files(root: Path, box: Box) -> list[str]:
    """What the box sees of the files, as bubblewrap's arguments after / read-only and /tmp: of
    the home only the toolchains' places, the project writable (read-only where it holds the home,
    see writable_root), credential places hidden, and in the project the repository and what
    steers amas or the user's tools read-only. One value, built from what is on disk now."""
    root = Path(root)
    writable = writable_root(root)
    hidden = _home() if writable else None  # else the project shows the home, read-only
    shown = _shown(hidden, box.read) if hidden else []
    args = _home_view(hidden, shown)
    if writable:
        args += ["--bind", str(root), str(root)]
    elif str(root) != "/":  # / is there, read-only; bound again, it would bring the host's /proc
        args += ["--ro-bind", str(root), str(root)]
    if hidden:  # of the credential places, only those the box shows need hiding
        args += _in_sight(_hidden(), hidden, [*shown, str(root)])
    else:  # the home is in sight: other tools' tokens and browser profiles hidden too
        args += _hidden() + _hidden(TOOL_CREDENTIALS)
    if writable:
        args += _repository(root, box.grant) + _steering_read_only(root)
    if box.grant.startswith("/"):  # a folder the person made writable for one run
        args += ["--bind", box.grant, box.grant]
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
    kept, at = [], 0
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
    empty read-only stand-in, so none can be made: bubblewrap leaves it on disk, and run()
    removes it after (see _remove_stand_ins; one an amas killed mid-command left is removed after the next)."""
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
    bubblewrap makes the folder on disk to mount it, and run() removes it after (see _remove_stand_ins)."""
    return ["--tmpfs", path, "--remount-ro", path]


def _remove_stand_ins(argv: list[str], root: Path) -> None:
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


def _planted_note(paths: list[str]) -> str:
    """The note a command's result ends with, naming what it left that runs outside amas."""
    if not paths:
        return ""
    shown = ", ".join(paths[:10]) + (f" and {len(paths) - 10} more" if len(paths) > 10 else "")
    return (
        "\n[left in the project, and run by python or git outside amas at their next start: "
        f"{shown}; look at them before you use that environment or repository]"
    )


def _limits(box: Box) -> list[str]:
    """prlimit run inside the box: processes are counted in the box's own user namespace, so the user's other
    processes do not count against it (as root the cgroup is what holds, see cgroups.limited)."""
    memory = box.memory or cgroups.memory() * 3 // 4
    limits = [f"--nproc={box.procs}", f"--data={memory}", f"--fsize={box.file_size}", "--core=0"]
    # by its path: a prlimit of the project's, first on PATH, would run the command without limits
    return [project.program("prlimit") or "prlimit", *limits, "--"]


def _harden() -> None:
    """Orphans of a command come back to us, to be killed; and amas's /proc files (its first environment, which
    holds the keys kept from commands) are closed to them (Linux; elsewhere nothing happens)."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        libc = ctypes.CDLL(None)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: /proc/<amas>/environ is root's


class Capped:
    """A stream's bytes in bounded memory: its head and its tail, and a count of what was cut between."""

    def __init__(self, keep: int = KEEP, watch=None):
        self.keep = keep
        self.head = bytearray()
        self.tail = bytearray()
        self.cut = 0
        self.watch = watch  # shown live, as it comes

    def add(self, data: bytes) -> None:
        if self.watch:
            self.watch(data.decode(errors="replace"))
        room = max(0, self.keep - len(self.head))
        self.head += data[:room]
        self.tail += data[room:]
        if len(self.tail) > 2 * self.keep:  # trimmed in batches: cheap, and never above 3 × keep
            drop = len(self.tail) - self.keep
            self.cut += drop
            del self.tail[:drop]

    def text(self) -> str:
        cut = f"\n[… {self.cut:,} bytes of output cut …]\n".encode() if self.cut else b""
        raw = bytes(self.head + cut + self.tail).decode(errors="replace")
        return raw.replace("\r\n", "\n").replace("\r", "\n")


def _collect(
    proc: subprocess.Popen, timeout: float, before: set[int], watch
) -> tuple[str, str, str]:
    """The command's output, and a note if it ran past its timeout and was killed with its children."""
    out = Capped(watch=watch)
    err = Capped(watch=watch)
    note = ""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as streams:
        streams.register(proc.stdout, selectors.EVENT_READ, out)
        streams.register(proc.stderr, selectors.EVENT_READ, err)
        while streams.get_map():
            _read(streams, 0.1)
            if not streams.get_map() or (proc.poll() is None and time.monotonic() < deadline):
                continue
            if proc.poll() is None and not note:
                note = f"\n[timed out after {timeout}s; the command and its children were killed]"
            # out of reach: it left its session, and no subreaper took it
            elif time.monotonic() > deadline + 1:
                note += f"\n[still held open after {timeout}s by a process it started that amas cannot stop]"
                break
            _kill(proc.pid, before)
    note += _wait(proc, deadline, timeout) if not note else ""
    return out.text(), err.text(), note


def _read(streams: selectors.BaseSelector, wait: float) -> None:
    """Whatever the command wrote meanwhile; a stream at its end is closed and forgotten."""
    for key, _ in streams.select(wait):
        data = os.read(key.fd, 1 << 16)
        if data:
            key.data.add(data)
        else:
            streams.unregister(key.fileobj)
            key.fileobj.close()


def _wait(proc: subprocess.Popen, deadline: float, timeout: float) -> str:
    """The command's end, after its output closed (it may close it early and run on)."""
    try:
        proc.wait(max(0.0, deadline - time.monotonic()))
        return ""
    except subprocess.TimeoutExpired:
        return f"\n[timed out after {timeout}s; the command and its children were killed]"


def _kill(pid: int, keep: set[int]) -> None:
    """The command's process group, and every process it left behind (re-parented to us), killed."""
    import psutil

    strays = [p for p in psutil.Process().children() if p.pid not in keep and p.pid != pid]
    # its own tree too, waited for: a kill signal is only sent, not done
    with contextlib.suppress(psutil.Error):
        strays += psutil.Process(pid).children(recursive=True)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    for stray in list(strays):
        with contextlib.suppress(psutil.Error):
            strays += stray.children(recursive=True)
    for stray in strays:
        with contextlib.suppress(psutil.Error):
            stray.kill()
    psutil.wait_procs(strays, timeout=2)
