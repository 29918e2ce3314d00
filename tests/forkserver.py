"""A fork server for the runs of amas the tests start: it imports the model library once, then forks
each run.

Half of the suite's CPU time went into importing litellm afresh (2.4 s) in every
`python -m amas_code` a test started. The tests' model is a server of their own (`openai/test-model`
at 127.0.0.1: the direct path), so what is imported once is what that path imports: the openai SDK's
client, entered as amas enters it (direct.load: the package without its every type), and what its
first request imports (WARM). One-shot runs on the litellm path (by their AMAS_MODEL) are forked
from a second server that imported litellm too (2.5-3 s of CPU each, else); a forked run on the
direct path has what a user's process has (no litellm). A forked run is its
own process as a user's would be: its own session, the test's environment, folder and
`python -m amas_code`'s argv; amas_code itself is not left imported here. No import starts a thread
(checked), so forking after them is safe.

- One-shot runs (`Forkserver.run`): no controlling terminal, stdin a pipe, stdout and stderr files.
- Runs on a pseudo-terminal (`Forkserver.argv`, for pexpect): a small client started on the terminal
  passes it to the run, which makes it its controlling terminal (Ctrl+C, window sizes and /dev/tty
  are the run's) and ends as the run ends. Taking a terminal from another session needs
  CAP_SYS_ADMIN; without it the run is started afresh.
A test about an import itself starts amas afresh (conftest.FRESH).

Run as `python forkserver.py SOCKET` (the server) or `... --client SOCKET ARGS`.
"""

import fcntl
import importlib
import io
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import termios
import threading
import time
import traceback

HEADER = 16  # bytes: the length of the request that follows, in decimal
# what a run's first request imports besides the client (the HTTP layers, the CA bundle), imported
# once here instead of in every run
WARM = ("httpcore", "h11", "certifi", "rich.live", "rich.markdown", "rich.spinner")


def warm(library: str) -> None:
    """The direct path's modules, entered as amas enters them, and litellm too for a server of runs
    on its path; amas_code itself is then dropped from sys.modules again (a run imports the tests'
    own copy, afresh)."""
    from amas_code import direct, providers

    direct.load()
    if library == "litellm":
        providers.load()
    for name in WARM:
        importlib.import_module(name)
    for name in [m for m in sys.modules if m.partition(".")[0] == "amas_code"]:
        del sys.modules[name]


def serve(path: str, library: str) -> None:
    before = dict(os.environ)
    warm(library)
    imported = {k: v for k, v in os.environ.items() if k not in before}

    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen()
    print("ready", flush=True)
    while True:
        conn, _ = listener.accept()
        with conn:
            try:
                handle(conn, listener, imported)
            except Exception:  # a client gone, a fork refused: that run fails, the server goes on
                traceback.print_exc()


def handle(conn: socket.socket, listener: socket.socket, imported: dict) -> None:
    """One run: its request read, a child forked for it, its pid and then its exit code sent back.
    `imported` is what the warm imports put in the environment, which a fresh run would have too."""
    header, fds, _, _ = socket.recv_fds(conn, HEADER, 3)
    body = b""
    while len(body) < int(header):
        body += conn.recv(int(header) - len(body))
    pid = fork()
    if pid == 0:
        listener.close()
        request = json.loads(body)
        request["env"] = {**imported, **request["env"]}
        child(request, fds, conn)
    for fd in fds:
        os.close(fd)
    try:
        conn.sendall(b"%d\n" % pid)
    finally:  # reaped even when its client went away
        _, status = os.waitpid(pid, 0)
    conn.sendall(b"%d\n" % os.waitstatus_to_exitcode(status))


def fork() -> int:
    """os.fork, waiting out a moment with no process to spare (a fork-bomb test may be running)."""
    for _ in range(100):
        try:
            return os.fork()
        except BlockingIOError:
            time.sleep(0.1)
    return os.fork()


