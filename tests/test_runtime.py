"""The executor driven by scripted orchestrators through each policy."""

import asyncio
import json
import re

import pytest

from podium.backends.base import BackendError, ChatBackend, Completion
from podium.core.budget import StopReason
from podium.core.calls import Status
from podium.core.preference import Preference
from podium.core.trajectory import Trajectory, read_trajectories, write_trajectories
from podium.errors import ConfigError
from podium.runtime import Executor, RunConfig
from support.runtime_fixtures import PRICE, add, orchestrator, run, scripted_pool, sleeper


def call(name: str, **arguments: object) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def test_serial_happy_path_records_every_call(sandbox) -> None:
    pool = scripted_pool()
    backend = orchestrator(
        "<think>Use python.</think>" + call("python", code="print(6*7)"),
        call("standard_reasoner", subtask="confirm 6*7", model="beta"),
        "<answer>42</answer>",
    )
    trajectory = run(pool, backend)
    assert trajectory.answer == "42"
    assert trajectory.stop_reason is StopReason.ANSWER
    python, reasoner = trajectory.results
    assert (python.status, python.observation.strip()) == (Status.OK, "42")
    assert reasoner.status is Status.OK and reasoner.worker == "beta-model"
    assert reasoner.usage.input_tokens > 0 and reasoner.usage.usd > 0
    roles = [message.role for message in trajectory.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user", "assistant"]
    assert [m.content for m in trajectory.messages if m.role == "assistant"] == [t.output for t in trajectory.turns]
    assert 'status="OK"' in trajectory.messages[3].content
    assert "| alpha | model |" in trajectory.messages[0].content
    assert trajectory.usage.usd == pytest.approx(sum(r.usage.usd for r in trajectory.results))
    assert trajectory.metadata["policy"] == "serial"
    assert backend.requests[1][-1].content == trajectory.messages[3].content


def test_trajectory_round_trips_through_jsonl(tmp_path) -> None:
    trajectory = run(scripted_pool(), orchestrator(call("standard_reasoner"), "<answer>42</answer>"))
    path = tmp_path / "trace.jsonl"
    write_trajectories(path, [trajectory])
    (loaded,) = read_trajectories(path)
    assert loaded == trajectory


def test_parse_errors_become_observations_and_the_orchestrator_recovers() -> None:
    backend = orchestrator(
        '<tool_call>{"name": "python", "arguments": {"code": </tool_call>',
        "",
        call("standard_reasoner"),
        "<answer>42</answer>",
    )
    trajectory = run(scripted_pool(), backend)
    assert trajectory.answer == "42"
    first, second, third, _ = trajectory.turns
    assert first.results[0].status is Status.PARSE_ERR and "not valid JSON" in first.results[0].reason
    assert second.parse_error is not None and "neither a <tool_call> nor an answer" in second.parse_error
    assert "PARSE_ERR" in trajectory.messages[5].content
    assert third.results[0].status is Status.OK
    assert trajectory.metadata["parse_errors"] == 1


def test_unparseable_output_is_bounded() -> None:
    trajectory = run(scripted_pool(), orchestrator("<think>", "", "<think>hmm", ""), max_parse_errors=2)
    assert trajectory.stop_reason is StopReason.MAX_PARSE_ERRORS
    assert len(trajectory.turns) == 3


def test_serial_dispatches_one_call_per_turn() -> None:
    backend = orchestrator(call("add", a=1, b=2) + call("add", a=3, b=4), "<answer>3</answer>")
    trajectory = run(scripted_pool(), backend, tools=(add,))
    ran, refused = trajectory.turns[0].results
    assert ran.status is Status.OK and ran.value == 3
    assert refused.status is Status.PARSE_ERR and "at most 1 call" in refused.reason


def test_parallel_round_takes_the_slowest_call_not_the_sum() -> None:
    tools = tuple(sleeper(f"slow{index}", 0.5) for index in range(4))
    round_calls = "".join(call(f"slow{index}", label=str(index)) for index in range(4))
    backend = orchestrator("<reasoning>fan out</reasoning>" + round_calls, call("final_answer"))
    trajectory = run(scripted_pool(), backend, tools=tools, policy="parallel")
    first = trajectory.turns[0]
    assert [result.status for result in first.results] == [Status.OK] * 4
    assert first.wall_s < 1.5, "four 0.5 s calls must overlap"
    assert trajectory.answer == "42", "the summarizer (a scripted worker) answers \\boxed{42}"
    summary = trajectory.turns[1].results[0]
    assert summary.call.name == "final_answer" and summary.worker == "alpha-model" and summary.usage.usd > 0
    assert "<budget>remaining: 11 of 12 rounds" in trajectory.messages[3].content


def test_parallel_refuses_calls_beyond_n_max_and_mixed_final_answer() -> None:
    five = "".join(call("add", a=index, b=1) for index in range(5))
    backend = orchestrator(five, call("add", a=1, b=1) + call("final_answer"), call("final_answer"))
    trajectory = run(scripted_pool(), backend, tools=(add,), policy="parallel")
    statuses = [result.status for result in trajectory.turns[0].results]
    assert statuses == [Status.OK] * 4 + [Status.PARSE_ERR]
    assert "final_answer must be the only call" in (trajectory.turns[1].parse_error or "")
    assert trajectory.stop_reason is StopReason.ANSWER


PLAN = (
    '<plan round="1">\n<subtask id="1">first</subtask>\n<subtask id="2">second</subtask>\n'
    '<subtask id="3" depends_on="1,2">combine</subtask>\n</plan>\n'
    '<route subtask="1" model="alpha" skill="reason">do one</route>\n'
    '<route subtask="2" model="beta" skill="reason">do two</route>\n'
    '<route subtask="3" model="alpha" skill="direct_answer">add them</route>\n'
)


def test_dag_runs_ready_nodes_and_feeds_parents_to_children() -> None:
    backend = orchestrator(PLAN, "<verify>consistent</verify>\n<final_answer>42</final_answer>")
    trajectory = run(scripted_pool(), backend, policy="dag")
    one, two, three = trajectory.turns[0].results
    assert [r.call.id for r in (one, two, three)] == ["subtask-1", "subtask-2", "subtask-3"]
    assert one.call.name == "reason" and one.call.arguments["model"] == "alpha"
    assert three.call.name == "direct_answer" and three.call.arguments["instruction"] == "add them"
    assert (
        '<obs subtask="1">' in three.call.arguments["inputs"] and '<obs subtask="2">' in three.call.arguments["inputs"]
    )
    assert '<obs subtask="3" status="OK">' in trajectory.messages[3].content
    assert trajectory.answer == "42" and trajectory.stop_reason is StopReason.ANSWER


def test_dag_lazy_answer_dispatches_nothing() -> None:
    trajectory = run(scripted_pool(), orchestrator("<final_answer>42</final_answer>"), policy="dag")
    assert trajectory.answer == "42" and trajectory.results == []


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (PLAN.replace('id="1">first', 'id="1" depends_on="3">first'), "depends_on ids must be smaller"),
        (
            PLAN.replace('id="3" depends_on="1,2"', 'id="9" depends_on="1,5"').replace('subtask="3"', 'subtask="9"'),
            "depends on unknown subtask 5",
        ),
        (PLAN.replace('route subtask="2"', 'route subtask="9"'), "unknown subtask 9"),
        (PLAN.replace('model="beta"', 'model="gpt-5"'), "unknown model 'gpt-5'"),
        (PLAN.replace('skill="direct_answer"', 'skill="juggle"'), "unknown skill 'juggle'"),
        (PLAN.replace('model="beta" skill="reason"', 'model="alpha" skill="execute_python"'), "does not offer"),
        ("<final_answer>1</final_answer><final_answer>2</final_answer>", "give exactly one final answer"),
        (PLAN + "<final_answer>42</final_answer>", "either plans or answers"),
        ('<route subtask="1" model="alpha" skill="reason"><route subtask="2">x</route></route>', "nested <route>"),
        (PLAN.replace('<subtask id="3"', '<subtask id="2"'), "used twice"),
        ('<obs subtask="1">made up</obs><final_answer>42</final_answer>', "written by the runtime"),
    ],
)
def test_dag_rejects_invalid_plans_with_a_clear_reason(bad: str, reason: str) -> None:
    trajectory = run(scripted_pool(), orchestrator(bad, "<final_answer>42</final_answer>"), policy="dag")
    assert reason in (trajectory.turns[0].parse_error or "")
    assert trajectory.turns[0].results == [], "nothing of an invalid plan runs"
    assert "<error>" in trajectory.messages[3].content
    assert trajectory.answer == "42"


