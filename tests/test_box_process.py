"""The box's process side: its flags as a value, its seccomp filter on each ABI amas runs on, and
real attacks through bubblewrap as root and as an unprivileged user."""

import dataclasses
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest
from conftest import make_config, run_amas
from test_sandbox import boxed, place, user  # noqa: F401 (place, user: fixtures)

from amas_code import boxview, effects, netstack, sandbox, seccomp

EPERM = 0x00050001  # SECCOMP_RET_ERRNO | EPERM
ALLOW = 0x7FFF0000
AF_UNIX, AF_INET, UNIX_WIDE = 1, 2, 0x1_0000_0001  # the kernel reads the family's low 32 bits
# each ABI's audit token and numbers, from the kernel's syscall tables (not from libseccomp)
ABIS = {
    "x86_64": (0xC000003E, dict(socket=41, socketpair=53, io_uring_setup=425, getpid=39)),
    "x32": (0xC000003E, dict(socket=1 << 30 | 41, socketpair=1 << 30 | 53, getpid=1 << 30 | 39)),
    "x86": (0x40000003, dict(socket=359, socketpair=360, io_uring_setup=425, getpid=20)),
    "aarch64": (0xC00000B7, dict(socket=198, socketpair=199, io_uring_setup=425, getpid=172)),
    "arm": (0x40000028, dict(socket=281, socketpair=288, io_uring_setup=425, getpid=20)),
}
FAMILY = {"x86_64": "x86_64 x86 x32", "x32": "x86_64 x86 x32", "x86": "x86_64 x86 x32"}
needs_box = pytest.mark.skipif(bool(sandbox.probe()), reason="bubblewrap cannot run here")


