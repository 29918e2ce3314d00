"""Running a shell command: in a bubblewrap box where it works, with limits, its output read in bounded memory."""

import contextlib
import functools
import os
import re
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from amas_code import effects, project, redact

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
CGROUP = {"pids": ("pids.max",), "memory": ("memory.max", "memory.limit_in_bytes")}
SANDBOX_LINE = "commands run in a sandbox (bubblewrap): {net}, writes only in the project"
UNBOXED_LINE = "no sandbox: {why}; every command will be asked, allow rules off"


@dataclass(frozen=True)
class Box:
    """How a command is boxed: with the network or not, and the limits it runs under."""

    network: bool = False
    procs: int = 512  # processes in the box: a fork bomb stops here
    memory: int = 0  # bytes a process may allocate (0: three quarters of the machine's memory)
    file_size: int = 2 << 30  # bytes one file may grow to: `yes > file` stops here
    tmp: int = 256 << 20  # bytes of the private /tmp, which lives in memory


def box(config: dict) -> Box | None:
    """The box commands run in under this config, or None when they run unboxed."""
    if status(config)[0] != "on":
        return None
    return Box(network=bool(config.get("sandbox_network")))


def status(config: dict) -> tuple[str, str]:
    """The mode in force (on, off, unavailable) and one line saying so to the user."""
    if config.get("sandbox") in ("off", False):  # YAML reads a bare `off` as false
        return "off", UNBOXED_LINE.format(why="sandbox is off in the config")
    why = probe()
    if why:
        return "unavailable", UNBOXED_LINE.format(why=why)
    net = "with the network" if config.get("sandbox_network") else "no network"
    return "on", SANDBOX_LINE.format(net=net)


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
    trial = [bwrap(), "--ro-bind", "/", "/", "--unshare-pid", "--unshare-net"]
    trial += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "true"]
    try:
        done = subprocess.run(trial, capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bwrap cannot run ({e})"
    if done.returncode:
        said = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no reason given"]
        return f"bwrap cannot run here (user namespaces off?): {said[0]}"
    return ""


def blocked(result: str) -> str | None:
    """Why a boxed command failed, when the box was the cause: the network, or a write outside the project."""
    if result[result.rfind("[exit code ") :].startswith("[exit code 0]"):
        return None
    if NETWORK.search(result):
        return "it needs the network"
    found = _read_only(result)
    if not found:
        return None
    path = found[1] or found[2] or found[3]
    home = str(Path.home())
    shown = "~" + path[len(home) :] if path.startswith(home + "/") else path
    # in the project (a relative path) the box keeps only git's hooks and config read-only
    if ".git/" in f"/{path}" or not path.startswith(("/", "~", "..")):
        return f"it changes git's config or hooks, which the box keeps read-only ({shown})"
    return f"it writes outside the project ({shown})"


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
    proc = _start(command.line, Path(root), env, box)
    try:
        out, err, note = _collect(proc, command.timeout, before, watch)
    finally:  # also on Ctrl+C
        _kill(proc.pid, before)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(2)  # killed: its exit code is the signal's
    parts = [f"$ {command.line}", out.rstrip(), f"[stderr]\n{err.rstrip()}" if err.strip() else ""]
    return "\n".join(p for p in [*parts, f"[exit code {proc.returncode}]{note}"] if p)


def _start(command: str, root: Path, env: dict, box: Box | None) -> subprocess.Popen:
    """The shell line started, boxed or not, in its own session: a timeout or Ctrl+C kills all it started."""
    argv, groups = ["/bin/sh", "-c", command], _cgroups(box) if box else []
    return subprocess.Popen(
        _bwrap(root, box) + _limits(box) + argv if box else argv,
        cwd=root,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=functools.partial(_child, groups),
    )


def _bwrap(root: Path, box: Box) -> list[str]:
    """bubblewrap's arguments: / read-only, a private /tmp, the project writable, credentials hidden."""
    args = [bwrap(), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    args += ["--size", str(box.tmp), "--tmpfs", "/tmp", "--bind", str(root), str(root)]
    args += _hidden() + _git_read_only(root)
    args += ["--unshare-pid", "--unshare-ipc", "--new-session", "--die-with-parent"]
    args += ["--cap-drop", "ALL", "--chdir", str(root)]
    return args + ([] if box.network else ["--unshare-net"])


def _hidden() -> list[str]:
    """Mounts that hide each credential place that exists: an empty folder, or an empty file."""
    args = []
    for place in [*redact.CREDENTIALS, *RC_FILES]:
        if place in SKIP or place.startswith("/proc"):
            continue
        path = os.path.realpath(os.path.expanduser(place))
        if os.path.isdir(path):
            args += ["--tmpfs", path]
        elif os.path.exists(path):
            args += ["--ro-bind", "/dev/null", path]
    return args


def _git_read_only(root: Path) -> list[str]:
    """The hooks and config of the project's repository and of its submodules' repositories
    (.git/modules) stay read-only: a command cannot plant code git runs later. Where there is no
    hooks folder, an empty read-only one is mounted (bubblewrap leaves the folder, empty)."""
    args = []
    for gitdir in _gitdirs(root / ".git"):
        hooks, config = gitdir / "hooks", gitdir / "config"
        if hooks.exists():
            args += ["--ro-bind", str(hooks), str(hooks)]
        elif not os.path.lexists(hooks):
            args += ["--tmpfs", str(hooks), "--remount-ro", str(hooks)]
        if config.exists():
            args += ["--ro-bind", str(config), str(config)]
    if (hooks := _hooks_path(root)) and hooks.is_dir():  # husky's .husky, a tracked .githooks
        args += ["--ro-bind", str(hooks), str(hooks)]
    return args


def _hooks_path(root: Path) -> Path | None:
    """The folder git takes hooks from when core.hooksPath names one (relative: to the project)."""
    if not (root / ".git").exists():
        return None
    # amas's own -c core.hooksPath (scope "command") is not the repository's
    found = project.git(root, "config", "--path", "--show-scope", "--get-all", "core.hooksPath")
    lines = found.stdout.decode(errors="replace").splitlines()
    named = [line.split("\t", 1)[1] for line in lines if not line.startswith("command\t")]
    return root / named[-1] if named and named[-1] else None


def _gitdirs(top: Path) -> list[Path]:
    """The repository folder top, and the submodules' ones under its modules/, at any depth."""
    if not top.is_dir() or top.is_symlink():
        return []
    found = [top]
    for folder, dirs, files in os.walk(top / "modules"):
        if "HEAD" in files and "objects" in dirs:
            found.append(Path(folder))
            dirs[:] = [d for d in dirs if d == "modules"]  # its own submodules, not its objects
    return found


def _limits(box: Box) -> list[str]:
    """prlimit run inside the box: processes are counted in the box's own user namespace, so the user's other
    processes do not count against it (as root the cgroup is what holds, see _cgroups)."""
    memory = box.memory or _memory() * 3 // 4
    limits = [f"--nproc={box.procs}", f"--data={memory}", f"--fsize={box.file_size}", "--core=0"]
    # by its path: a prlimit of the project's, first on PATH, would run the command without limits
    return [project.program("prlimit") or "prlimit", *limits, "--"]


def _memory() -> int:
    """The machine's memory in bytes."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


@functools.cache
def _cgroups(box: Box) -> list[Path]:
    """A cgroup per controller with the box's limits, where amas may make one (root; cgroup v1 or v2): root
    ignores the process rlimit, a cgroup does not. Made once per process (one command runs at a time; making
    and removing one per command costs ~50 ms) and removed when amas exits."""
    import atexit

    limits = {"pids": box.procs, "memory": box.memory or _memory() * 3 // 4}
    made = []
    for controller, folder in _own_cgroups().items():
        _sweep(folder)
        path = folder / f"amas-{os.getpid()}-{box.procs}-{limits['memory']}"
        with contextlib.suppress(OSError):
            path.mkdir(exist_ok=True)
            made.append(path)
            _set_limit(path, controller, limits[controller])
    atexit.register(_remove, made)
    return made


def _sweep(folder: Path) -> None:
    """The empty cgroups an amas killed with -9 left behind, removed."""
    import psutil

    for stale in folder.glob("amas-*-*"):
        if not psutil.pid_exists(int(stale.name.split("-")[1])):
            with contextlib.suppress(OSError):
                stale.rmdir()


def _own_cgroups() -> dict[str, Path]:
    """The folder of amas's own cgroup for each controller that limits, if amas may write there."""
    found = {}
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, names, path = line.split(":", 2)
            for controller in CGROUP:
                folder = _cgroup_folder(controller, names, path.lstrip("/"))
                if folder and os.access(folder, os.W_OK):
                    found.setdefault(controller, folder)
    return found


def _cgroup_folder(controller: str, names: str, path: str) -> Path | None:
    """Where a line of /proc/self/cgroup puts amas for a controller (v1: one tree each; v2: one tree)."""
    if not names:
        base = Path("/sys/fs/cgroup")
        return base / path if (base / "cgroup.controllers").exists() else None
    return Path("/sys/fs/cgroup", controller, path) if controller in names.split(",") else None


def _set_limit(path: Path, controller: str, value: int) -> None:
    """Write the limit into whichever file this cgroup version has."""
    for name in CGROUP[controller]:
        if (path / name).exists():
            (path / name).write_text(str(value))
            return


def _remove(groups: list[Path]) -> None:
    """amas's cgroups, removed once their last process is gone (bounded: two seconds at most)."""
    for path in groups:
        for _ in range(200):
            try:
                path.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.01)  # the kernel frees a killed process shortly after the kill


def _child(groups: list[Path]) -> None:
    """In the child before it runs: it dies when amas dies (kill -9 too), and joins the command's cgroups."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    for path in groups:
        with contextlib.suppress(OSError):
            (path / "cgroup.procs").write_text("0")


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
        self.keep, self.head, self.tail, self.cut = keep, bytearray(), bytearray(), 0
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
    out, err, note = Capped(watch=watch), Capped(watch=watch), ""
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
