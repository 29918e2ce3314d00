"""Running one shell command: in a bubblewrap box where it works, with limits, its output read in
bounded memory and whatever it started gone when it returns. This module owns the Box, the sandbox
mode in force, bubblewrap's argv and the process; the box's parts are its own modules (boxview: the
files it sees; netstack: its network; seccomp: its filter; cgroups: limits that hold for root).
It also reads what the box refused a failed command (from the box's own mounts: boxview.seen) and
checks the folder a person grants, which it proposes from that."""

import contextlib
import dataclasses
import functools
import os
import re
import selectors
import shutil
import signal
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from amas_code import boxview, cgroups, effects, netstack, project, redact, seccomp, ui
from amas_code.boxview import writable_root

KEEP = 100_000  # bytes kept of each stream's head and of its tail; the middle is counted, not kept
NETWORK = re.compile(  # what a command says when it has no network
    r"Temporary failure in name resolution|Could not resolve host|Name or service not known|"
    r"Network is unreachable|getaddrinfo|No address associated with hostname|Connection refused|"
    r"Failed to establish a new connection|Couldn't connect to server|unable to access 'https?:"
)
# `touch: cannot touch '/x': Read-only…`, `[Errno 30] Read-only file system: '/x'`
READ_ONLY = re.compile(
    r"([^\s'\"`‘’]+)['\"`’]?: Read-only file system|Read-only file system: ['\"`‘]?([^\s'\"`’]+)"
    r"|could not (?:write|lock) config file ([^\s:]+)"
)
PATH = re.compile(  # a path in what a command printed: /x, ~/x, ../x, .git/x
    r"(?<![^\s'\"`‘(=])((?:~|\.\.?)?/[^\s'\"`’):;,]+|[\w.-]+/[^\s'\"`’):;,]*)"
)
SYSTEM = ("/proc/", "/sys/", "/dev/")  # the box has its own: never granted, never a refusal
# what Docker's default profile masks of /proc and /sys, and keeps read-only
PROC_MASKED = (
    "/proc/asound /proc/acpi /proc/kcore /proc/keys /proc/latency_stats /proc/timer_list "
    "/proc/timer_stats /proc/sched_debug /proc/scsi /sys/firmware /sys/devices/virtual/powercap"
).split()
PROC_READ_ONLY = ("/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger")
SANDBOX_LINE = "commands run in a sandbox (bubblewrap): {net}, writes only in the project{weaker}"
WEAKER = "; weaker: no seccomp filter (install libseccomp2), only the known Unix sockets are hidden"
UNBOXED_LINE = "no sandbox: {why}; every command will be asked, allow rules off"


@dataclass(frozen=True)
class Box:
    """How a command is boxed: with the network or not, and the limits it runs under."""

    network: bool = False
    lan: bool = False  # with the network: the private ranges reachable (never the host's own)
    procs: int = 512  # processes in the box: a fork bomb stops here
    memory: int = 0  # bytes a process may allocate (0: three quarters of the machine's memory)
    file_size: int = 2 << 30  # bytes one file may grow to: `yes > file` stops here
    tmp: int = 256 << 20  # bytes of the private /tmp and of /dev/shm, which live in memory
    scratch: str = ""  # the session's folder the box sees as /tmp ("": a fresh /tmp each command)
    # more places of the home shown read-only (the user's `sandbox_read`)
    read: tuple[str, ...] = ()
    # one run's capability beyond the box, granted by the person: "network",
    # "repository" (in each gitdir, what a commit writes: see boxview._written_only)
    # or a folder's absolute path (writable)
    grant: str = ""
    plan: bool = False  # plan mode: the project read-only too (tests and linters still run)
    # what the walk after each command found, by project (boxview.Tree): the next walk lists only
    # the folders that changed; shared by the copies a grant makes
    trees: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)

    def close(self) -> None:
        """The session's /tmp removed: amas is leaving."""
        if self.scratch:
            _remove(self.scratch)


@dataclass(frozen=True)
class Sandbox:
    """The sandbox of one amas session, decided once (see open): the gate judges by its mode, the
    tools run commands in its box, the start warns with its line."""

    mode: str  # on, off (the config says so), unavailable (bubblewrap cannot run here)
    line: str  # the mode in one line, for the user
    box: Box | None = None  # where commands run; None: unboxed


