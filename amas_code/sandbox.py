"""Running a shell command: in a bubblewrap box where it works, with limits, its output read in bounded memory."""

import contextlib
import dataclasses
import functools
import json
import os
import re
import select
import selectors
import shutil
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
SANDBOX_LINE = "commands run in a sandbox (bubblewrap): {net}, writes only in the project{weaker}"
WEAKER = "; weaker: no seccomp filter (install libseccomp2), only the known Unix sockets are hidden"
# the ABIs one kernel runs, by family: the box's seccomp filter covers the native ABI's family
SECCOMP_ARCHES = (("x86_64", "x86", "x32"), ("aarch64", "arm"))
UNIX_SOCKET_PLACES = ("/run/user", "/run/dbus", "/var/run/docker.sock", "/run/docker.sock")
NETWORK_STACK = "slirp4netns"  # the user-mode network stack of `sandbox_network: true`
SLIRP_RESOLVER = "nameserver 10.0.2.3\n"  # slirp4netns's DNS forwarder, in the box's network
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

    def close(self) -> None:
        """The session's /tmp removed: amas is leaving."""
        if self.scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)


def box(config: dict) -> Box | None:
    """The box commands run in under this config, or None when they run unboxed."""
    if status(config)[0] != "on":
        return None
    return Box(network=bool(config.get("sandbox_network")))


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
            if project.program(NETWORK_STACK)
            else f"no network ({NETWORK_STACK} missing)"
        )
    return "on", SANDBOX_LINE.format(net=net, weaker="" if _seccomp_filter() else WEAKER)


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
    box = _ready(box)
    proc = _start(command.line, Path(root), env, box)
    try:
        out, err, note = _collect(proc, command.timeout, before, watch)
        note += _tidy(box)
    finally:  # also on Ctrl+C
        _kill(proc.pid, before)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(2)  # killed: its exit code is the signal's
    parts = [f"$ {command.line}", out.rstrip(), f"[stderr]\n{err.rstrip()}" if err.strip() else ""]
    return "\n".join(p for p in [*parts, f"[exit code {proc.returncode}]{note}"] if p)


def _start(command: str, root: Path, env: dict, box: Box | None) -> subprocess.Popen:
    """The shell line started, boxed or not, in its own session: a timeout or Ctrl+C kills all it started."""
    argv, groups = ["/bin/sh", "-c", command], _cgroups(box) if box else []
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
            preexec_fn=functools.partial(_child, groups),
        )
    finally:  # the box's ends are the box's alone; amas's start the network (or see bwrap fail)
        for fd in given.values():
            os.close(fd)
        _network(kept)
    return proc