def test_dag_replan_needs_verify_and_a_higher_round() -> None:
    replan = (
        '<verify>two looks wrong <replan/></verify>\n<plan round="2">\n<subtask id="4" depends_on="1">again</subtask>\n'
        '</plan>\n<route subtask="4" model="alpha" skill="reason">redo one</route>'
    )
    backend = orchestrator(
        PLAN,
        PLAN.replace('round="1"', 'round="2"'),
        "<verify>two looks wrong <replan/></verify>" + PLAN,
        replan,
        "<verify>ok now</verify><final_answer>42</final_answer>",
    )
    trajectory = run(scripted_pool(), backend, policy="dag")
    assert "before answering or replanning" in (trajectory.turns[1].parse_error or "")
    assert "must be greater than the last round 1" in (trajectory.turns[2].parse_error or "")
    (redo,) = trajectory.turns[3].results
    assert '<obs subtask="1">' in redo.call.arguments["inputs"], "a parent from an earlier round feeds the node"
    assert trajectory.answer == "42"


def test_usd_budget_is_never_exceeded() -> None:
    backend = orchestrator(*[call("standard_reasoner", subtask="think " * 20)] * 20, price=PRICE)
    trajectory = run(scripted_pool(), backend, max_episode_usd=0.5)
    assert trajectory.usage.usd <= 0.5
    assert trajectory.stop_reason is StopReason.MAX_USD
    refused = [r for r in trajectory.results if r.status is Status.EXEC_ERR and "budget" in (r.reason or "")]
    assert refused or len(trajectory.turns) < 20


