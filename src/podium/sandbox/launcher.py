"""Runs inside the sandbox: waits for one program, runs it in a child process, reports how the child ended.

Invoked as ``python -I -B launcher.py UID WALL_S TAG REPORT_FD RLIMIT_NAME=SOFT:HARD ...``; UID is the user the
program becomes when started as root, or ``-`` to stay; TAG only labels the process. The launcher can start
before there is work (a warm sandbox): it imports what it needs, then blocks on stdin, where the host writes an
8-byte little-endian length and a ``marshal``-ed dict {file name: bytes} (``main.py`` among them).

The host keeps stdin open until the call is over. Once the program is received, the launcher asks the kernel
to SIGKILL its whole process group the moment the last writer of that pipe closes it (``O_ASYNC`` with
``F_SETSIG``): when the host gives up on the call or dies, kill -9 included, the launcher and the program die
at once, and with them (the launcher is the sandbox's main process) every process of the sandbox. An alarm at
the wall-clock limit plus a grace backs up the host's own wall-clock kill.

The launcher forks before there is work: the child reads the request and becomes the program, so that neither
the fork nor anything else but the program's own run is on a warm call's path. The parent stays as a monitor,
out of the program's reach when started as root (it keeps uid 0, the program does not), waits for it and writes
``exited CODE CPU_S`` or ``signaled SIGNAL CPU_S`` to REPORT_FD, CPU_S being the CPU time the program and the
children it waited for used, so that the host tells a kill at the CPU-time limit from any other kill whichever
signal the kernel sent. The child dies with the monitor (the same kind of lifeline, on a pipe only the monitor
writes), so that a monitor killed from outside leaves no child waiting for a request. Once the program's main
module is done (its non-daemon threads joined and its exit handlers run, as in any Python exit), the child
flushes its output and leaves without tearing the interpreter down: the teardown would cost milliseconds of
copied pages, and the whole sandbox is discarded anyway.

Only cheap standard-library modules are imported here (this start-up is on every cold call's path); this file
is not imported by Podium.
"""

import _ast  # the C node types, cheaper to import than the ast module
import _signal  # the signal module would import enum
import atexit
import fcntl
import gc
import marshal
import os
import resource
import sys

MAIN = "main.py"
AST_ONLY = 0x400  # ast.PyCF_ONLY_AST
HEADER_BYTES = 8
GRACE_S = 2  # the host enforces the wall limit; the alarm only backs it up
LOST_HOST_EXIT = 125
SIGKILL = 9


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


def arm_a_lifeline(lifeline: int) -> None:
    """SIGKILL this process group when the last writer of the pipe ``lifeline`` reads from closes it (a pipe
    signals its readers that asked for it when its last writer closes); exit now if it already has."""
    fcntl.fcntl(lifeline, fcntl.F_SETOWN, -os.getpgrp())
    fcntl.fcntl(lifeline, fcntl.F_SETSIG, SIGKILL)
    fcntl.fcntl(lifeline, fcntl.F_SETFL, os.O_RDONLY | os.O_NONBLOCK | os.O_ASYNC)
    try:
        if not os.read(lifeline, 1):
            os._exit(LOST_HOST_EXIT)
    except BlockingIOError:
        pass  # still open: the host is there


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


def monitor(child: int, report_fd: int) -> None:
    """Wait for the program, report how it ended and its CPU time, and end the same way (as bubblewrap would)."""
    _, status, usage = os.wait4(child, 0)
    cpu_s = usage.ru_utime + usage.ru_stime
    if os.WIFSIGNALED(status):
        line, code = f"signaled {os.WTERMSIG(status)} {cpu_s:.6f}\n", 128 + os.WTERMSIG(status)
    else:
        code = os.waitstatus_to_exitcode(status)
        line = f"exited {code} {cpu_s:.6f}\n"
    os.write(report_fd, line.encode())
    os._exit(code)


def main() -> None:
    uid, wall_s, report_fd, rlimits = sys.argv[1], float(sys.argv[2]), int(sys.argv[4]), sys.argv[5:]
    started_read, started_write = os.pipe()
    monitor_read, monitor_write = os.pipe()
    gc.freeze()  # the collector then leaves the objects the child shares with this process alone: fewer copied pages
    child = os.fork()
    if child == 0:
        for fd in (report_fd, started_read, monitor_write):
            os.close(fd)
        # A monitor killed from outside must not leave the child waiting for a request (the sandbox's PID 1
        # would wait for it in turn): the child dies with the monitor.
        arm_a_lifeline(monitor_read)
        files = read_request()
        if files is None:
            os._exit(LOST_HOST_EXIT)
        arm_a_lifeline(os.dup(0))  # the host closes the request pipe when it gives up on the call or dies
        os.close(started_write)  # the monitor reads end-of-file: the call has begun
        start_the_program(uid, rlimits, files)
        return
    os.close(started_write)
    os.close(monitor_read)
    os.read(started_read, 1)
    _signal.alarm(int(wall_s) + GRACE_S)  # in the monitor, out of the program's reach
    monitor(child, report_fd)


if __name__ == "__main__":
    main()
