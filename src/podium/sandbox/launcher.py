"""Runs inside the sandbox: waits for one program, runs it in a child process, reports how the child ended.

Invoked as ``python -I -B launcher.py UID WALL_S TAG REPORT_FD RLIMIT_NAME=SOFT:HARD ...``; UID is the user the
program becomes when started as root, or ``-`` to stay; TAG only labels the process. The launcher can start
before there is work (a warm sandbox): it imports what it needs, then blocks on stdin, where the host writes an
8-byte little-endian length and a ``marshal``-ed dict {file name: bytes} (``main.py`` among them).

The launcher is the sandbox's PID 1 (bubblewrap's ``--as-pid-1``), so that the end of the launcher is the end of
the sandbox: when a PID namespace's first process exits, the kernel kills every other process in it, whatever
session, process group or parent-death signal they chose. The launcher forks before there is work: the child
reads the request and becomes the program, so that neither the fork nor anything else but the program's own run
is on a warm call's path. The parent stays as the supervisor, out of the program's reach: it keeps uid 0 when
started as root, the program does not; otherwise it makes itself non-dumpable (no writing into its memory);
and from inside the namespace the kernel delivers to a PID 1 only the signals it handles, which at most end the
supervisor, and so the sandbox. It waits, in one ``poll``, for:

- the host to let go of stdin (the host alone holds its write end, and keeps it open until the call is over):
  when the host gives up on the call or dies, kill -9 included, in any phase (bubblewrap still setting up,
  warm, running), the supervisor exits and the sandbox ends with it;
- the wall-clock limit plus a grace, counted from the start of the call (a backup of the host's own
  wall-clock kill, for a host that is gone);
- its children, which it reaps (orphans of the program are adopted by PID 1): when the program ends, it writes
  ``exited CODE CPU_S`` or ``signaled SIGNAL CPU_S`` to REPORT_FD, CPU_S being the CPU time the program and the
  children it waited for used (so that the host tells a kill at the CPU-time limit from any other kill whichever
  signal the kernel sent), and exits the same way (as bubblewrap would), ending whatever the program left.

Run without bubblewrap (unisolated), the launcher is not a PID 1: it then kills its own process group instead
when the host lets go or the limit passes. Once the program's main module is done (its non-daemon threads
joined and its exit handlers run, as in any Python exit), the child flushes its output and leaves without
tearing the interpreter down: the teardown would cost milliseconds of copied pages, and the whole sandbox is
discarded anyway.

Only cheap standard-library modules are imported here (this start-up is on every cold call's path); this file
is not imported by Podium.
"""

import _ast  # the C node types, cheaper to import than the ast module
import _signal  # the signal module would import enum
import atexit
import gc
import marshal
import os
import resource
import select
import sys
import time

MAIN = "main.py"
AST_ONLY = 0x400  # ast.PyCF_ONLY_AST
HEADER_BYTES = 8
GRACE_S = 2  # the host enforces the wall limit; the supervisor's deadline only backs it up
LOST_HOST_EXIT = 125
DEADLINE_EXIT = 124
SIGKILL = 9
PR_SET_DUMPABLE = 4


def read_exactly(fd: int, size: int) -> bytes:
    chunks = []
    while size > 0 and (chunk := os.read(fd, min(size, 1 << 20))):
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def read_request() -> dict[str, bytes] | None:
    """The program's files, or None when the host closed stdin without sending any."""
    header = read_exactly(0, HEADER_BYTES)
    if len(header) < HEADER_BYTES:
        return None
    return marshal.loads(read_exactly(0, int.from_bytes(header, "little")))


def become_the_program(uid: str, rlimits: list[str], files: dict[str, bytes]) -> None:
    devnull = os.open("/dev/null", os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    if uid != "-" and os.getuid() == 0:
        os.setgroups([])
        os.setresgid(int(uid), int(uid), int(uid))
        os.setresuid(int(uid), int(uid), int(uid))
    for name, content in files.items():
        with open(name, "xb") as handle:
            handle.write(content)
    # RLIMIT_NPROC must be set inside the sandbox: without a per-sandbox uid or user namespace the kernel
    # would count every process of the calling user.
    for item in rlimits:
        name, _, bounds = item.partition("=")
        soft, _, hard = bounds.partition(":")
        resource.setrlimit(getattr(resource, name), (int(soft), int(hard)))


def run_main() -> int:
    """Run ``main.py`` as ``python main.py`` would; its exit status."""
    sys.argv = [MAIN]
    sys.path.insert(0, os.getcwd())
    main = type(sys)("__main__")
    main.__file__ = MAIN
    sys.modules["__main__"] = main
    try:
        with open(MAIN, "rb") as handle:
            tree = compile(handle.read(), MAIN, "exec", AST_ONLY)
        # As in a REPL, the value of a final bare expression is printed: models often end with `x * y`.
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], _ast.Expr) else None
        exec(compile(tree, MAIN, "exec"), main.__dict__)
        if last is not None:
            value = eval(compile(_ast.Expression(last.value), MAIN, "eval"), main.__dict__)
            if value is not None:
                print(repr(value))
    except SystemExit as exit_request:
        return exit_status(exit_request)
    except BaseException as error:
        import traceback

        # Show the model its own frames only, as a plain `python main.py` would.
        frames = error.__traceback__
        while frames is not None and frames.tb_frame.f_code.co_filename != MAIN:
            frames = frames.tb_next
        traceback.print_exception(type(error), error, frames)
        return 1
    return 0


