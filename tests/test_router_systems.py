"""Routers as systems (``kind: router``): fitted on a recording's train split, saved and loaded, deciding through the
escalate policy like an orchestrator, in ``podium eval``, ``podium run`` and ``podium check``; and an orchestrator
of its own (not a pool worker)."""

import asyncio
import json

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from podium.cli import app
from podium.errors import ConfigError
from podium.evaluate.routing.routers import cascade_probabilities, operating_point
from podium.recording import Recording
from podium.routers.backend import RouterBackend
from podium.routers.data import routing_set
from podium.routers.decide import cascade_stop
from podium.routers.models import CascadeRouter, KnnRouter, load_router
from podium.solve.config import SystemConfig
from podium.solve.router import RouterSystemConfig
from podium.solve.system import System
from tests.test_recording import small_recording


def write(path, data: dict) -> str:
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return str(path)


def test_a_cascade_system_reaches_the_point_its_offline_curve_predicts(tmp_path) -> None:
    recording = small_recording(tmp_path / "rec")
    config = RouterSystemConfig(router="cascade", recording=str(recording), threshold=0.5)
    system = config.build()
    fitted = tmp_path / "rec" / "routers" / "cascade.npz"
    assert fitted.is_file() and isinstance(load_router(fitted), CascadeRouter)
    data = routing_set(Recording.load(recording))
    test = data.split("test")
    trajectories = [asyncio.run(system.solve(item.item)) for item in test]
    router = load_router(fitted)
    assert isinstance(router, CascadeRouter)
    stops = [cascade_stop(row, 0.5) for row in cascade_probabilities(test, router)]
    predicted = operating_point(test, [tuple(router.workers[: stop + 1]) for stop in stops])
    asked = [[result.call.arguments["model"] for result in t.results] for t in trajectories]
    assert asked == [list(router.workers[: stop + 1]) for stop in stops]  # the episodes ask what the curve says
    spent = sum(t.usage.usd for t in trajectories) / len(test)
    assert spent == pytest.approx(predicted.usd_per_question)
    # a hedged reply of w ("not sure") is escalated to s; a plain one is accepted
    assert any(len(route) == 2 for route in asked) and any(len(route) == 1 for route in asked)
    assert all(t.turns[1].choice_probs and set(t.turns[1].choice_probs) == {"accept", "s"} for t in trajectories)
    # fitted once: built again on the same data, the saved router is loaded, not fitted again
    before = fitted.stat().st_mtime_ns
    config.build()
    assert fitted.stat().st_mtime_ns == before


def test_a_question_router_names_its_best_worker_and_passes_over_a_failed_one(tmp_path) -> None:
    vectors = np.array([[1.0, 0.0], [0.0, 1.0]])
    correct = np.array([[True, False], [False, True]])  # w right on the first kind of question, s on the second
    router = KnnRouter.fit(["w", "s"], np.array([0.001, 0.01]), "multiple_choice", vectors, correct, k=1)
    backend = RouterBackend(router, embed=lambda question: vectors[:1] if "first" in question else vectors[1:])
    from podium.core.messages import Message

    def say(*messages: str, choices: tuple[str, ...] = ("w", "s")) -> str:
        roles = ["system", "user", *(["assistant", "user"] * ((len(messages) - 1) // 2))]
        history = [Message(role=role, content=text) for role, text in zip(roles, ("table", *messages), strict=True)]
        return asyncio.run(backend.generate(history, choices=list(choices))).text

    assert say("the first question\n\nAnswer the multiple-choice question.") == "w"
    assert say("the second question") == "s"
    assert say("the second question", "s", "s replied:\nAnswer: B", choices=("w", "accept")) == "accept"
    assert say("the second question", "s", "s failed (EXEC_ERR): down", choices=("w", "accept")) == "w"
    with pytest.raises(Exception, match="workers it was not fitted on"):
        say("the first question", choices=("Worker1", "Worker2"))


def test_router_systems_run_evaluate_and_check_from_their_files(tmp_path, monkeypatch) -> None:
    recording = small_recording(tmp_path / "rec")
    monkeypatch.chdir(tmp_path)
    system = write(tmp_path / "router.yaml", {"kind": "router", "name": "cascade-router", "router": "cascade",
                                              "recording": "rec", "threshold": 0.5})  # fmt: skip
    tasks = tmp_path / "test.jsonl"
    done = CliRunner().invoke(app, ["routing", "tasks", "--recording", "rec", "--split", "test", "--out", str(tasks)])
    assert done.exit_code == 0, done.output
    evaluated = CliRunner().invoke(app, ["eval", "--system", system, "--tasks", str(tasks), "--out", "run", "--quiet"])
    assert evaluated.exit_code == 0, evaluated.output
    records = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    test = routing_set(Recording.load(recording)).split("test")
    assert len(records) == len(test) and {r["system"] for r in records} == {"cascade-router"}
    question = test[0].question
    ran = CliRunner().invoke(app, ["run", question, "--system", system, "--json"])
    assert ran.exit_code == 0, ran.output
    assert json.loads(ran.output.strip().splitlines()[-1])["answer"].startswith(("Answer", "I am not sure"))
    mixed = CliRunner().invoke(app, ["run", question, "--system", system, "--max-turns", "2"])
    assert mixed.exit_code == 2 and "--system is the whole system: give it without --max-turns" in mixed.output
    checked = CliRunner().invoke(app, ["check", system])
    assert checked.exit_code == 0, checked.output
    absent = write(tmp_path / "absent.yaml", {"kind": "router", "router": "knn", "recording": "nowhere"})
    pending = CliRunner().invoke(app, ["check", absent, "--pending-ok"])
    assert pending.exit_code == 0 and "podium routing record" in pending.output


def test_a_router_over_a_pool_that_lacks_its_workers_is_refused(tmp_path) -> None:
    recording = small_recording(tmp_path / "rec")
    workers = [{"name": name, "backend": "scripted", "model": name, "replies": ["Answer: A"]} for name in ("w", "x")]
    pool = {"workers": workers, "tools": []}
    with pytest.raises(ConfigError, match=r"pool: the router was fitted on workers \['w', 's'\]; it lacks \['s'\]"):
        RouterSystemConfig(router="cascade", recording=str(recording), pool=pool).build()
    with pytest.raises(ValueError, match="one value per worker is a cascade's setting"):
        RouterSystemConfig(router="knn", recording=str(recording), threshold=[0.5])


def test_an_orchestrator_of_its_own_plays_without_being_a_worker_of_the_pool(tmp_path) -> None:
    pool = {"workers": [{"name": "w", "backend": "scripted", "model": "w", "replies": ["It is 4."]}],
            "tools": [], "roles": ["standard_reasoner"], "workers_as_tools": False}  # fmt: skip
    own = {"name": "boss", "backend": "scripted", "model": "boss-model", "replies": ["w", "accept"]}
    config = SystemConfig(pool=pool, policy="escalate", orchestrator=own, max_tokens=16)
    assert config.run_config().orchestrator is None and config.own_orchestrator().name == "boss"
    system = System.build(config)
    assert system.name == "orchestrator:escalate:boss-model" and list(system.pool.backends) == ["w"]
    trajectory = asyncio.run(system.solve("What is 2 + 2?"))
    assert trajectory.answer == "It is 4." and trajectory.metadata["orchestrator"] == "boss-model"
