"""``podium synth domain`` with a scripted LLM: every step and filter counted, the written domain loaded by
``podium.envs`` and evaluated by ``podium eval`` like airline and retail, generated code checked, resume."""

import ast
import asyncio
import json

import pytest
import yaml
from typer.testing import CliRunner

from podium.backends.scripted import ScriptedBackend
from podium.cli import app
from podium.data.llm import load_prompt
from podium.data.store import DataError
from podium.data.synth import SynthConfig, synthesize_domain
from podium.data.synth.code import HEADER, MODULE_NAMES, build_toolkit, parse_function, toolkit_source
from podium.envs import ActionKind, golden_actions, load_domain
from podium.envs.domain import Domain, tau2_module
from podium.envs.evaluation import gold_grade, replay
from tests.data_fixtures import library_backend, scripted_worker

AGENT = [
    '<tool_call>{"name": "find_member", "arguments": {"email": "ada@example.com"}}</tool_call>',
    '<tool_call>{"name": "borrow_book", "arguments": {"member_id": "M1", "book_id": "B1"}}</tool_call>',
    "<answer>Done: you borrowed Dune.</answer>",
]
CUSTOMER = ["I want to borrow Dune; my email is ada@example.com.", "###STOP###"]


def solver_config() -> dict:
    """An orchestrator that plays the borrowing task, and a customer who asks for it."""
    pool = {
        "workers": [scripted_worker("agent", AGENT), scripted_worker("customer", CUSTOMER)],
        "tools": [],
        "workers_as_tools": False,
    }
    return {"pool": pool, "orchestrator": "agent", "user": {"worker": "customer"}, "max_turns": 6}


def synthesize(out, **options) -> object:
    backend = options.pop("backend", library_backend())
    config = SynthConfig(
        out=str(out), domain="a public library", name="library", solver=solver_config(), pass_k=1, concurrency=1,
        **options,
    )  # fmt: skip
    return asyncio.run(synthesize_domain(config, progress=False, backend=backend))


def test_synthesis_counts_each_step_and_writes_a_domain_podium_envs_loads(tmp_path):
    funnel = synthesize(tmp_path / "tau2")
    steps = {step.name: step for step in funnel.steps}
    assert all(step.consistent for step in funnel.steps)
    assert steps["subjects"].left == {"not an identifier": 1} and steps["subjects"].kept == 3
    assert steps["schema tables"].left == {"table name is not an identifier": 1}
    assert (steps["record rules"].entered, steps["record rules"].left) == (7, {"repeats a key": 1})
    assert steps["record validation (LLM)"].left == {"validator: condition 3 not satisfied": 1}  # bob's record
    assert steps["references resolve"].left == {"a reference names no record": 2}  # a loan of bob's, one of B9
    assert steps["functions"].left == {"uses a forbidden builtin (open)": 1, "not valid Python": 1}
    assert (steps["intents"].kept, steps["tasks written"].kept) == (3, 3)
    assert steps["evolution (adds the harder variants)"].kept == 1
    assert steps["golden calls execute"].left == {
        "golden call fails": 1,  # the evolved task borrows Emma, of which no copy is left
        "read-tagged function changes the database": 1,
    }
    assert steps["needs an action"].left == {"solvable without any action": 1}  # count_books touches no record
    assert (steps["solvable by the pool (pass@1)"].entered, steps["solvable by the pool (pass@1)"].kept) == (1, 1)
    assert funnel.outputs == {"db.json": 3, "tools.py": 5, "tasks.json": 1}

    domain = load_domain("library", tmp_path / "tau2")
    assert domain.tool_kinds == {
        "borrow_book": ActionKind.WRITE,
        "count_books": ActionKind.READ,
        "find_member": ActionKind.READ,
        "get_book": ActionKind.READ,
        "sneaky_read": ActionKind.READ,
    }
    [task] = domain.tasks
    assert [action.name for action in golden_actions(task)] == ["find_member", "borrow_book"]
    [raw_task] = json.loads((tmp_path / "tau2" / "library" / "tasks.json").read_text())
    task_model = tau2_module("tau2.data_model.tasks").Task
    assert task_model.model_validate(raw_task).model_dump(mode="json", exclude_unset=True) == raw_task  # all tau2's
    provenance = json.loads((tmp_path / "tau2" / "library" / "synthesis" / "provenance.json").read_text())["0"]
    assert (provenance["model"], provenance["stage"]) == ("library-llm", "synth-domain")
    solved = "solved by orchestrator:serial:agent at attempt 1"
    assert provenance["decisions"] == ["golden calls execute", "needs an action", solved]
    assert gold_grade(domain, task).strict_solved and replay(domain, task, golden_actions(task)).changed
    assert json.loads((tmp_path / "tau2" / "library" / "db.json").read_text())["books"]["B1"]["copies"] == 2
    splits = json.loads((tmp_path / "tau2" / "library" / "split_tasks.json").read_text())
    assert splits["base"] == ["0"] and sorted(splits["train"] + splits["test"]) == ["0"]
    synthesis = json.loads((tmp_path / "tau2" / "library" / "synthesis" / "synthesis.json").read_text())
    assert synthesis["prompts"]["task"].startswith("toolscale/task@v1#")

    listed = CliRunner().invoke(app, ["env", "list", "--data-dir", str(tmp_path / "tau2")])
    assert listed.exit_code == 0 and "library" in listed.output