def test_calls_in_one_round_jointly_respect_the_usd_cap() -> None:
    four = "".join(call("standard_reasoner", subtask=f"variant {index}") for index in range(4))
    trajectory = run(scripted_pool(), orchestrator(four, call("final_answer")), policy="parallel", max_episode_usd=1.0)
    statuses = [result.status for result in trajectory.turns[0].results]
    assert Status.OK in statuses and Status.EXEC_ERR in statuses  # each reserves $0.367: two of four fit
    assert trajectory.usage.usd <= 1.0


def test_turn_token_and_deadline_limits_name_themselves() -> None:
    loop = orchestrator(call("add", a=1, b=1), repeat_last=True)
    assert run(scripted_pool(), loop, tools=(add,), max_turns=3).stop_reason is StopReason.MAX_TURNS
    loop = orchestrator(call("standard_reasoner", subtask="x " * 50), repeat_last=True)
    assert run(scripted_pool(), loop, max_total_tokens=2000).stop_reason is StopReason.MAX_TOKENS
    slow = orchestrator(call("slow", label="x"), repeat_last=True)
    trajectory = run(scripted_pool(), slow, tools=(sleeper("slow", 5.0),), max_seconds=0.5)
    assert trajectory.stop_reason is StopReason.DEADLINE
    assert trajectory.results[0].status is Status.TIMEOUT
    assert trajectory.wall_s < 3.0


def test_allow_and_deny_lists_shape_the_pool() -> None:
    pool = scripted_pool()
    denied = run(pool, orchestrator(call("python", code="print(1)"), "<answer>1</answer>"), deny=["python"])
    result = denied.results[0]
    assert result.status is Status.PARSE_ERR and "unknown tool 'python'" in result.reason
    assert '"name": "python"' not in denied.messages[0].content
    allowed = run(pool, orchestrator("<answer>1</answer>"), allow=["python", "alpha"])
    system = allowed.messages[0].content
    assert '"name": "python"' in system and "standard_reasoner" not in system and "| beta |" not in system
    with pytest.raises(ConfigError, match="deny: unknown names"):
        run(pool, orchestrator("<answer>1</answer>"), deny=["nonesuch"])


def test_blind_labels_hide_worker_names_and_resample_per_seed() -> None:
    pool = scripted_pool(blind=True)
    executor = Executor(pool, RunConfig(policy="dag"), orchestrator=orchestrator("<final_answer>1</final_answer>"))
    first: Trajectory = asyncio.run(executor.run("q", seed=1))
    system = first.messages[0].content
    assert "alpha" not in system and "beta" not in system and re.search(r"\| Worker[12] \| model", system)
    labels = {asyncio.run(executor.run("q", seed=seed)).metadata["labels"]["alpha"] for seed in range(8)}
    assert labels == {"Worker1", "Worker2"}


