"""Runs inside the sandbox before the user's code: applies resource limits, gives up root, runs main.py.

Invoked as ``python -I -B launcher.py UID RLIMIT_NAME=SOFT:HARD ...``; UID is the user to become when
started as root, or ``-`` to stay. Only cheap standard-library modules are imported before the user's
code runs (this start-up is on every call's path); this file is not imported by Podium.
"""

import _ast  # the C node types, cheaper to import than the ast module
import os
import resource
import sys
import types

MAIN = "main.py"
AST_ONLY = 0x400  # ast.PyCF_ONLY_AST


def apply_limits(uid: str, rlimits: list[str]) -> None:
    # RLIMIT_NPROC must be set here, after the sandbox's namespaces exist: the kernel counts processes per
    # user *and namespace*, so set before bubblewrap it would count every process of the calling user.
    for item in rlimits:
        name, _, bounds = item.partition("=")
        soft, _, hard = bounds.partition(":")
        resource.setrlimit(getattr(resource, name), (int(soft), int(hard)))
    if uid != "-" and os.getuid() == 0:
        os.setgroups([])
        os.setresgid(int(uid), int(uid), int(uid))
        os.setresuid(int(uid), int(uid), int(uid))


def run_main() -> None:
    sys.argv = [MAIN]
    sys.path.insert(0, os.getcwd())
    main = types.ModuleType("__main__")
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
    except SystemExit:
        raise
    except BaseException as error:
        import traceback

        # Show the model its own frames only, as a plain `python main.py` would.
        frames = error.__traceback__
        while frames is not None and frames.tb_frame.f_code.co_filename != MAIN:
            frames = frames.tb_next
        traceback.print_exception(type(error), error, frames)
        sys.stderr.flush()
        sys.exit(1)


if __name__ == "__main__":
    apply_limits(sys.argv[1], sys.argv[2:])
    run_main()
