"""The box's network when it has one (`sandbox_network: true`, or a run granted the network): the
box always has its own network namespace; slirp4netns, a user-mode stack started by amas outside
the box, joins it once bwrap has set up its loopback, with the host's loopback out of its reach.
Where the host resolves names on its own loopback, the box is given slirp4netns's resolver."""

import contextlib
import functools
import json
import os
import re
import select
import subprocess
import time
from pathlib import Path

from amas_code import cgroups, project

NETWORK_STACK = "slirp4netns"  # the user-mode network stack of `sandbox_network: true`
SLIRP_RESOLVER = "nameserver 10.0.2.3\n"  # slirp4netns's DNS forwarder, in the box's network


def loopback_resolver(resolv: Path) -> bool:
    """Whether the host resolves names through a server on its loopback, which is not the box's."""
    try:
        text = resolv.read_text(errors="replace")
    except OSError:
        return False
    servers = re.findall(r"^\s*nameserver\s+(\S+)", text, re.MULTILINE)
    return any(s.startswith("127.") or s == "::1" for s in servers)


def start(kept: tuple[int, int] | None) -> None:
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
        preexec_fn=functools.partial(cgroups.child, []),
    )