def test_preference_is_appended_and_kept() -> None:
    preference = Preference(instruction="Avoid paid models.", weights={"python": 1.0, "outcome": 1.0})
    executor = Executor(scripted_pool(), orchestrator=orchestrator("<answer>1</answer>"))
    trajectory = asyncio.run(executor.run("What is 1?", preference=preference))
    assert trajectory.messages[1].content == "What is 1?\n\nAvoid paid models."
    assert trajectory.question == "What is 1?" and trajectory.preference == preference


def test_a_failing_orchestrator_backend_ends_the_episode_as_error() -> None:
    class Broken(ChatBackend):
        async def _complete(self, request):
            raise BackendError("HTTP 500")

    trajectory = asyncio.run(Executor(scripted_pool(), orchestrator=Broken("broken", PRICE)).run("q"))
    assert trajectory.stop_reason is StopReason.ERROR and "HTTP 500" in trajectory.metadata["error"]


def test_a_conversation_partner_keeps_the_episode_going() -> None:
    replies = iter(["My booking id is ABC.", None])

    async def respond(answer: str) -> str | None:
        return next(replies)

    backend = orchestrator("<answer>What is your booking id?</answer>", call("add", a=1, b=1), "<answer>Done.</answer>")
    trajectory = asyncio.run(Executor(scripted_pool(), orchestrator=backend).run("Hi", tools=(add,), respond=respond))
    assert trajectory.stop_reason is StopReason.ENV_DONE and trajectory.answer == "Done."
    assert trajectory.messages[3].content == "My booking id is ABC."


@pytest.mark.parametrize(
    ("policy", "valid"),
    [
        ("serial", ['<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>', "<answer>3</answer>"]),
        ("parallel", ['<reasoning>go</reasoning>\n<tool_call>{"name": "final_answer", "arguments": {}}</tool_call>\n']),
        ("dag", [PLAN, "<final_answer>42</final_answer>"]),
    ],
)
def test_constrained_backends_get_the_policy_grammar(policy: str, valid: list[str]) -> None:
    backend = orchestrator(valid[-1], supports_regex=True)
    trajectory = run(scripted_pool(roles=False), backend, tools=(add,), policy=policy, allow=["add", "alpha", "beta"])
    grammar = backend.regexes[0]
    assert grammar is not None and trajectory.metadata["constrained"] is True
    for text in valid:
        assert re.fullmatch(grammar, text), text
    assert not re.fullmatch(grammar, "I think the answer is 42.")
    never = orchestrator(valid[-1], supports_regex=True)
    run(scripted_pool(roles=False), never, tools=(add,), policy=policy, constrained="never")
    assert never.regexes == [None]


def test_constrained_always_fails_clearly_without_support() -> None:
    with pytest.raises(ConfigError, match="cannot constrain"):
        run(scripted_pool(), orchestrator("<answer>1</answer>"), constrained="always")


def test_parallel_summarizes_when_rounds_run_out_and_serial_keeps_the_observed_value() -> None:
    loop = orchestrator(call("add", a=1, b=1), repeat_last=True)
    trajectory = run(scripted_pool(), loop, tools=(add,), policy="parallel", max_turns=2)
    assert trajectory.stop_reason is StopReason.MAX_TURNS and trajectory.answer == "42"
    assert trajectory.turns[-1].results[-1].call.name == "final_answer"
    loop = orchestrator(call("add", a=1, b=1), repeat_last=True)
    serial = run(scripted_pool(), loop, tools=(add,), max_turns=2)
    assert serial.stop_reason is StopReason.MAX_TURNS and serial.answer == "2"  # what the last add call returned
    assert serial.metadata["answer_source"] == {"call": "call_0", "tool": "add"}
    loop = orchestrator(call("add", a=1, b=1), repeat_last=True)
    assert run(scripted_pool(), loop, tools=(add,), max_turns=2, answer_from_observations=False).answer is None
    loop = orchestrator(call("add", a=1, b=1), repeat_last=True)
    assert run(scripted_pool(), loop, tools=(add,), max_turns=2, summarize_on_stop=True).answer == "42"


