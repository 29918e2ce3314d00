"""The box's seccomp filter: built with libseccomp through ctypes for this machine's ABIs and
exported as the BPF program bwrap's --seccomp reads. It refuses Unix sockets and datagram socket
pairs (the session bus, ssh-agent, docker, systemd and the journal reached through a socket file),
io_uring, the keyring, and setuid or setgid modes; where libseccomp is missing there is no filter,
and the box hides the known socket places instead."""

import functools
import os

# the ABIs one kernel runs, by family: the box's seccomp filter covers the native ABI's family
ARCHES = (("x86_64", "x86", "x32"), ("aarch64", "arm"))


@functools.cache
def program(arches: tuple[str, ...] = ()) -> bytes:
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
        built = _arches(lib, context, arches) and _rules(lib, context)
        return _export(lib, context) if built else b""
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


def _arches(lib, context: int, arches: tuple[str, ...]) -> bool:
    """The filter made for the native ABI's family (x86_64 with 32-bit x86 and x32; arm64 with arm),
    or the ABIs named. A process of an ABI left out is killed, never let through."""
    native = lib.seccomp_arch_native()
    family = [f for f in ARCHES if native in [_arch_token(lib, n) for n in f]]
    for name in arches or (family[0] if family else ()):
        token = _arch_token(lib, name)
        # -17 (EEXIST): the native ABI, there from the start
        if not token or lib.seccomp_arch_add(context, token) not in (0, -17):
            return False
    return True


def _arch_token(lib, name: str) -> int:
    """libseccomp's token for an ABI's name (0 for a name it does not know)."""
    return lib.seccomp_arch_resolve_name(name.encode())


EPERM = 0x00050000 | 1  # SCMP_ACT_ERRNO(EPERM)
ENOSYS = 0x00050000 | 38  # SCMP_ACT_ERRNO(ENOSYS): the C library falls back to an older call
MASKED_EQ = 7  # SCMP_CMP_MASKED_EQ: (argument & mask) == value
# setuid and setgid bits, each refused alone: a box run as root would make a root-owned program
# any user can run as root
SETID = (0o4000, 0o2000)
# what the filter refuses: a system call, how, and the argument, mask and value that select it
# (none: every call); a call's rows with the same conditions but another argument are separate
RULES = (
    # a Unix socket, read-only or not: the session bus, ssh-agent, docker, systemd. The family's
    # low 32 bits, as the kernel reads it: 0x1_0000_0001 is AF_UNIX too
    ("socket", EPERM, [(0, 0xFFFFFFFF, 1)]),
    # a datagram pair: sendto with an address reaches any datagram socket of the host
    ("socketpair", EPERM, [(0, 0xFFFFFFFF, 1), (1, 0xF, 2)]),
    # 32-bit x86's socketcall(SYS_SOCKETPAIR, …): its arguments are in memory, any pair refused
    ("socketcall", EPERM, [(0, 0xFFFFFFFF, 8)]),
    ("io_uring_setup", EPERM, []),  # its socket and connect operations pass no seccomp filter
    # the session keyring (Kerberos tickets, systemd-ask-password's answers), as Docker's profile
    ("keyctl", EPERM, []),
    ("add_key", EPERM, []),
    ("request_key", EPERM, []),
    # their arguments are in memory the filter cannot read: the older calls are used instead
    ("openat2", ENOSYS, []),
    ("fchmodat2", ENOSYS, []),
    *[
        (call, EPERM, [(at, bit, bit)])
        for bit in SETID
        for call, at in (
            ("chmod", 1),
            ("fchmod", 1),
            ("fchmodat", 2),
            ("creat", 1),
            ("open", 2),
            ("openat", 3),
            ("mknod", 1),
            ("mknodat", 2),
        )
    ],
)


def _rules(lib, context: int) -> bool:
    """Each of RULES added, for every ABI of the filter that has the call."""
    import ctypes

    class Compare(ctypes.Structure):  # struct scmp_arg_cmp
        _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int)]
        _fields_ += [("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]

    for name, action, tests in RULES:
        call = lib.seccomp_syscall_resolve_name(name.encode())
        if call == -1:  # __NR_SCMP_ERROR: a name this libseccomp does not know
            continue
        compares = (Compare * 6)(*[Compare(at, MASKED_EQ, mask, v) for at, mask, v in tests])
        if lib.seccomp_rule_add_array(context, action, call, len(tests), compares) != 0:
            return False
    return True


def _export(lib, context: int) -> bytes:
    """The filter as the BPF program bwrap's --seccomp reads."""
    fd = os.memfd_create("amas-seccomp")
    try:
        if lib.seccomp_export_bpf(context, fd) != 0:
            return b""
        size = os.lseek(fd, 0, os.SEEK_CUR)
        return os.pread(fd, size, 0)
    finally:
        os.close(fd)
