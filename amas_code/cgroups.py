"""The box's limits that hold for root too: where amas may make cgroups (as root; cgroup v1 or v2),
one per controller (processes, memory) with the box's limits, made once per process, swept when an
amas killed with -9 left them, removed when amas exits; and what a child does before it runs (die
with amas, join those cgroups). The rlimits of an unprivileged box are prlimit's (sandbox)."""

import contextlib
import functools
import os
import signal
import time
from pathlib import Path

CGROUP = {"pids": ("pids.max",), "memory": ("memory.max", "memory.limit_in_bytes")}


@functools.cache
def limited(procs: int, memory: int) -> list[Path]:
    """A cgroup per controller with these limits (processes; bytes of memory), where amas may make
    one (root; cgroup v1 or v2): root ignores the process rlimit, a cgroup does not. Made once per
    process (one command runs at a time; making and removing one per command costs ~50 ms) and
    removed when amas exits."""
    import atexit

    limits = {"pids": procs, "memory": memory}
    made = []
    for controller, folder in _own_cgroups().items():
        _sweep(folder)
        path = folder / f"amas-{os.getpid()}-{procs}-{memory}"
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
    """Where a line of /proc/self/cgroup puts amas for a controller (v1: one tree each; v2: one
    tree)."""
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


def dies_with_amas() -> None:
    """In a child before it runs (an unboxed command, the network stack): it dies when amas dies,
    kill -9 too. Python in the child makes the spawn a fork that copies amas's page tables (~10 ms
    at 400 MB): a boxed command needs none, bwrap's --die-with-parent does it."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


# a shell that moves itself into each cgroup given before `--`, then becomes the command (exec keeps
# its pid): the command is in them before it can start anything
JOIN = 'while [ "$1" != -- ]; do { echo 0 > "$1/cgroup.procs"; } 2>/dev/null; shift; done; shift'


def joined(groups: list[Path]) -> list[str]:
    """The argv prefix that runs a command in these cgroups (none: nothing to add)."""
    if not groups:
        return []
    return ["/bin/sh", "-c", JOIN + '; exec "$@"', "sh", *map(str, groups), "--"]