def open(config: dict) -> Sandbox:
    """The sandbox this config gives one amas session. Its box's commands share one /tmp, a folder
    in ~/.amas/tmp made at the first command and removed by Box.close."""
    import secrets

    mode, line = status(config)
    if mode != "on":
        return Sandbox(mode, line)
    name = f"{os.getpid()}-{secrets.token_hex(4)}"
    scratch = str(Path.home() / ".amas" / "tmp" / name)
    read = tuple(config.get("sandbox_read") or ())
    network = config.get("sandbox_network")
    box = Box(network=bool(network), lan=network == "lan", read=read, scratch=scratch)
    return Sandbox(mode, line, box)


def status(config: dict) -> tuple[str, str]:
    """The mode in force (on, off, unavailable) and one line saying so to the user (asked once a
    session, by open)."""
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


@dataclass(frozen=True)
class Refusal:
    """A place a failed command tried that the box refused it, as amas's own mounts show it."""

    path: str  # the place the command tried, absolute
    seen: str  # "hidden" (it is on the host, the box hides it) or "read-only"
    why: str  # in amas's words: "~/.cache/calc exists but the box hides your home"
    said: str  # the line of the command's output that named it (its words, quoted as such)
    folder: str = ""  # the folder amas proposes to open for one run ("": none may be)
    reason: str = ""  # why none may be


def refused(result: str, root: Path, box: Box | None, programs: tuple[str, ...] = ()) -> list[str]:
    """What the box refused a failed command, as the grants that could let it run once more:
    "network", "repository", "folder". What it printed only names places; how the box treats
    them is read from amas's own mounts (see tried), and which folder opens is the person's.
    programs: those the line runs (git's failure in the read-only repository may be silent)."""
    if _succeeded(result) or box is None:
        return []
    said = result
    if result.startswith("$ "):  # what it printed, not the `$ command` line
        said = result.partition("\n")[2]
    offers = []
    if NETWORK.search(said):
        offers.append("network")
    if box.grant != "repository" and _repository_refused(said, root, programs):
        offers.append("repository")
    refusal = tried(result, root, box, programs)
    if refusal and not _key_place(refusal.path):  # /run/user: no grant opens it
        offers.append("folder")
    return offers


def _repository_refused(said: str, root: Path, programs: tuple[str, ...]) -> bool:
    """Whether the read-only repository stopped a command: a write into it refused, but where
    every grant keeps it read-only (hooks, config: the model changes them with its edit tools),
    or git run in a project that has one (git stash fails there saying nothing)."""
    place = read_only_repository(said)
    if place:
        parts = Path(place).parts
        kept = Path(place).name.startswith("config") or "hooks" in parts
        return not kept
    return "git" in programs and os.path.lexists(root / ".git")


def tried(
    result: str, root: Path, box: Box | None, programs: tuple[str, ...] = ()
) -> Refusal | None:
    """The first place outside the project a failed command named that the box refused it: one
    the box hides (read from its mounts, whatever the command said: "Directory nonexistent", "No
    such file"), or one it shows read-only that the command said it could not write; with the
    folder amas proposes to open (see _proposal). None where there is none (a place that holds
    keys is not one)."""
    if _succeeded(result) or box is None:
        return None
    line, said = "", result
    if result.startswith("$ "):
        line, _, said = result.partition("\n")
    places = _places(said, line, root, "mkdir" in programs)
    if not places:  # the mounts are computed only for a command that named a place outside
        return None
    mounts = _bwrap(root, box, {})
    boxview.remove_stand_ins(mounts, root)  # made to be mounted: no box is made here
    for place in places:
        refusal = _refusal(place, root, mounts)
        if refusal:
            return refusal
    return None


def _refusal(place: tuple, root: Path, mounts: list[str]) -> Refusal | None:
    """The box's refusal of one place a command named (path, whether it said it could not write
    there, whether it names a folder, its line), read from the box's mounts; None if none."""
    path, read_only, folder, text = place
    seen, where = boxview.seen(path, mounts)
    there = _existing(path)
    if there == where and not os.path.lexists(path):  # it hides nothing the host has there
        seen = seen.replace("hidden", "read-only")
    refused = seen == "hidden" or (seen == "read-only" and read_only)
    if not refused or _secret(path) or _secret(there):  # the model is told no more
        return None
    proposed, reason = _proposal(path, there, root, folder)
    return Refusal(path, seen, _why(there, seen, where), text, proposed, reason)


