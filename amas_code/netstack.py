"""The box's network when it has one (`sandbox_network: true`, or a run granted the network): the
box always has its own network namespace; slirp4netns, a user-mode stack started by amas outside
the box, joins it once bwrap has set up its loopback, with the host's loopback out of its reach,
and the host's own addresses and the private ranges unreachable in it (slirp4netns connects from
the host: the host's services on its LAN address would answer). Where the host resolves names on
its own loopback, the box is given slirp4netns's resolver."""

import contextlib
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
# the private ranges (RFC 1918, link-local with the clouds' metadata servers, shared CGNAT): out of
# the box's reach unless the user's config says `sandbox_network: lan`; slirp4netns's own
# 10.0.2.0/24 stays reachable, its route being the more specific
PRIVATE = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "100.64.0.0/10")
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000


def loopback_resolver(resolv: Path) -> bool:
    """Whether the host resolves names through a server on its loopback, which is not the box's."""
    try:
        text = resolv.read_text(errors="replace")
    except OSError:
        return False
    servers = re.findall(r"^\s*nameserver\s+(\S+)", text, re.MULTILINE)
    return any(s.startswith("127.") or s == "::1" for s in servers)


def start(kept: tuple[int, int] | None, lan: bool = False) -> None:
    """The user-mode stack started on the box's network namespace before the command runs, the
    host's loopback out of its reach (--disable-host-loopback), the host's addresses and (unless
    lan) the private ranges unreachable. If it does not start, the command runs with no network:
    never the host's."""
    if not kept:
        return
    info, block = kept
    try:
        pid = _child_pid(info)
        if pid and _loopback_up(pid):
            _slirp(pid, lan)
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


def _slirp(pid: int, lan: bool) -> None:
    """slirp4netns in the box's network namespace, waited for until it is ready (10 s at most),
    once the places it must not reach are unreachable there (if they cannot be, no stack). It is a
    child of amas: killed with the command's strays, and when amas dies."""
    import fcntl

    held = []
    try:
        held.append(os.open(f"/proc/{pid}/ns/net", os.O_RDONLY))
        # the user namespace that owns the network (bwrap nests the box's own inside it)
        held.append(fcntl.ioctl(held[0], 0xB701))  # NS_GET_USERNS
        if not _unreachable(held[1], held[0], _refused(lan)):
            return
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
        preexec_fn=cgroups.dies_with_amas,
    )


def _refused(lan: bool) -> list[str]:
    """What the box's network must not reach: each of the host's own IPv4 addresses (slirp4netns
    has no IPv6 here), and the private ranges unless lan."""
    import psutil

    found = [a.address for addrs in psutil.net_if_addrs().values() for a in addrs]
    own = [f"{a}/32" for a in found if "." in a and not a.startswith("127.")]
    if lan:
        return own
    return [*own, *PRIVATE]


def _unreachable(owner: int, net: int, networks: list[str]) -> bool:
    """Routes of type unreachable to each network, in the box's network namespace: made by a
    child of amas that joins it (through its owner, a user namespace amas's user owns, as
    slirp4netns does). Whether they all were made."""
    import ctypes
    import ipaddress  # noqa: F401 (imported before the fork: the child only uses them)
    import struct  # noqa: F401

    setns = ctypes.CDLL(None, use_errno=True).setns  # looked up before the fork
    child = os.fork()
    if child == 0:  # single-threaded: it may join a user namespace
        code = 1
        with contextlib.suppress(BaseException):
            joined = setns(owner, CLONE_NEWUSER) == 0 and setns(net, CLONE_NEWNET) == 0
            if joined and _routes(networks):
                code = 0
        os._exit(code)
    return os.waitpid(child, 0)[1] == 0


def _routes(networks: list[str]) -> bool:
    """RTM_NEWROUTE of type unreachable for each network, through rtnetlink; whether each was
    acknowledged without an error."""
    import ipaddress
    import socket
    import struct

    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE) as link:
        link.settimeout(5)  # the kernel answers at once; never a command held forever
        for seq, text in enumerate(networks, 1):
            network = ipaddress.ip_network(text, strict=False)
            # rtmsg: AF_INET, prefix, main table, static, universe scope, RTN_UNREACHABLE
            route = struct.pack("=BBBBBBBBI", 2, network.prefixlen, 0, 0, 254, 4, 0, 7, 0)
            route += struct.pack("=HH", 8, 1) + network.network_address.packed  # RTA_DST
            # NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE
            link.send(
                struct.pack("=IHHII", 16 + len(route), 24, 0x1 | 0x4 | 0x400 | 0x100, seq, 0)
                + route
            )
            answer = link.recv(4096)
            if struct.unpack_from("=i", answer, 16)[0] != 0:  # nlmsgerr's error
                return False
    return True