def test_a_synthesized_domain_evaluates_like_the_shipped_ones(tmp_path):
    synthesize(tmp_path / "data" / "tau2")
    system = tmp_path / "system.yaml"
    system.write_text(yaml.safe_dump({"kind": "orchestrator", "name": "scripted-agent", **solver_config()}))
    result = CliRunner().invoke(
        app,
        ["eval", "--benchmark", "tau2_library", "--system", str(system), "--data-dir", str(tmp_path / "data"),
         "--out", str(tmp_path / "run"), "--quiet"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "tau2_library · scripted-agent: 1/1 correct" in result.output


def test_a_rerun_resumes_from_the_recorded_steps_without_asking_again(tmp_path):
    first = synthesize(tmp_path)
    silent = ScriptedBackend([], model="library-llm")  # any request would fail: there are no replies
    again = synthesize(tmp_path, backend=silent)
    assert silent.requests == [] and again.outputs == first.outputs
    assert [step.model_dump() for step in again.steps] == [step.model_dump() for step in first.steps]
    with pytest.raises(DataError, match="records: was 5, now 6"):
        synthesize(tmp_path, records=6)


@pytest.mark.parametrize(
    ("code", "problem"),
    [
        ("def f(self, x: int) -> int:\n    import os\n    return x", "no docstring"),
        ('def f(self, x: int) -> int:\n    """Doc."""\n    import os\n    return x', "forbidden statement (Import)"),
        ('def f(self) -> int:\n    """Doc."""\n    while True:\n        pass', "forbidden statement (While)"),
        ('def f(self) -> str:\n    """Doc."""\n    return self.__class__', "private attribute (__class__)"),
        ('def f(self) -> str:\n    """Doc."""\n    return eval("1")', "forbidden builtin (eval)"),
        ('def f(self, x) -> int:\n    """Doc."""\n    return x', "lacks a type"),
        ('def f(x: int) -> int:\n    """Doc."""\n    return x', "first parameter is not self"),
        ('def _f(self) -> int:\n    """Doc."""\n    return 1', "reserved or private name"),
        ("x = 1", "not exactly one function definition"),
        ('def get_tools(self) -> int:\n    """Doc."""\n    return 1', "reserved or private name"),  # tau2's
    ],
)
def test_generated_functions_are_checked_before_they_run(code, problem):
    function, reason = parse_function(code)
    assert function is None and problem in reason


def test_prompts_are_versioned_files_and_a_prompts_dir_overrides_them(tmp_path):
    bundled = load_prompt("toolscale/subjects")
    assert bundled.version == 1 and bundled.id.startswith("toolscale/subjects@v1#")
    (tmp_path / "toolscale").mkdir()
    (tmp_path / "toolscale" / "subjects.v2.txt").write_text("List {{count}} subjects of {{domain}}.")
    mine = load_prompt("toolscale/subjects", tmp_path)
    assert mine.version == 2 and mine.render(count=3, domain="a zoo") == "List 3 subjects of a zoo."
    with pytest.raises(DataError, match=r"no value for \['domain'\]"):
        mine.render(count=3)


SHELVE = '''
def shelve(self, book_id: str) -> str:
    """Put a copy of a book back on the shelf and log it; a shelf holds two copies at most.

    Args:
        book_id: The book id.
    """
    book = self.db.get("books", book_id, "book")
    book["copies"] += 1
    log_id = self.new_id("0123456789", 4, self.db.table("log"), "S")
    self.db.insert("log", log_id, {"book_id": book_id, "at": self.now})
    if book["copies"] > 2:
        raise ToolError("the shelf is full")
    return log_id
'''


def test_generated_tools_run_on_tau2_atomically_with_ids_that_replay():
    header = {"name": "shelf", "domain": "a shelf", "model": "m", "prompt": "p"}
    header |= {"cls": "ShelfTools", "db_cls": "ShelfDB"}
    function, problem = parse_function(SHELVE.strip())
    assert problem is None
    kit = build_toolkit(toolkit_source([("write", function)], header), header)
    db = {"books": {"B1": {"copies": 1}, "B2": {"copies": 2}}, "log": {}}
    domain = Domain(name="shelf", policy="", tasks=[], kit=kit, db_text=json.dumps(db))
    assert domain.tool_kinds == {"shelve": ActionKind.WRITE}
    environment = domain.environment()
    refused = environment.call("shelve", {"book_id": "B2"})
    assert not refused.ok and "the shelf is full" in refused.content
    assert environment.db_hash() == domain.initial_hash  # the copy and the log entry it wrote are undone
    first = environment.call("shelve", {"book_id": "B1"})
    assert first.ok and environment.db_hash() != domain.initial_hash
    again = domain.environment().call("shelve", {"book_id": "B1"})
    assert again.content == first.content  # the refused call drew no id: a fresh episode draws the same one


def test_the_module_names_a_function_body_may_use_are_the_ones_tools_py_imports():
    module = ast.parse(HEADER.format(name="x", domain="d", model="m", prompt="p", cls="XTools", db_cls="XDB"))
    imports = [node for node in module.body if isinstance(node, ast.Import | ast.ImportFrom)]
    imported = {alias.asname or alias.name for node in imports for alias in node.names}
    assert MODULE_NAMES - {"self"} <= imported


def test_a_domain_with_no_task_left_is_a_failure_naming_the_filter(tmp_path):
    # Issue 25: with a model that writes no JSON, `podium synth domain` made 0 tools and 0 tasks and exited 0.
    funnel = synthesize(tmp_path / "tau2", backend=ScriptedBackend(["I am not sure what you mean."], repeat_last=True))
    assert funnel.outputs["tasks.json"] == 0
    assert funnel.empty == (
        "nothing reached tasks.json: no subjects reached 'subjects' (subjects: not JSON (the reply holds no JSON "
        "object; cut off at the token limit?))"
    )