def _existing(path: str) -> str:
    """The deepest place on a path that exists on the host (the path itself, or a folder above)."""
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return path


def _places(said: str, line: str, root: Path, folders: bool) -> list[tuple[str, bool, bool, str]]:
    """The places outside the project a command's output names (at most 40), each as the longest
    path the line of a mkdir gives for it (mkdir -p ~/.cache/tool refused at ~/.cache); whether
    its line says it is read-only, whether it names a folder (mkdir's), and that line."""
    words = [_expanded(w) for w in re.findall(r"[^\s'\"`;|&<>()]+", line[2:])]
    found = {}
    for text in said.splitlines():
        # the last path of a line is the one it complains of (`/bin/sh: 1: cannot create ../x`)
        for at, raw in enumerate(reversed(PATH.findall(text[-1000:]))):
            path = os.path.normpath(os.path.join(root, _expanded(raw)))
            longer = [w for w in words if folders and (w == path or w.startswith(path + "/"))]
            named = max([path, *longer], key=len)
            # the project's, a repository's (the repository grant's), the box's own (/proc)
            inside = Path(named).is_relative_to(root) or named.startswith(SYSTEM)
            if not inside and ".git" not in Path(named).parts and len(found) < 40:
                read_only = at == 0 and "Read-only file system" in text
                found.setdefault(named, (read_only, bool(longer), text))
    return [(path, *how) for path, how in found.items()]


def _expanded(word: str) -> str:
    """A path as the shell would give it: ~ and $HOME as the home."""
    home = os.path.expanduser("~")
    for mark in ("~/", "$HOME/", "${HOME}/"):
        if word.startswith(mark):
            return os.path.join(home, word[len(mark) :])
    return word


def _why(there: str, seen: str, where: str) -> str:
    """How the box refused a place, in amas's words (there: the deepest of it on the host; where:
    the place of the mount the box shows it through)."""
    home = os.path.realpath(os.path.expanduser("~"))
    if seen == "hidden":
        whose = tilde(where)
        if where == home:
            whose = "your home"
        return f"{tilde(there)} exists but the box hides {whose}"
    if where == home:
        return "the box keeps your home read-only (and hidden but for the toolchains' places)"
    if where == "/":
        return f"{tilde(there)} is read-only in the box (it writes only in the project and /tmp)"
    return f"the box shows {tilde(where)} read-only"


def _proposal(path: str, there: str, root: Path, folder: bool) -> tuple[str, str]:
    """The folder to open for a place the command tried: the deepest that exists on its way
    (there), or where that may not be opened, the first new one below it on the way (path's own
    when it names a folder), made when granted; else "" and why the deepest may not be opened."""
    top = there
    if not os.path.isdir(there):
        top = os.path.dirname(there)
    _, reason = grantable(top, root)
    if not reason:
        return top, ""
    rest = Path(path).relative_to(top).parts
    if len(rest) > 1 or (rest and folder):  # a folder the command needed
        new, other = grantable(os.path.join(top, rest[0]), root)
        if not other:
            return new, ""
    return "", f"{tilde(top)}: {reason}"


def tilde(path: str) -> str:
    """A path as the person thinks of it: ~ for the home."""
    home = os.path.realpath(os.path.expanduser("~"))
    if path == home or path.startswith(home + "/"):
        return "~" + path[len(home) :]
    return path


def grantable(folder: str, root: Path) -> tuple[str, str]:
    """The folder a person typed as the absolute path a grant would open (relative to the project,
    links followed), and "" or the one reason it may not be opened. One that does not exist may
    be, made by amas, where the folder that would hold it is a place a grant may open."""
    root = Path(os.path.realpath(root))
    try:
        path = os.path.realpath(os.path.join(root, os.path.expanduser(folder.strip())))
    except ValueError:  # a NUL in it
        return folder, "no folder has that name"
    if os.path.exists(path) and not os.path.isdir(path):
        return path, "it is a file, not a folder"
    reason = _placed(path, root) or _held(path, root)
    if reason or os.path.isdir(path):
        return path, reason
    there = _existing(path)
    why = _placed(there, root)
    if not os.path.isdir(there):
        why = f"{tilde(there)} is a file"
    if why:
        return path, f"it does not exist, and amas would make it in {tilde(there)}: {why}"
    return path, ""