def run_bpf(program: bytes, nr: int, arch: int, args=(0,) * 6) -> int:
    """What a classic BPF seccomp program returns for one system call (the kernel's reading of it:
    seccomp_data is nr, arch, instruction pointer, six 64-bit arguments)."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, *(list(args) + [0] * 6)[:6])
    code = [struct.unpack_from("<HBBI", program, i) for i in range(0, len(program), 8)]
    state, pc = {"a": 0, "x": 0, "memory": [0] * 16}, 0
    for _ in range(10_000):
        op, jt, jf, k = code[pc]
        pc += 1
        if op == 0x20:  # ld [k]
            state["a"] = struct.unpack_from("<I", data, k)[0]
        elif op in (0x00, 0x01, 0x60, 0x61, 0x02, 0x03, 0x07, 0x87, 0x54, 0x44):
            bpf_move(op, k, state)
        elif op == 0x05:  # ja
            pc += k
        elif op & 0x07 == 0x05:  # jeq, jgt, jge, jset against k or x
            pc += jt if bpf_test(op, state["a"], k if op & 0x08 == 0 else state["x"]) else jf
        elif op in (0x06, 0x16):  # ret k, ret a
            return k if op == 0x06 else state["a"]
        else:
            raise AssertionError(f"BPF opcode {op:#x} not simulated")
    raise AssertionError("the program did not return")


def bpf_move(op: int, k: int, state: dict) -> None:
    """Loads, stores and the two ALU operations libseccomp uses."""
    a, x, memory = state["a"], state["x"], state["memory"]
    if op in (0x02, 0x03):
        memory[k] = a if op == 0x02 else x
    stored = memory[k] if op in (0x60, 0x61) else 0  # k is an index only for these
    moved = {0x00: (k, x), 0x01: (a, k), 0x60: (stored, x), 0x61: (a, stored)}
    moved |= {0x07: (a, a), 0x87: (x, x), 0x54: (a & k, x), 0x44: (a | k, x)}
    state["a"], state["x"] = moved.get(op, (a, x))


def bpf_test(op: int, a: int, value: int) -> bool:
    return {0x10: a == value, 0x20: a > value, 0x30: a >= value, 0x40: bool(a & value)}[op & 0xF0]


def test_the_process_flags_are_a_value():
    box = sandbox.Box(tmp=1 << 20)
    assert sandbox._process(box, {"seccomp": 7}) == [
        *sandbox._proc_masks(),
        *("--size", str(1 << 20), "--tmpfs", "/dev/shm", "--remount-ro", "/dev"),
        *("--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-net"),
        *("--new-session", "--die-with-parent", "--cap-drop", "ALL"),
        *("--seccomp", "7"),
    ]
    # what Docker masks of /proc and /sys (a file under /dev/null, a folder under an empty
    # read-only one) and keeps read-only, where this kernel has it
    masks = sandbox._proc_masks()
    windows = [masks[at : at + 4] for at in range(len(masks))]
    for entry in ("/proc/kcore", "/proc/keys", "/proc/timer_list", "/sys/firmware", "/proc/acpi"):
        masked = ["--ro-bind", "/dev/null", entry]
        if os.path.isdir(entry):
            masked = ["--tmpfs", entry, "--remount-ro", entry]
        assert not os.path.exists(entry) or masked in [w[: len(masked)] for w in windows]
    for entry in ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"):
        assert not os.path.exists(entry) or ["--ro-bind", entry, entry] in [w[:3] for w in windows]
    network = sandbox._process(sandbox.Box(network=True), {"info-fd": 8, "block-fd": 9})
    assert network[-4:] == ["--info-fd", "8", "--block-fd", "9"]
    assert "--unshare-net" in network  # with the network on too: a namespace of its own
    assert sandbox._tmp(box) == ["--size", str(1 << 20), "--tmpfs", "/tmp"]
    assert sandbox._tmp(sandbox.Box(scratch="/s")) == ["--bind", "/s", "/tmp"]


@pytest.mark.parametrize("abi", ABIS)
def test_the_filter_refuses_unix_sockets_on_each_abi(abi):
    arches = tuple(FAMILY.get(abi, "aarch64 arm").split())
    program = seccomp.program(arches)
    assert program, "libseccomp2 is needed (apt install libseccomp2)"
    arch, nr = ABIS[abi]
    assert run_bpf(program, nr["socket"], arch, [AF_UNIX, 1, 0]) == EPERM
    assert run_bpf(program, nr["socket"], arch, [AF_INET, 1, 0]) == ALLOW
    assert run_bpf(program, nr["socketpair"], arch, [AF_UNIX, 1, 0]) == ALLOW
    assert run_bpf(program, nr["socketpair"], arch, [AF_UNIX, 2 | 0o2000000, 0]) == EPERM
    assert run_bpf(program, nr["socketpair"], arch, [AF_INET, 2, 0]) == ALLOW
    assert run_bpf(program, nr["getpid"], arch) == ALLOW
    if arch >> 31:  # a 64-bit ABI: the upper half of the family is not the kernel's
        assert run_bpf(program, nr["socket"], arch, [UNIX_WIDE, 1, 0]) == EPERM
    if "io_uring_setup" in nr:  # its socket and connect operations pass no filter
        assert run_bpf(program, nr["io_uring_setup"], arch, [8, 0]) == EPERM
    if abi == "x86":  # 32-bit x86's socketcall(SYS_SOCKET, …): its arguments are in memory
        assert run_bpf(program, 102, arch, [1, 0]) == EPERM
        # SYS_SOCKETPAIR: its type is in memory, so every pair through socketcall is refused
        assert run_bpf(program, 102, arch, [8, 0]) == EPERM
        assert run_bpf(program, 102, arch, [3, 0]) == ALLOW  # SYS_CONNECT


def test_without_a_filter_the_box_hides_the_sockets_and_says_it_is_weaker(monkeypatch, tmp_path):
    if sandbox.probe():
        pytest.skip(f"no box here: {sandbox.probe()}")
    monkeypatch.setattr(seccomp, "program", lambda *arches: b"")
    line = sandbox.status(make_config())[1]
    assert line.endswith(
        "; weaker: no seccomp filter (install libseccomp2), "
        + ("only the known Unix sockets are hidden")
    )
    run = tmp_path / "run"
    (run / "user" / "1000").mkdir(parents=True)
    (run / "docker.sock").touch()
    places = (str(run / "user"), str(run / "dbus"), str(run / "docker.sock"))
    monkeypatch.setattr(boxview, "UNIX_SOCKET_PLACES", places)
    args = sandbox._bwrap(tmp_path, sandbox.Box(), {})
    assert ["--tmpfs", str(run / "user")] == args[args.index(str(run / "user")) - 1 :][:2]
    assert args[args.index(str(run / "docker.sock")) - 2 :][:3] == [
        "--ro-bind",
        "/dev/null",
        str(run / "docker.sock"),
    ]
    assert "--seccomp" not in args and str(run / "dbus") not in args


def test_network_mode_without_its_stack_says_so(monkeypatch, tmp_path):
    if sandbox.probe():
        pytest.skip(f"no box here: {sandbox.probe()}")
    monkeypatch.setattr(netstack, "NETWORK_STACK", "no-such-stack")
    line = sandbox.status(make_config(sandbox_network=True))[1]
    assert line.startswith(
        "commands run in a sandbox (bubblewrap): no network (no-such-stack missing)"
    )
    command = effects.Command("cat /proc/net/route; grep -c lo /proc/net/dev", 10)
    result = sandbox.run(
        dataclasses.replace(command, env=dict(os.environ)), tmp_path, sandbox.Box(network=True)
    )
    # the route table's header alone, and one interface: the box's own loopback
    lines = result.splitlines()
    assert lines[1].startswith("Iface\t") and lines[2:] == ["1", "[exit code 0]"]


class UnixServer:
    """A listening Unix socket outside the box, like a session bus:
    what connected, and what it sent."""

    def __init__(self, path: str):
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(path)
        os.chmod(path, 0o777)
        self.server.listen()
        self.server.settimeout(0.5)
        self.heard = []
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        for _ in range(20):  # 10 s at most
            try:
                conn, _ = self.server.accept()
            except OSError:
                continue
            with conn:
                self.heard.append(conn.recv(100))

    def close(self):
        self.server.close()
        self.thread.join()


def test_no_unix_socket_outside_is_reached_and_socketpair_works(user, place):  # noqa: F811
    bus = place.parent.parent / "run" / "user" / "1000"
    bus.mkdir(parents=True)
    for folder in (bus, bus.parent, bus.parent.parent):
        folder.chmod(0o755)
    server = UnixServer(str(bus / "bus"))
    try:
        dial = f"s = socket.socket(socket.AF_UNIX); s.connect('{bus / 'bus'}'); s.sendall(b'hello')"
        command = f'python3 -c "import socket; {dial}"'
        result = boxed(user, place, command, box={})
        assert "PermissionError: [Errno 1] Operation not permitted" in result
        pair = "a, b = socket.socketpair(); a.send(b'x'); print('pair', b.recv(1))"
        pool = "import multiprocessing as m; print(m.Pool(2).map(abs, [-1, -2]))"
        result = boxed(user, place, f'python3 -c "import socket; {pair}; {pool}"', box={})
        assert "pair b'x'\n[1, 2]\n[exit code 0]" in result
        assert "[exit code 0]" in boxed(user, place, command)  # unboxed, it connects
    finally:
        server.close()
    assert server.heard == [b"hello"]


def test_the_upper_half_of_the_family_and_io_uring_do_not_get_around(user, place):  # noqa: F811
    if os.uname().machine != "x86_64":
        pytest.skip("x86_64's numbers")
    calls = "print(c.syscall(41, ctypes.c_long(0x100000001), 1, 0), ctypes.get_errno()); "
    calls += "print(c.syscall(425, 1, ctypes.c_void_p(0)), ctypes.get_errno())"
    script = f"import ctypes; c = ctypes.CDLL(None, use_errno=True); {calls}"
    assert "\n-1 1\n-1 1\n[exit code 0]" in boxed(user, place, f'python3 -c "{script}"', box={})


def i386(code: bytes) -> bytes:
    """A static 32-bit x86 program running code, then exit(-eax): 1 for EPERM, 253 for fd 3."""
    base, body = 0x08048000, code + bytes.fromhex("f7d8 89c3 b801000000 cd80")
    size = 52 + 32 + len(body)
    header = b"\x7fELF\x01\x01\x01" + bytes(9)
    header += struct.pack("<HHIIIIIHHHHHH", 2, 3, 1, base + 84, 52, 0, 0, 52, 32, 1, 0, 0, 0)
    return header + struct.pack("<8I", 1, 0, base, base, size, size, 5, 0x1000) + body


I386 = {  # int 0x80: socket(AF_UNIX, SOCK_STREAM, 0) directly, through socketcall, and socketpair
    "direct": "b867010000 bb01000000 b901000000 31d2 cd80",
    "socketcall": "6a00 6a01 6a01 89e1 bb01000000 b866000000 cd80",
    "pair": "83ec08 89e0 50 6a00 6a01 6a01 89e1 bb08000000 b866000000 cd80",
}


def test_32_bit_x86_programs_are_refused_too(user, place):  # noqa: F811
    for name, code in I386.items():
        (place / name).write_bytes(i386(bytes.fromhex(code)))
        (place / name).chmod(0o755)
    if os.uname().machine != "x86_64" or subprocess.run([place / "pair"]).returncode:
        pytest.skip("no 32-bit x86 programs run here")
    if user == "nobody":
        subprocess.run(["chown", "-R", "65534:65534", str(place)], check=True)
    assert subprocess.run([place / "direct"]).returncode == 253  # unboxed: the socket is made
    command = "for p in direct socketcall pair; do ./$p; echo $p $?; done"
    result = boxed(user, place, command, box={})
    assert "direct 1\nsocketcall 1\npair 1\n[exit code 0]" in result


def test_root_cannot_write_proc_sys(user, place):  # noqa: F811
    if user != "root":
        pytest.skip("as root: an unprivileged user cannot write /proc/sys anyway")
    sysctl = Path("/proc/sys/kernel/domainname")  # harmless: the host's NIS domain name
    before = sysctl.read_text()
    try:
        result = boxed(user, place, f"echo amas-was-here > {sysctl}", box={})
        assert sysctl.read_text() == before
        assert "Read-only file system" in result
    finally:
        if sysctl.read_text() != before:
            sysctl.write_text(before)


def test_dev_shm_stops_at_its_size_and_dev_takes_no_file(user, place):  # noqa: F811
    command = "head -c 3000000 /dev/zero > /dev/shm/big; ls -l /dev/shm/big; echo x > /dev/new"
    result = boxed(user, place, command, box={"tmp": 1 << 20})
    assert "No space left on device" in result and f" {1 << 20} " in result
    assert "cannot create /dev/new: Read-only file system" in result


def test_the_hosts_abstract_sockets_are_not_in_the_network_box(user, place):  # noqa: F811
    if not shutil.which(netstack.NETWORK_STACK):
        pytest.skip(f"{netstack.NETWORK_STACK} is not installed")
    name = f"amas-test-{os.getpid()}"
    held = socket.socket(socket.AF_UNIX)
    held.bind(f"\0{name}")  # abstract: an X server's, a desktop's; no file to hide
    held.listen()
    try:
        assert f"@{name}" in Path("/proc/net/unix").read_text()
        result = boxed(user, place, f"grep -c @{name} /proc/net/unix", box={"network": True})
        assert "\n0\n[exit code 1]" in result
    finally:
        held.close()


def test_the_session_tmp_is_one_folder_for_its_commands(user, place):  # noqa: F811
    scratch = place.parent / ".amas" / "tmp" / f"{os.getpid()}-test"  # made at the first command
    box = {"scratch": str(scratch)}
    assert "[exit code 0]" in boxed(user, place, "echo kept > /tmp/x; mkdir /tmp/d", box=box)
    assert "\nkept\n[exit code 0]" in boxed(user, place, "cat /tmp/x", box=box)
    assert (scratch / "x").read_text() == "kept\n" and oct(scratch.stat().st_mode)[-3:] == "700"
    assert "\nkept\n" not in boxed(user, place, "cat /tmp/x", box={})  # a box of its own


@needs_box
def test_one_tmp_for_the_session_removed_at_exit(project, home, llm):
    llm.reply(tool="shell_command", command="echo kept > /tmp/x")
    llm.reply(tool="shell_command", command="cat /tmp/x")
    llm.reply(text="done")
    done = run_amas("-y", "save it, then read it", llm=llm)
    assert done.returncode == 0, done.stderr
    assert llm.requests[2]["messages"][-1]["content"].startswith(
        "$ cat /tmp/x\nkept\n[exit code 0]"
    )
    assert os.listdir(home / ".amas" / "tmp") == []  # the session's folder, gone with amas


def test_a_session_tmp_past_its_size_is_emptied(tmp_path):
    box = sandbox.Box(tmp=1 << 20, scratch=str(tmp_path / "s"))
    assert sandbox._ready(box) == box and os.path.isdir(box.scratch)
    (tmp_path / "s" / "small").write_bytes(b"x" * 1000)
    assert sandbox._tidy_tmp(box) == ""
    (tmp_path / "s" / "big").write_bytes(b"x" * (2 << 20))
    assert sandbox._tidy_tmp(box) == "\n[/tmp held 2 MB, more than 1 MB: it was emptied]"
    assert os.listdir(box.scratch) == []
    box.close()
    assert not os.path.exists(box.scratch)


def test_a_host_resolving_on_its_loopback_gives_the_network_box_slirps_resolver(
    tmp_path, monkeypatch
):
    resolv = tmp_path / "resolv.conf"
    resolv.write_text("# systemd-resolved\nnameserver 127.0.0.53\noptions edns0\n")
    assert netstack.loopback_resolver(resolv)
    resolv.write_text("nameserver 192.0.2.1\nsearch 127.example\n")
    assert not netstack.loopback_resolver(resolv)
    assert not netstack.loopback_resolver(tmp_path / "missing")
    args = sandbox._process(sandbox.Box(network=True), {"ro-bind-data": 5})
    assert args[-3:] == ["--ro-bind-data", "5", "/etc/resolv.conf"]
    if sandbox.probe() or not shutil.which(netstack.NETWORK_STACK):
        pytest.skip("no box with a network here")
    monkeypatch.setattr(netstack, "loopback_resolver", lambda path: True)
    command = effects.Command("cat /etc/resolv.conf", 10)
    result = sandbox.run(
        dataclasses.replace(command, env=dict(os.environ)), tmp_path, sandbox.Box(network=True)
    )
    assert result == "$ cat /etc/resolv.conf\nnameserver 10.0.2.3\n[exit code 0]"


@needs_box
def test_without_a_filter_a_session_bus_is_not_there(monkeypatch, tmp_path):
    base = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="amas-run-"))  # outside the box's /tmp
    (base / "user" / "1000").mkdir(parents=True)
    server = UnixServer(str(base / "user" / "1000" / "bus"))
    monkeypatch.setattr(seccomp, "program", lambda *arches: b"")
    monkeypatch.setattr(boxview, "UNIX_SOCKET_PLACES", (str(base / "user"),))
    dial = f"s = socket.socket(socket.AF_UNIX); s.connect('{base}/user/1000/bus'); s.sendall(b'hi')"
    command = effects.Command(f'python3 -c "import socket; {dial}"', 10)
    try:
        result = sandbox.run(
            dataclasses.replace(command, env=dict(os.environ)), tmp_path, sandbox.Box()
        )
        assert "FileNotFoundError" in result
        # unboxed
        assert "[exit code 0]" in sandbox.run(
            dataclasses.replace(command, env=dict(os.environ)), tmp_path
        )
    finally:
        server.close()
        shutil.rmtree(base)
    assert server.heard == [b"hi"]