def exit_status(exit_request: SystemExit) -> int:
    """The status ``sys.exit(code)`` ends Python with: None is 0, an integer itself, anything else is printed, 1."""
    code = exit_request.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def start_the_program(uid: str, rlimits: list[str], files: dict[str, bytes]) -> None:
    try:
        become_the_program(uid, rlimits, files)
    except BaseException as error:  # the program never started: say why, as the program's own error
        os.write(2, f"sandbox launcher: {error!r}\n".encode())
        os._exit(1)
    # Registered first, so run last: after the program's own exit handlers, leave at once with its status.
    status = [1]
    atexit.register(leave, status)
    status[0] = run_main()
    sys.exit(status[0])


def leave(status: list[int]) -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # closed by the program, or its reader went away
            pass
    os._exit(status[0])


class Supervisor:
    """The launcher's parent process: waits for the program, the host and the deadline (see the module's notes)."""

    def __init__(self, child: int, report_fd: int, started: int, wall_s: float) -> None:
        self.child = child
        self.report_fd = report_fd
        self.started = started
        self.wall_s = wall_s
        self.deadline: float | None = None
        self.wakeup_read, wakeup_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        _signal.set_wakeup_fd(wakeup_write)
        _signal.signal(_signal.SIGCHLD, lambda *_: None)  # a handler, so that a child's end wakes the poll
        self.poller = select.poll()
        self.poller.register(0, 0)  # only the hang-up: the host let go of the request pipe
        self.poller.register(started, select.POLLIN)
        self.poller.register(self.wakeup_read, select.POLLIN)

    def run(self) -> None:
        self.reap()  # the child may have ended before the handler was in place
        while True:
            timeout = None if self.deadline is None else max(self.deadline - time.monotonic(), 0) * 1000
            for fd, _ in self.poller.poll(timeout):
                if fd == 0:
                    end_the_sandbox(LOST_HOST_EXIT)
                elif fd == self.started:  # end-of-file: the child has the program, the call has begun
                    self.poller.unregister(fd)
                    self.deadline = time.monotonic() + self.wall_s + GRACE_S
                else:  # a signal's wake-up byte: a child ended
                    os.read(fd, 4096)
            self.reap()
            if self.deadline is not None and time.monotonic() >= self.deadline:
                end_the_sandbox(DEADLINE_EXIT)

    def reap(self) -> None:
        """Collect every ended child; report and leave once the program is one of them."""
        while True:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.child:
                self.report(status, usage.ru_utime + usage.ru_stime)

    def report(self, status: int, cpu_s: float) -> None:
        """Report how the program ended and its CPU time, and end the same way (as bubblewrap would)."""
        if os.WIFSIGNALED(status):
            line, code = f"signaled {os.WTERMSIG(status)} {cpu_s:.6f}\n", 128 + os.WTERMSIG(status)
        else:
            code = os.waitstatus_to_exitcode(status)
            line = f"exited {code} {cpu_s:.6f}\n"
        os.write(self.report_fd, line.encode())
        end_the_sandbox(code)


def end_the_sandbox(code: int) -> None:
    """Exit with ``code``; as the sandbox's PID 1 that ends every process in it, otherwise end this process group."""
    if os.getpid() != 1:
        os.killpg(0, SIGKILL)
    os._exit(code)


def keep_out_of_reach() -> None:
    """Make this process non-dumpable, so that a program running as the same user cannot write into its memory
    (``/proc/1/mem``): as root, the program runs as another user anyway."""
    import ctypes

    ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def main() -> None:
    uid, wall_s, report_fd, rlimits = sys.argv[1], float(sys.argv[2]), int(sys.argv[4]), sys.argv[5:]
    # Keep only stdio and the report pipe: bubblewrap leaves its --sync-fd open in a PID 1 it runs.
    os.closerange(3, report_fd)
    os.closerange(report_fd + 1, 1 << 20)
    started_read, started_write = os.pipe()
    gc.freeze()  # the collector then leaves the objects the child shares with this process alone: fewer copied pages
    child = os.fork()
    if child == 0:
        os.close(report_fd)
        os.close(started_read)
        files = read_request()
        if files is None:
            os._exit(LOST_HOST_EXIT)
        os.close(started_write)  # the supervisor reads end-of-file: the call has begun
        start_the_program(uid, rlimits, files)
        return
    os.close(started_write)
    if uid == "-" and os.getpid() == 1:
        keep_out_of_reach()
    Supervisor(child, report_fd, started_read, wall_s).run()


if __name__ == "__main__":
    main()
