"""The seccomp filter as a program: system-call numbers checked against the kernel headers, and the BPF code
run through a small interpreter of the classic-BPF instructions it uses."""

import errno
import re
import struct
from pathlib import Path

import pytest

from podium.sandbox import seccomp
from podium.sandbox.seccomp import AARCH64, ALLOW, ERRNO, KILL_PROCESS, X86_64, Architecture, build_filter

HEADERS = {
    "x86_64": Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
    "aarch64": Path("/usr/include/asm-generic/unistd.h"),  # arm64 uses the generic table
}
CLONE_NEWUSER = 0x10000000
SIGCHLD = 17
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK, AF_PACKET, AF_VSOCK = 1, 2, 10, 16, 17, 40


def evaluate(program: bytes, nr: int, arch: int, args: tuple[int, ...] = ()) -> int:
    """What the filter returns for one system call (only the instructions build_filter emits)."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, *(list(args) + [0] * (6 - len(args))))
    instructions = [struct.unpack_from("=HBBI", program, offset) for offset in range(0, len(program), 8)]
    accumulator, pc = 0, 0
    while True:
        code, jump_true, jump_false, k = instructions[pc]
        if code == seccomp.LOAD_WORD:
            accumulator = struct.unpack_from("=I", data, k)[0]
        elif code == seccomp.RETURN:
            return k
        elif code in (seccomp.JUMP_EQUAL, seccomp.JUMP_AT_LEAST, seccomp.JUMP_ANY_BIT):
            taken = {
                seccomp.JUMP_EQUAL: accumulator == k,
                seccomp.JUMP_AT_LEAST: accumulator >= k,
                seccomp.JUMP_ANY_BIT: bool(accumulator & k),
            }[code]
            pc += jump_true if taken else jump_false
        else:
            raise AssertionError(f"unexpected opcode {code:#x}")
        pc += 1


@pytest.mark.parametrize("name", ["x86_64", "aarch64"])
def test_syscall_numbers_match_the_kernel_headers(name):
    header = HEADERS[name]
    if not header.exists():
        pytest.skip(f"no {header} on this machine")
    defined = {m[1]: int(m[2]) for m in re.finditer(r"#define __NR(?:3264)?_(\w+)\s+(\d+)", header.read_text())}
    architecture = seccomp.ARCHITECTURES[name]
    for syscall, number in architecture.numbers.items():
        assert defined.get(syscall) == number, syscall


@pytest.mark.parametrize("architecture", [X86_64, AARCH64], ids=["x86_64", "aarch64"])
def test_every_listed_call_is_denied_and_others_allowed(architecture: Architecture):
    program = build_filter(architecture)
    arch = architecture.audit_arch
    for name in seccomp.denied_names(architecture):
        assert evaluate(program, architecture.numbers[name], arch) == ERRNO | errno.EPERM, name
    denied = set(architecture.numbers.values())
    for nr in range(0, 460):
        if nr not in denied:
            assert evaluate(program, nr, arch) == ALLOW, nr
    assert evaluate(program, architecture.numbers["clone3"], arch) == ERRNO | errno.ENOSYS


@pytest.mark.parametrize("architecture", [X86_64, AARCH64], ids=["x86_64", "aarch64"])
def test_clone_may_not_make_namespaces(architecture: Architecture):
    program = build_filter(architecture)
    clone = architecture.numbers["clone"]
    assert evaluate(program, clone, architecture.audit_arch, (SIGCHLD,)) == ALLOW  # fork
    assert evaluate(program, clone, architecture.audit_arch, (0x003D0F00,)) == ALLOW  # pthread_create's flags
    for flag in (CLONE_NEWUSER, 0x20000, 0x02000000, 0x04000000, 0x08000000, 0x20000000, 0x40000000):
        assert evaluate(program, clone, architecture.audit_arch, (SIGCHLD | flag,)) == ERRNO | errno.EPERM


@pytest.mark.parametrize("architecture", [X86_64, AARCH64], ids=["x86_64", "aarch64"])
def test_only_ordinary_socket_families(architecture: Architecture):
    program = build_filter(architecture)
    socket = architecture.numbers["socket"]
    for family in (AF_UNIX, AF_INET, AF_INET6, AF_NETLINK):
        assert evaluate(program, socket, architecture.audit_arch, (family,)) == ALLOW
    for family in (0, AF_PACKET, AF_VSOCK, 3, 31, 44):
        assert evaluate(program, socket, architecture.audit_arch, (family,)) == ERRNO | errno.EPERM


def test_foreign_conventions_are_refused():
    program = build_filter(X86_64)
    assert evaluate(program, 1, 0x40000003) == KILL_PROCESS  # i386 (int 0x80) calls
    assert evaluate(program, 0x40000000 | 1, X86_64.audit_arch) == ERRNO | errno.ENOSYS  # x32 calls
    assert evaluate(build_filter(AARCH64), 1, X86_64.audit_arch) == KILL_PROCESS