def child(request: dict, fds: list[int], conn: socket.socket) -> None:
    """Become `python -m amas_code ARGS` in the test's folder,
    environment and files; never return."""
    code = 1
    try:
        conn.close()
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            os.close(fd)
        if request.get("tty"):
            take_terminal()
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = ["amas", *request["args"]]
        sys.path[0] = os.getcwd()  # as `python -m` sets it
        import runpy

        runpy.run_module("amas_code", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else int(e.code is not None)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def take_terminal() -> None:
    """The terminal the client was started on becomes this run's own: the first of stdin, stdout
    and stderr that is one (stdin may be a pipe, stdout a file, as a shell's redirections make)."""
    tty = next((fd for fd in (0, 1, 2) if os.isatty(fd)), None)
    if tty is None:
        return
    fcntl.ioctl(tty, termios.TIOCSCTTY, 1)  # taken from the client's session (we are root)
    os.tcsetpgrp(tty, os.getpid())  # Ctrl+C and window sizes reach this run
    # as a terminal's program starts, even if the server ignored them
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


class Forkserver:
    """The server process and its socket; one per pytest worker."""

    def __init__(self, env: dict, library: str = "direct"):
        self.dir = tempfile.TemporaryDirectory(prefix="amas-fork")
        self.path = os.path.join(self.dir.name, "socket")
        self.proc = subprocess.Popen(
            [sys.executable, __file__, self.path, library],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=open(os.path.join(self.dir.name, "log"), "wb"),
            start_new_session=True,
        )
        if self.proc.stdout.readline() != b"ready\n":
            raise RuntimeError("the fork server did not start")

    def run(self, args, input, env: dict, timeout: float) -> subprocess.CompletedProcess:
        """As subprocess.run(..., input=input, capture_output=True, text=True, timeout=timeout);
        input is text, or bytes fed as they are (stdout and stderr are text either way)."""
        body = json.dumps({"args": list(args), "env": env, "cwd": os.getcwd()}).encode()
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            read, write = os.pipe()
            conn = socket.socket(socket.AF_UNIX)
            try:
                conn.connect(self.path)
            except OSError:
                raise RuntimeError(f"the fork server is gone: {self.log()}") from None
            with conn:
                socket.send_fds(
                    conn, [b"%*d" % (HEADER, len(body))], [read, out.fileno(), err.fileno()]
                )
                conn.sendall(body)
                os.close(read)
                data = input if isinstance(input, bytes) else input.encode()
                threading.Thread(target=_feed, args=(write, data), daemon=True).start()
                code = self._wait(conn, timeout)
            result = [_text(f) for f in (out, err)]
        if code is None:
            raise subprocess.TimeoutExpired(["amas", *args], timeout, *result)
        return subprocess.CompletedProcess(["amas", *args], code, *result)

    def _wait(self, conn: socket.socket, timeout: float) -> int | None:
        """The run's exit code, or None when it ran past the timeout (then it and all it started
        are killed)."""
        conn.settimeout(timeout)  # the pid comes at once; the exit code when the run ends
        lines = conn.makefile("rb")
        pid = int(lines.readline())
        try:
            return int(lines.readline())
        except TimeoutError:
            try:
                os.killpg(pid, signal.SIGKILL)  # the server reaps it
            except ProcessLookupError:  # it ended just now
                pass
            return None

    def argv(self, args) -> list[str]:
        """The command that runs `python -m amas_code ARGS` on the terminal it is started on: forked
        where a run may take that terminal (CAP_SYS_ADMIN), else started afresh."""
        if not _may_take_terminals():
            return [sys.executable, "-m", "amas_code", *args]
        return [sys.executable, __file__, "--client", self.path, *args]

    def log(self) -> str:
        with open(os.path.join(self.dir.name, "log"), errors="replace") as log:
            return log.read()[-3000:]

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)
        self.proc.stdout.close()
        self.dir.cleanup()


def _may_take_terminals() -> bool:
    """Whether this process has CAP_SYS_ADMIN, which TIOCSCTTY needs to take a terminal from
    another session (root on a plain machine has it; root in a default container does not)."""
    with open("/proc/self/status") as status:
        caps = next(line for line in status if line.startswith("CapEff:"))
    return bool(int(caps.split()[1], 16) & 1 << 21)


def _feed(fd: int, data: bytes) -> None:
    try:
        with open(fd, "wb") as pipe:
            pipe.write(data)
    except BrokenPipeError:  # amas did not read it all
        pass


def _text(file) -> str:
    """What subprocess's text mode would give: decoded, newlines made \\n."""
    file.seek(0)
    return io.TextIOWrapper(io.BytesIO(file.read())).read()


def client(path: str, args: list[str]) -> None:
    """`python forkserver.py --client SOCKET ARGS`, as pexpect starts it on a pseudo-terminal: hand
    the terminal, folder and environment to a run forked by the server, and end as it ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is the run's, once it has the terminal
    body = json.dumps({"args": args, "env": dict(os.environ), "cwd": os.getcwd(), "tty": True})
    conn = socket.socket(socket.AF_UNIX)
    conn.connect(path)
    socket.send_fds(conn, [b"%*d" % (HEADER, len(body))], [0, 1, 2])
    conn.sendall(body.encode())
    lines = conn.makefile("rb")
    pid = int(lines.readline())

    def end(*_):  # pexpect closing us: the run goes too
        try:
            os.killpg(pid, signal.SIGKILL)
        finally:
            os._exit(129)

    for sig in (signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, end)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)  # the terminal is the run's alone: its end is the terminal's end
    code = int(lines.readline())
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code)


if __name__ == "__main__":
    if sys.argv[1] == "--client":
        client(sys.argv[2], sys.argv[3:])
    else:
        serve(sys.argv[1], sys.argv[2])
