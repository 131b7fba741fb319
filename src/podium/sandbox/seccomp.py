"""The sandbox's seccomp filter: a classic-BPF program, built here, that bubblewrap installs (``--seccomp FD``).

The filter allows every system call except the ones below, which fail with ``EPERM`` (``clone3`` with
``ENOSYS``, so that the C library falls back to ``clone``, whose flags the filter can read). A call made with
another architecture's convention (i386 ``int 0x80`` on x86-64) kills the process; x32 calls fail with
``ENOSYS``. Denied, by reason:

- new namespaces and mounts (a user namespace would give the code every capability inside it):
  ``unshare``, ``setns``, ``clone`` with any ``CLONE_NEW*`` flag, ``clone3``, ``mount``, ``umount2``,
  ``pivot_root``, ``chroot``, ``fsopen``, ``fsconfig``, ``fsmount``, ``fspick``, ``move_mount``,
  ``open_tree``, ``mount_setattr``;
- large kernel attack surfaces: ``io_uring_setup``, ``io_uring_enter``, ``io_uring_register``, ``bpf``,
  ``perf_event_open``, ``userfaultfd``, and the keyring (``keyctl``, ``add_key``, ``request_key``);
- reaching into other processes: ``ptrace``, ``process_vm_readv``, ``process_vm_writev``, ``pidfd_getfd``,
  ``kcmp``;
- administering the host: ``kexec_load``, ``kexec_file_load``, ``init_module``, ``finit_module``,
  ``delete_module``, ``reboot``, ``swapon``, ``swapoff``, ``acct``, ``quotactl``, ``quotactl_fd``,
  ``syslog``, ``settimeofday``, ``clock_settime``, ``vhangup``, and on x86-64 ``iopl``, ``ioperm``,
  ``modify_ldt``, ``uselib``;
- file handles that bypass path checks: ``open_by_handle_at``, ``name_to_handle_at``, ``lookup_dcookie``,
  ``fanotify_init``;
- memory the per-process limits do not count: ``memfd_create``, ``memfd_secret`` and System V IPC
  (``shmget``, ``msgget``, ``semget``); POSIX shared memory lives in the size-capped ``/dev/shm``;
- socket families other than Unix, IPv4, IPv6 and netlink (``AF_VSOCK`` would reach a virtual machine's host
  whatever the network namespace; packet, Bluetooth, … are never needed).

Why a hand-built filter rather than libseccomp: it needs no system library or compiled extension, it is
about a hundred instructions of straight-line code, and a test checks both the system-call numbers (against
the kernel headers when present) and the program itself (run through a BPF interpreter).
"""

import errno
import platform
import struct

# Classic BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h).
LOAD_WORD = 0x20  # BPF_LD | BPF_W | BPF_ABS
JUMP_EQUAL = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
JUMP_AT_LEAST = 0x35  # BPF_JMP | BPF_JGE | BPF_K
JUMP_ANY_BIT = 0x45  # BPF_JMP | BPF_JSET | BPF_K
RETURN = 0x06  # BPF_RET | BPF_K
ALLOW = 0x7FFF0000
ERRNO = 0x00050000
KILL_PROCESS = 0x80000000
# Offsets in struct seccomp_data: nr, arch, instruction pointer, then six 64-bit arguments.
NR_OFFSET = 0
ARCH_OFFSET = 4
FIRST_ARGUMENT_OFFSET = 16  # the low 32 bits on little-endian machines
X32_SYSCALL_BIT = 0x40000000
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
NAMESPACE_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
ALLOWED_SOCKET_FAMILIES = (1, 2, 10, 16)  # AF_UNIX, AF_INET, AF_INET6, AF_NETLINK

DENIED = [
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
    "mount_setattr",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "kcmp",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "quotactl_fd",
    "syslog",
    "settimeofday",
    "clock_settime",
    "vhangup",
    "open_by_handle_at",
    "name_to_handle_at",
    "lookup_dcookie",
    "fanotify_init",
    "memfd_create",
    "memfd_secret",
    "shmget",
    "msgget",
    "semget",
]
X86_64_ONLY_DENIED = ("iopl", "ioperm", "modify_ldt", "uselib")


class Architecture:
    """System-call numbers and the audit architecture value of one machine type."""

    def __init__(self, audit_arch: int, numbers: dict[str, int], *, x32_bit: bool) -> None:
        self.audit_arch = audit_arch
        self.numbers = numbers
        self.x32_bit = x32_bit


