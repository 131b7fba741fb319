"""Code verifier: a candidate program passes its unit tests in the sandbox, or it does not.

Two test formats: HumanEval (prompt + completion + test + ``check(entry_point)``) and MBPP (code, then the
``assert`` lines of ``test_list``). A failing test, a crash, the time limit or the output limit all give 0.
"""

import re

from podium.core.answers import extract_code
from podium.core.calls import Status
from podium.datasets.items import AssertTests, HumanEvalTests
from podium.graders.verdict import Verdict
from podium.sandbox import Sandbox

MAX_REASON_CHARS = 2_000


def humaneval_program(completion: str, tests: HumanEvalTests) -> str:
    """The program HumanEval runs: prompt + completion + tests + ``check(entry_point)``.

    A completion that defines the entry point itself (a whole function rather than the body) goes after the
    prompt on a new line: the prompt's docstring-only function is valid Python, and the new one replaces it
    while the prompt's imports and helpers stay available.
    """
    code = extract_code(completion)
    defines_entry = re.search(rf"^def\s+{re.escape(tests.entry_point)}\s*\(", code, re.MULTILINE) is not None
    body = f"{tests.prompt}\n{code}" if defines_entry else f"{tests.prompt}{code}"
    return f"{body}\n\n{tests.test}\n\ncheck({tests.entry_point})\n"


def assert_program(code: str, tests: AssertTests) -> str:
    """The program MBPP runs: the candidate, the setup code, then each assert."""
    asserts = "\n".join(tests.test_list)
    return f"{extract_code(code)}\n\n{tests.test_setup_code}\n{asserts}\n"


class CodeVerifier:
    """Runs the candidate against its tests in the sandbox; correct only if the program exits cleanly."""

    name = "unit tests in the sandbox"

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox

    async def verify(self, answer: str, gold: HumanEvalTests | AssertTests, question: str | None = None) -> Verdict:
        is_humaneval = isinstance(gold, HumanEvalTests)
        program = humaneval_program(answer, gold) if is_humaneval else assert_program(answer, gold)
        run = await self.sandbox.run_python(program)
        if run.status is Status.OK:
            return Verdict.binary(True)
        detail = run.stderr.strip().splitlines()[-1] if run.stderr.strip() else ""
        reason = f"{run.status}: {run.reason}" + (f"; {detail}" if detail else "")
        return Verdict.binary(False, reason=reason[:MAX_REASON_CHARS])