def _placed(path: str, root: Path) -> str:
    """Why a grant may not open a folder where it is (one reason), or ""."""
    if path.startswith(SYSTEM) or path in ("/proc", "/sys", "/dev"):
        return "the box has its own /proc, /sys and /dev"
    if not writable_root(Path(path)):
        return "it is your home, / or a folder above your home, which no grant opens"
    key = _key_place(path)
    if key:
        return f"it is in {tilde(key)}, {_what(key)}"
    if Path(path).is_relative_to(root):
        return "it is in the project, writable already (its repository and what steers stay so)"
    return ""


def _key_place(path: str) -> str:
    """The place that path is in that no grant opens: one that holds keys, git's own config, or
    where programs outside the box listen; or ""."""
    places = [*redact.CREDENTIALS, *boxview.TOOL_CREDENTIALS, *boxview.LISTENING]
    for place in [*places, *boxview.GIT_HOME]:
        real = os.path.realpath(os.path.expanduser(place))
        if path == real or path.startswith(real + "/"):
            return real
    return ""


def _secret(path: str) -> bool:
    """Whether a path is in a place that holds keys (the model is not told what is there)."""
    return _key_place(path) in [
        os.path.realpath(os.path.expanduser(p))
        for p in [*redact.CREDENTIALS, *boxview.TOOL_CREDENTIALS]
    ]


def _what(place: str) -> str:
    """What a place no grant opens is, for the person."""
    if place in [os.path.realpath(os.path.expanduser(p)) for p in boxview.GIT_HOME]:
        return "git's own config (what runs at every git command)"
    if place in [os.path.realpath(p) for p in boxview.LISTENING]:
        return "where programs outside the box listen"
    return "a place that holds keys"


def _held(path: str, root: Path) -> str:
    """What a folder holds that no grant opens, said for the person, or "": the project or its
    repository, git's own config, a place that holds keys (that exists) or where programs outside
    the box listen."""
    inside = Path(path)
    gitdirs = boxview.gitdirs_of(root)
    if root.is_relative_to(inside) or any(g.is_relative_to(inside) for g in gitdirs):
        return "it holds the project, whose repository stays read-only: name a folder beside it"
    hooks = boxview.hooks_folder(root)
    if hooks and (hooks.is_relative_to(inside) or inside.is_relative_to(hooks)):
        return f"git takes the project's hooks from {tilde(str(hooks))}, which no grant opens"
    git = [os.path.realpath(os.path.expanduser(p)) for p in boxview.GIT_HOME]
    places = [*redact.CREDENTIALS, *boxview.TOOL_CREDENTIALS, *boxview.LISTENING]
    keys = [os.path.realpath(os.path.expanduser(p)) for p in places]
    for place in git + [k for k in keys if os.path.exists(k)]:
        if Path(place).is_relative_to(inside):
            return f"it holds {tilde(place)}, {_what(place)}: name a folder inside it or beside it"
    return ""


def read_only_repository(result: str) -> str | None:
    """The place in a git repository a finished command failed to write, or None: the box keeps
    the repository read-only, so `git commit` or `git add` fails in it (see boxview)."""
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


def run(command: effects.Command, root: Path, box: Box | None = None, watch=None) -> str:
    """Run a shell line in root (boxed when box is given); stdout, stderr and exit code, each chunk
    also given to watch(text) as it comes. Whatever it started is gone when it returns."""
    import psutil

    _harden()
    before = {p.pid for p in psutil.Process().children()}
    box = _ready(box)
    started = boxview.now()
    proc = _start(command.line, Path(root), command.env or {}, box)
    try:
        out, err, note = _collect(proc, command.timeout, before, watch)
        note += _tidy_tmp(box)
    finally:  # also on Ctrl+C
        _kill(proc.pid, before)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(2)  # killed: its exit code is the signal's
        boxview.remove_stand_ins(proc.args, Path(root))
    if box:
        note += _planted(Path(root), started, box)
    parts = [f"$ {command.line}", out.rstrip(), f"[stderr]\n{err.rstrip()}" if err.strip() else ""]
    return "\n".join(p for p in [*parts, f"[exit code {proc.returncode}]{note}"] if p)