def test_dag_grammar_follows_the_episode() -> None:
    replan = (
        '<verify>check <replan/></verify>\n<plan round="2">\n<subtask id="4">redo</subtask>\n</plan>\n'
        '<route subtask="4" model="beta" skill="execute_python">compute</route>\n'
    )
    final = "<verify>ok</verify>\n<final_answer>42</final_answer>"
    backend = orchestrator(PLAN, replan, final, supports_regex=True)
    trajectory = run(scripted_pool(), backend, policy="dag")
    assert trajectory.answer == "42" and all(turn.parse_error is None for turn in trajectory.turns)
    first, second, third = backend.regexes
    assert re.fullmatch(first, PLAN) and not re.fullmatch(first, final)
    assert re.fullmatch(second, replan) and re.fullmatch(second, final) and not re.fullmatch(second, PLAN)
    assert not re.fullmatch(third, replan), "round 2 and subtask 4 are taken: the next plan is round 3 from id 5"
    assert not re.fullmatch(first, PLAN.replace('id="3" depends_on="1,2"', 'id="3" depends_on="3"'))


def test_an_answer_cut_off_at_max_tokens_is_a_parse_error() -> None:
    class CutOff(ChatBackend):
        calls = 0

        async def _complete(self, request):
            self.calls += 1
            text, reason = ("The answer is <too", "length") if self.calls == 1 else ("<answer>42</answer>", "stop")
            return Completion(text, 0, 0, reason)

    trajectory = asyncio.run(Executor(scripted_pool(), orchestrator=CutOff("cut", PRICE)).run("q"))
    assert "cut off at max_tokens" in (trajectory.turns[0].parse_error or "")
    assert trajectory.answer == "42"


def test_call_grammar_resolves_schema_definitions() -> None:
    from podium.backends.grammar import Limits
    from podium.core.calls import ToolSpec
    from podium.policies.hermes import call_grammar

    parameters = {
        "type": "object",
        "properties": {"passenger": {"$ref": "#/$defs/Passenger"}},
        "required": ["passenger"],
        "$defs": {"Passenger": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}},
    }
    grammar = call_grammar([ToolSpec(name="book", description="Book.", parameters=parameters)], Limits())
    assert grammar.max_tokens is not None
    call = '<tool_call>{"name": "book", "arguments": {"passenger": {"name": "Ann"}}}</tool_call>'
    assert re.fullmatch(grammar.regex, call)


def test_role_cost_bounds_charge_their_own_helper_tool() -> None:
    from podium.core.calls import ToolCall
    from podium.costs.bounds import generation_bound
    from podium.pool.roles import CODE_PROMPT, MAX_QUERIES, QUERY_PROMPT

    pool = scripted_pool(tools=("python", "web_search"), roles=False)
    pool = type(pool)(pool.config.model_copy(update={"roles": ["code_reasoner", "knowledge_searcher"]}),
                      pool.prices, pool.sandbox, pool.backends, pool.labels)  # fmt: skip
    registry = pool.registry
    search_usd, python_usd = registry.price_bound("web_search"), registry.price_bound("python")
    assert search_usd > python_usd
    arguments = {"subtask": "x", "model": "alpha"}
    coder = registry.cost_bound(ToolCall(name="code_reasoner", arguments=arguments)).usd
    searcher = registry.cost_bound(ToolCall(name="knowledge_searcher", arguments=arguments)).usd
    own = registry.price_bound("code_reasoner"), registry.price_bound("knowledge_searcher")
    assert coder == pytest.approx(generation_bound(PRICE, CODE_PROMPT + "x", 64).usd + python_usd + own[0])
    assert searcher == pytest.approx(
        generation_bound(PRICE, QUERY_PROMPT + "x", 64).usd + MAX_QUERIES * search_usd + own[1]
    )


def test_the_summarizer_grammar_ends_with_a_boxed_answer_within_the_budget():
    from podium.backends.grammar import fit
    from podium.pool.summarizer import summary_grammar

    grammar = fit(summary_grammar, 192)
    assert grammar.max_tokens is not None and grammar.max_tokens <= 192
    assert re.fullmatch(grammar.regex, "The product is \\boxed{121932631112635269}")
    assert not re.fullmatch(grammar.regex, "</tool"), "an echoed tag is not an answer"
    assert not re.fullmatch(grammar.regex, "The manager has ended the episode: write the final answer now.")