def _bwrap(root: Path, box: Box, fds: dict[str, int]) -> list[str]:
    """bubblewrap's arguments: / read-only, a private /tmp, the project writable, credentials hidden."""
    args = [bwrap() or "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    args += _tmp(box) + ["--bind", str(root), str(root)]
    args += _hidden() + _git_read_only(root)
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


def _tidy(box: Box | None) -> str:
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
    program = _seccomp_filter() if box else b""
    if program:
        given["seccomp"] = _data(program)
    if box and box.network and project.program(NETWORK_STACK):
        info, block = os.pipe(), os.pipe()
        given.update({"info-fd": info[1], "block-fd": block[0]})
        kept = (info[0], block[1])
        if _loopback_resolver(Path("/etc/resolv.conf")):  # systemd-resolved's 127.0.0.53
            given["ro-bind-data"] = _data(SLIRP_RESOLVER.encode())
    return given, kept


def _data(data: bytes) -> int:
    """A file holding data, at its start, for bwrap to read to its end."""
    fd = os.memfd_create("amas-box", 0)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _loopback_resolver(resolv: Path) -> bool:
    """Whether the host resolves names through a server on its loopback, which is not the box's."""
    try:
        text = resolv.read_text(errors="replace")
    except OSError:
        return False
    servers = re.findall(r"^\s*nameserver\s+(\S+)", text, re.MULTILINE)
    return any(s.startswith("127.") or s == "::1" for s in servers)


def _network(kept: tuple[int, int] | None) -> None:
    """The user-mode stack started on the box's network namespace before the command runs, the
    host's loopback out of its reach (--disable-host-loopback). If it does not start, the command
    runs with no network: never the host's."""
    if not kept:
        return
    info, block = kept
    try:
        pid = _child_pid(info)
        if pid and _loopback_up(pid):
            _slirp(pid)
    finally:  # bwrap runs the command once --block-fd has data or is closed
        os.close(info)
        os.close(block)


def _child_pid(info: int) -> int:
    """The box's first process, as bwrap's --info-fd tells it (0 when it says nothing in 10 s)."""
    said = b""
    while not said.rstrip().endswith(b"}"):
        if not select.select([info], [], [], 10)[0]:
            return 0
        chunk = os.read(info, 4096)
        if not chunk:
            return 0
        said += chunk
    with contextlib.suppress(ValueError, AttributeError):
        return int(json.loads(said).get("child-pid", 0))
    return 0


def _loopback_up(pid: int) -> bool:
    """Whether bwrap has set up the box's loopback (2 s at most): the stack's own netlink requests,
    made meanwhile, make bwrap's fail ("loopback: Failed RTM_NEWADDR"). Its broadcast route is
    made last, once the loopback is up (127.0.0.1's comes with the address, before)."""
    for _ in range(2000):
        try:
            if "127.255.255.255" in Path(f"/proc/{pid}/net/fib_trie").read_text():
                return True
        except OSError:
            return False  # the box is gone
        time.sleep(0.001)
    return False


def _slirp(pid: int) -> None:
    """slirp4netns in the box's network namespace, waited for until it is ready (10 s at most). It
    is a child of amas: killed with the command's strays, and when amas dies."""
    import fcntl

    held = []
    try:
        held.append(os.open(f"/proc/{pid}/ns/net", os.O_RDONLY))
        # the user namespace that owns the network (bwrap nests the box's own inside it)
        held.append(fcntl.ioctl(held[0], 0xB701))  # NS_GET_USERNS
        ready, told = os.pipe()
        held += [ready, told]
        _start_stack(pid, held[1], told)
        os.close(held.pop())  # its own end only: EOF if it dies before it is ready
        if select.select([ready], [], [], 10)[0]:
            os.read(ready, 1)
    except OSError:
        pass  # no stack: the box has its own namespace, with no network
    finally:
        for fd in held:
            os.close(fd)


def _start_stack(pid: int, owner: int, told: int) -> None:
    """slirp4netns started on the box's network, joined through its owner (the descriptor of a user
    namespace), the host's loopback out of reach, its own seccomp filter on; ready when told is."""
    options = ["--configure", "--mtu=65520", "--disable-host-loopback", "--enable-seccomp"]
    options += [f"--userns-path=/proc/self/fd/{owner}", "--ready-fd", str(told)]
    subprocess.Popen(
        [project.program(NETWORK_STACK) or NETWORK_STACK, *options, str(pid), "tap0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        pass_fds=(owner, told),
        preexec_fn=functools.partial(_child, []),
    )


@functools.cache
def _seccomp_filter(arches: tuple[str, ...] = ()) -> bytes:
    """The box's seccomp program, built and exported as BPF by libseccomp (libseccomp2, in Debian
    and Raspberry Pi OS) for this machine's ABIs (or those named, for tests): b"" where libseccomp
    is missing or fails. libseccomp also covers 32-bit x86's socketcall(SYS_SOCKET, …)."""
    import ctypes

    try:
        lib = _libseccomp(ctypes.CDLL("libseccomp.so.2"))
    except OSError:
        return b""
    context = lib.seccomp_init(0x7FFF0000)  # SCMP_ACT_ALLOW: all that is not refused below
    if not context:
        return b""
    try:
        built = _seccomp_arches(lib, context, arches) and _seccomp_rules(lib, context)
        return _seccomp_export(lib, context) if built else b""
    finally:
        lib.seccomp_release(context)


def _libseccomp(lib):
    """libseccomp's functions amas calls, with their C types."""
    import ctypes

    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_arch_native.restype = ctypes.c_uint32
    lib.seccomp_arch_resolve_name.restype = ctypes.c_uint32
    lib.seccomp_arch_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_arch_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int]
    lib.seccomp_rule_add_array.argtypes += [ctypes.c_uint, ctypes.c_void_p]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    return lib


def _seccomp_arches(lib, context: int, arches: tuple[str, ...]) -> bool:
    """The filter made for the native ABI's family (x86_64 with 32-bit x86 and x32; arm64 with arm),
    or the ABIs named. A process of an ABI left out is killed, never let through."""
    native = lib.seccomp_arch_native()
    family = [f for f in SECCOMP_ARCHES if native in [_arch_token(lib, n) for n in f]]
    for name in arches or (family[0] if family else ()):
        token = _arch_token(lib, name)
        # -17 (EEXIST): the native ABI, there from the start
        if not token or lib.seccomp_arch_add(context, token) not in (0, -17):
            return False
    return True


def _arch_token(lib, name: str) -> int:
    """libseccomp's token for an ABI's name (0 for a name it does not know)."""
    return lib.seccomp_arch_resolve_name(name.encode())


def _seccomp_rules(lib, context: int) -> bool:
    """socket(AF_UNIX, …) refused with EPERM (a session bus, ssh-agent, docker or systemd reached
    through a socket file, read-only or not), and io_uring_setup (its socket and connect operations
    pass no seccomp filter). The family is compared on its low 32 bits, as the kernel reads it:
    0x1_0000_0001 is AF_UNIX too."""
    import ctypes

    class Compare(ctypes.Structure):  # struct scmp_arg_cmp
        _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int)]
        _fields_ += [("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]

    eperm = 0x00050000 | 1  # SCMP_ACT_ERRNO(EPERM)
    unix = Compare(0, 7, 0xFFFFFFFF, 1)  # argument 0, SCMP_CMP_MASKED_EQ, mask, AF_UNIX
    socket = lib.seccomp_syscall_resolve_name(b"socket")
    uring = lib.seccomp_syscall_resolve_name(b"io_uring_setup")
    done = lib.seccomp_rule_add_array(context, eperm, socket, 1, ctypes.byref(unix))
    return done == 0 and lib.seccomp_rule_add_array(context, eperm, uring, 0, None) == 0


def _seccomp_export(lib, context: int) -> bytes:
    """The filter as the BPF program bwrap's --seccomp reads."""
    fd = os.memfd_create("amas-seccomp")
    try:
        if lib.seccomp_export_bpf(context, fd) != 0:
            return b""
        size = os.lseek(fd, 0, os.SEEK_CUR)
        return os.pread(fd, size, 0)
    finally:
        os.close(fd)


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