# From the kernel's arch/x86/entry/syscalls/syscall_64.tbl and include/uapi/asm-generic/unistd.h (arm64).
X86_64 = Architecture(
    0xC000003E,
    {
        "unshare": 272, "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
        "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "move_mount": 429, "open_tree": 428,
        "mount_setattr": 442, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "bpf": 321,
        "perf_event_open": 298, "userfaultfd": 323, "keyctl": 250, "add_key": 248, "request_key": 249,
        "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_getfd": 438, "kcmp": 312,
        "kexec_load": 246, "kexec_file_load": 320, "init_module": 175, "finit_module": 313, "delete_module": 176,
        "reboot": 169, "swapon": 167, "swapoff": 168, "acct": 163, "quotactl": 179, "quotactl_fd": 443,
        "syslog": 103, "settimeofday": 164, "clock_settime": 227, "vhangup": 153, "open_by_handle_at": 304,
        "name_to_handle_at": 303, "lookup_dcookie": 212, "fanotify_init": 300, "memfd_create": 319,
        "memfd_secret": 447, "shmget": 29, "msgget": 68, "semget": 64, "iopl": 172, "ioperm": 173,
        "modify_ldt": 154, "uselib": 134, "clone": 56, "clone3": 435, "socket": 41,
    },
    x32_bit=True,
)  # fmt: skip
AARCH64 = Architecture(
    0xC00000B7,
    {
        "unshare": 97, "setns": 268, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "fsopen": 430,
        "fsconfig": 431, "fsmount": 432, "fspick": 433, "move_mount": 429, "open_tree": 428, "mount_setattr": 442,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "bpf": 280, "perf_event_open": 241,
        "userfaultfd": 282, "keyctl": 219, "add_key": 217, "request_key": 218, "ptrace": 117,
        "process_vm_readv": 270, "process_vm_writev": 271, "pidfd_getfd": 438, "kcmp": 272, "kexec_load": 104,
        "kexec_file_load": 294, "init_module": 105, "finit_module": 273, "delete_module": 106, "reboot": 142,
        "swapon": 224, "swapoff": 225, "acct": 89, "quotactl": 60, "quotactl_fd": 443, "syslog": 116,
        "settimeofday": 170, "clock_settime": 112, "vhangup": 58, "open_by_handle_at": 265,
        "name_to_handle_at": 264, "lookup_dcookie": 18, "fanotify_init": 262, "memfd_create": 279,
        "memfd_secret": 447, "shmget": 194, "msgget": 186, "semget": 190, "clone": 220, "clone3": 435,
        "socket": 198,
    },
    x32_bit=False,
)  # fmt: skip
ARCHITECTURES = {"x86_64": X86_64, "aarch64": AARCH64, "arm64": AARCH64}


def _instruction(code: int, k: int, jump_true: int = 0, jump_false: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jump_true, jump_false, k)


def _deny(errno_value: int = errno.EPERM) -> bytes:
    return _instruction(RETURN, ERRNO | errno_value)


def _if_call(number: int, block: list[bytes]) -> list[bytes]:
    """``block`` runs for system call ``number`` (it must end by returning); other calls skip it."""
    return [_instruction(JUMP_EQUAL, number, 0, len(block)), *block]


def denied_names(architecture: Architecture) -> list[str]:
    """The system calls that always fail with EPERM on ``architecture``."""
    extra = X86_64_ONLY_DENIED if architecture is X86_64 else ()
    return [*DENIED, *extra]


def build_filter(architecture: Architecture) -> bytes:
    """The filter program for ``architecture``, as bubblewrap reads it (an array of ``struct sock_filter``)."""
    numbers = architecture.numbers
    program = [
        _instruction(LOAD_WORD, ARCH_OFFSET),
        _instruction(JUMP_EQUAL, architecture.audit_arch, 1, 0),
        _instruction(RETURN, KILL_PROCESS),
        _instruction(LOAD_WORD, NR_OFFSET),
    ]
    if architecture.x32_bit:
        program += [_instruction(JUMP_AT_LEAST, X32_SYSCALL_BIT, 0, 1), _deny(errno.ENOSYS)]
    for name in denied_names(architecture):
        program += _if_call(numbers[name], [_deny()])
    program += _if_call(numbers["clone3"], [_deny(errno.ENOSYS)])
    # clone: allowed unless it asks for a new namespace.
    program += _if_call(
        numbers["clone"],
        [
            _instruction(LOAD_WORD, FIRST_ARGUMENT_OFFSET),
            _instruction(JUMP_ANY_BIT, NAMESPACE_FLAGS, 0, 1),
            _deny(),
            _instruction(RETURN, ALLOW),
        ],
    )
    # socket: only the allowed address families.
    families = ALLOWED_SOCKET_FAMILIES
    checks = [_instruction(JUMP_EQUAL, family, len(families) - i, 0) for i, family in enumerate(families)]
    program += _if_call(
        numbers["socket"],
        [_instruction(LOAD_WORD, FIRST_ARGUMENT_OFFSET), *checks, _deny(), _instruction(RETURN, ALLOW)],
    )
    program.append(_instruction(RETURN, ALLOW))
    return b"".join(program)


def host_architecture() -> Architecture | None:
    """This machine's architecture, or None when the filter does not know its system-call numbers."""
    return ARCHITECTURES.get(platform.machine())