def _planted(root: Path, started: int, box: Box) -> str:
    """What the command left that runs outside amas at the user's next use of it (see
    boxview.planted), said on screen, and the note that names it in the result. Where the box
    keeps the project read-only (the home), nothing can have been left."""
    if not writable_root(root):
        return ""
    tree = box.trees.setdefault(str(root), boxview.Tree(str(root)))
    found = boxview.planted(root, started, tree)
    if found:
        ui.warning(f"the command left what runs outside amas: {', '.join(found[:10])}")
    return boxview.planted_note(found)


def _start(command: str, root: Path, env: dict, box: Box | None) -> subprocess.Popen:
    """The shell line started, boxed or not, in its own session:
    a timeout or Ctrl+C kills all it started."""
    given, kept = _descriptors(box)
    try:
        proc = subprocess.Popen(
            _boxed(root, box, given) + ["/bin/sh", "-c", command],
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            pass_fds=tuple(given.values()),
            # unboxed, the command dies with amas by a step in its child; boxed, by bwrap's own
            preexec_fn=None if box else cgroups.dies_with_amas,
        )
    finally:  # the box's ends are the box's alone; amas's start the network (or see bwrap fail)
        for fd in given.values():
            os.close(fd)
        netstack.start(kept, bool(box and box.lan))
    return proc


def _boxed(root: Path, box: Box | None, fds: dict[str, int]) -> list[str]:
    """What runs the shell line in the box: in its cgroups (as root), bubblewrap, prlimit; nothing
    without a box."""
    if not box:
        return []
    groups = cgroups.limited(box.procs, _memory(box))
    return cgroups.joined(groups) + _bwrap(root, box, fds) + _limits(box)


