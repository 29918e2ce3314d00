"""Running one shell command: in a bubblewrap box where it works, with limits, its output read in
bounded memory and whatever it started gone when it returns. This module owns the Box, the sandbox
mode in force, bubblewrap's argv and the process; the box's parts are its own modules (boxview: the
files it sees; netstack: its network; seccomp: its filter; cgroups: limits that hold for root).
It also reads what a failed command said for what the box may have refused, and checks the folder
a person grants."""

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
READ_ONLY = re.compile(  # `touch: cannot touch '/x': Read-only…`, `[Errno 30] Read-only file system: '/x'`
    r"([^\s'\"`‘’]+)['\"`’]?: Read-only file system|Read-only file system: ['\"`‘]?([^\s'\"`’]+)"
    r"|could not (?:write|lock) config file ([^\s:]+)"
)
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
    # one run's capability beyond the box, granted by the person: "network", "repository" (.git
    # writable, its hooks and config not) or a folder's absolute path (writable)
    grant: str = ""
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
    started = boxview.now()
    proc = _start(command.line, Path(root), env, box)
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
    """The shell line started, boxed or not, in its own session: a timeout or Ctrl+C kills all it started."""
    argv = ["/bin/sh", "-c", command]
    groups = cgroups.limited(box.procs, _memory(box)) if box else []
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
        netstack.start(kept, bool(box and box.lan))
    return proc


def _bwrap(root: Path, box: Box, fds: dict[str, int]) -> list[str]:
    """bubblewrap's arguments: / read-only, a private /tmp, the files' view (see boxview.files),
    then the process side (see _process)."""
    args = [bwrap() or "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    args += _tmp(box) + boxview.files(root, box.read, box.grant)
    args += boxview.unix_sockets_hidden("seccomp" in fds)
    return args + ["--chdir", str(root)] + _process(box, fds)


def _process(box: Box, fds: dict[str, int]) -> list[str]:
    """The box's process side, given after its mounts: its own namespaces (a user namespace also as
    root, a network one always), /proc/sys read-only, a sized /dev/shm in a read-only /dev, and the
    descriptors bwrap reads (the seccomp filter; the network stack's start: --info-fd, --block-fd)."""
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
    """A note when the session's /tmp grew past the box's size: it is emptied (a folder on disk has no
    size of its own; a command's files stay capped one by one)."""
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
    """prlimit run inside the box: processes are counted in the box's own user namespace, so the user's other
    processes do not count against it (as root the cgroup is what holds, see cgroups.limited)."""
    limits = [f"--nproc={box.procs}", f"--data={_memory(box)}", f"--fsize={box.file_size}"]
    # by its path: a prlimit of the project's, first on PATH, would run the command without limits
    return [project.program("prlimit") or "prlimit", *limits, "--core=0", "--"]


def _memory(box: Box) -> int:
    """The bytes a process in the box may allocate: the box's, or three quarters of the machine's."""
    machine = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return box.memory or machine * 3 // 4


def _harden() -> None:
    """Orphans of a command come back to us, to be killed; and amas's /proc files (its first environment, which
    holds the keys kept from commands) are closed to them (Linux; elsewhere nothing happens)."""
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
                note += f"\n[still held open after {timeout}s by a process it started that amas cannot stop]"
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