def _bwrap(root: Path, box: Box, fds: dict[str, int]) -> list[str]:
    """bubblewrap's arguments: / read-only, a private /tmp, the files' view (see boxview.files),
    then the process side (see _process)."""
    args = [bwrap() or "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    args += _tmp(box) + boxview.files(root, box.read, box.grant, box.plan)
    args += boxview.unix_sockets_hidden("seccomp" in fds)
    return args + ["--chdir", str(root)] + _process(box, fds)


def _process(box: Box, fds: dict[str, int]) -> list[str]:
    """The box's process side, given after its mounts: its own namespaces (a user namespace also as
    root, a network one always), /proc/sys read-only, a sized /dev/shm in a read-only /dev, and the
    descriptors bwrap reads (the seccomp filter; the network stack's start:
    --info-fd, --block-fd)."""
    args = _proc_masks()
    args += ["--size", str(box.tmp), "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
    args += ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-net"]
    args += ["--new-session", "--die-with-parent", "--cap-drop", "ALL"]
    for name, fd in fds.items():
        args += [f"--{name}", str(fd)]
        # the box's resolver: slirp4netns's, for a host that resolves on its own loopback
        args += ["/etc/resolv.conf"] if name == "ro-bind-data" else []
    return args


def _proc_masks() -> list[str]:
    """What Docker masks in /proc and /sys (an empty file or folder over it) and keeps read-only,
    where this kernel has it: as root, the box's root is the host's, and /proc/sysrq-trigger would
    reboot it."""
    args = []
    for place in PROC_MASKED:
        if os.path.isdir(place):
            args += ["--tmpfs", place, "--remount-ro", place]
        elif os.path.exists(place):
            args += ["--ro-bind", "/dev/null", place]
    for place in PROC_READ_ONLY:
        if os.path.exists(place):
            args += ["--ro-bind", place, place]
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
            _remove(str(stale))


def _tidy_tmp(box: Box | None) -> str:
    """A note when the session's /tmp grew past the box's size: it is emptied (a folder on disk has
    no size of its own; a command's files stay capped one by one)."""
    if not box or not box.scratch:
        return ""
    size = 0
    for folder, _, files in _opened(box.scratch):
        for name in files:
            with contextlib.suppress(OSError):
                size += os.lstat(os.path.join(folder, name)).st_blocks * 512
    if size <= box.tmp:
        return ""
    _remove(box.scratch)
    with contextlib.suppress(OSError):
        os.mkdir(box.scratch, 0o700)
    return f"\n[/tmp held {size >> 20} MB, more than {box.tmp >> 20} MB: it was emptied]"


def _opened(top: str):
    """os.walk of a folder a command may have closed (`chmod 000`, which only root walks through):
    a folder its owner may not read or enter is opened to them before it is walked."""
    _open(top)
    for folder, dirs, files in os.walk(top):
        for name in dirs:
            _open(os.path.join(folder, name))
        yield folder, dirs, files


def _open(folder: str) -> None:
    """A folder (not a link) made readable, enterable and writable by its owner, if it was not."""
    with contextlib.suppress(OSError):
        mode = os.lstat(folder).st_mode
        if stat.S_ISDIR(mode) and not os.access(folder, os.R_OK | os.W_OK | os.X_OK):
            os.chmod(folder, stat.S_IMODE(mode) | 0o700)


def _remove(top: str) -> None:
    """A folder of the session's /tmp removed whole, however a command left its folders' modes."""
    for _ in _opened(top):
        pass
    shutil.rmtree(top, ignore_errors=True)


def _descriptors(box: Box | None) -> tuple[dict[str, int], tuple[int, int] | None]:
    """The descriptors the box is given, by bwrap's option, and those amas keeps to start the
    network stack: the read end of --info-fd and the write end of --block-fd."""
    given = {}
    kept = None
    program = seccomp.program() if box else b""
    if program:
        given["seccomp"] = _data(program)
    online = box and (box.network or box.grant == "network")
    if online and project.program(netstack.NETWORK_STACK):
        info = os.pipe()
        block = os.pipe()
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


def _limits(box: Box) -> list[str]:
    """prlimit run inside the box: processes are counted in the box's own user namespace, so the
    user's other processes do not count against it (as root the cgroup is what holds, see
    cgroups.limited)."""
    limits = [f"--nproc={box.procs}", f"--data={_memory(box)}", f"--fsize={box.file_size}"]
    # by its path: a prlimit of the project's, first on PATH, would run the command without limits
    return [project.program("prlimit") or "prlimit", *limits, "--core=0", "--"]


def _memory(box: Box) -> int:
    """The bytes a process in the box may allocate:
    the box's, or three quarters of the machine's."""
    machine = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return box.memory or machine * 3 // 4


def _harden() -> None:
    """Orphans of a command come back to us, to be killed; and amas's /proc files (its first
    environment, which holds the keys kept from commands) are closed to them (Linux; elsewhere
    nothing happens)."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        libc = ctypes.CDLL(None)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: /proc/<amas>/environ is root's


def _collect(
    proc: subprocess.Popen, timeout: float, before: set[int], watch
) -> tuple[str, str, str]:
    """The command's output, and a note if it ran past its timeout and was killed with its children;
    on Ctrl+C, effects.Stopped with what it printed until then."""
    out = effects.Capped(KEEP, KEEP, "characters of output", watch)
    err = effects.Capped(KEEP, KEEP, "characters of output", watch)
    start = time.monotonic()
    try:
        note = _pump(proc, timeout, before, (out, err))
    except KeyboardInterrupt:
        printed = "\n".join(text.rstrip() for text in (_said(out), _said(err)) if text.strip())
        took = time.monotonic() - start
        raise effects.Stopped(f"{printed}\n[stopped by the user after {took:.1f} s]") from None
    return _said(out), _said(err), note


def _said(stream: effects.Capped) -> str:
    """A stream's text, its line ends as a terminal would show them."""
    return stream.text().replace("\r\n", "\n").replace("\r", "\n")


def _pump(proc: subprocess.Popen, timeout: float, before: set[int], into: tuple) -> str:
    """The command's streams read into their Capped until both end; a note on a timeout."""
    note = ""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as streams:
        streams.register(proc.stdout, selectors.EVENT_READ, into[0])
        streams.register(proc.stderr, selectors.EVENT_READ, into[1])
        while streams.get_map():
            _read(streams, 0.1)
            if not streams.get_map() or (proc.poll() is None and time.monotonic() < deadline):
                continue
            if proc.poll() is None and not note:
                note = f"\n[timed out after {timeout}s; the command and its children were killed]"
            # out of reach: it left its session, and no subreaper took it
            elif time.monotonic() > deadline + 1:
                note += (
                    f"\n[still held open after {timeout}s by a process it started "
                    "that amas cannot stop]"
                )
                break
            _kill(proc.pid, before)
    return note + (_wait(proc, deadline, timeout) if not note else "")


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
