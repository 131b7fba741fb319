"""`podium data collect --from-served`: graded served episodes become SFT rows (the cheapest correct episode of each
prompt), GRPO tasks (one per prompt, with what traffic said of it) and a held-back slice; ungraded episodes are
counted out; versions, keys, roles, time and outcome select."""

import asyncio
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from podium.data import CollectConfig, DataError, collect
from podium.evaluate.runner import load_run
from podium.serve.accounts import ApiKey
from podium.solve.jsonl import read_jsonl, read_tasks
from podium.solve.records import DataRow
from tests.serve_fixtures import ask, client, served, system
from tests.test_serve_operations import until

ROOT = Path(__file__).resolve().parents[1]


def answer_at_once(_messages) -> str:  # type: ignore[no-untyped-def]
    return "<answer>42</answer>"


@pytest.fixture(scope="module")
def traffic(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A traffic directory: a live system that asks its helper before answering 42, and beside it a cheaper shadow
    that answers 42 at once; requests from the keys ``app`` and ``val``."""
    directory = tmp_path_factory.mktemp("traffic")
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("APP_KEY", "app-key")
    monkeypatch.setenv("VAL_KEY", "val-key")
    keys = [ApiKey(name="app", key_env="APP_KEY"), ApiKey(name="val", key_env="VAL_KEY")]
    live, shadow = system(), system("cheap", script=answer_at_once, max_episode_usd=10.0)
    ids: dict[str, str] = {}
    with served(live, shadows={"tiny-orchestrator": shadow}, served=str(directory), keys=keys) as url:
        app, val = client(url, api_key="app-key"), client(url, api_key="val-key")

        def send(api, question: str, gold: str | None = None) -> str:  # type: ignore[no-untyped-def]
            options = {} if gold is None else {"podium": {"verifier": "math", "gold": gold}}
            return api.chat.completions.create(model="tiny-orchestrator", messages=ask(question), extra_body=options).id

        ids["twice-1"] = send(app, "What is 6*7?", "42")
        ids["twice-2"] = send(app, "what is  6*7?", "42")  # the same prompt, normalised
        ids["wrong"] = send(app, "What is 6*8?", "48")
        ids["ungraded"] = send(app, "What is six times seven?")
        ids["labelled"] = send(app, "Say 42.")
        ids["held"] = send(val, "What is 7*6?", "42")
        until(lambda: len((directory / "episodes.jsonl").read_text().splitlines()) == 12)
        given = httpx.post(f"{url}/feedback", json={"response_id": ids["labelled"], "label": "good"},
                           headers={"authorization": "Bearer app-key"})  # fmt: skip
        assert given.status_code == 200
    monkeypatch.undo()
    return directory, {"live": live.version, "shadow": shadow.version}


def collected(traffic_dir: Path, out: Path, **settings: object) -> tuple[dict, dict[str, list[dict]]]:
    config = CollectConfig(out=str(out), from_served=str(traffic_dir), max_tool_share=1.0, **settings)  # type: ignore[arg-type]
    funnel = asyncio.run(collect(config, progress=False))
    files = {path.name: [row for _, row in read_jsonl(path)] for path in out.glob("*.jsonl")}
    return funnel.model_dump(), files


def test_graded_traffic_becomes_sft_rows_grpo_tasks_and_a_held_back_slice(traffic, tmp_path) -> None:
    directory, versions = traffic
    funnel, files = collected(directory, tmp_path, served={"holdout_keys": ["val"]})
    steps = {step["name"]: step for step in funnel["steps"]}
    assert steps["selection"]["entered"] == steps["selection"]["kept"] == 12  # six requests, live and shadow
    # the question without a gold has no outcome, live or shadow: refused, counted; the label speaks for the live
    # answer it was given on, not for the shadow's
    assert steps["graded"]["left"] == {"ungraded: no gold came with the request, no feedback since": 3}
    assert steps["held back"]["left"] == {"held back to compare candidates on": 1}
    sft = [DataRow.model_validate(row) for row in files["sft.jsonl"]]
    by_question = {row.question: row for row in sft}
    assert sorted(by_question) == ["Say 42.", "What is 6*7?"]  # one row per prompt, correct ones only
    cheapest = by_question["What is 6*7?"]
    assert cheapest.provenance.system_version == versions["shadow"]  # the shadow answered without the helper
    assert cheapest.provenance.episode_id.endswith(":shadow") and cheapest.trajectory.results == []
    assert by_question["Say 42."].reason == "outcome from label" and by_question["Say 42."].gold == ""
    assert {row["question"] for row in files["failures.jsonl"]} == {"What is 6*8?"}
    tasks = read_tasks(tmp_path / "tasks.jsonl")
    assert {task.question: task.gold for task in tasks} == {"What is 6*7?": "42", "What is 6*8?": "48"}
    twice = next(task for task in tasks if task.question == "What is 6*7?").metadata["served"]
    assert twice["episodes"] == 4 and {outcome["correct"] for outcome in twice["outcomes"]} == {True}
    assert {outcome["version"] for outcome in twice["outcomes"]} == set(versions.values())
    [held] = read_tasks(tmp_path / "heldout.jsonl")
    assert held.question == "What is 7*6?" and held.question not in {row.question for row in sft}
    for role, version in versions.items():
        manifest, records = load_run(tmp_path / f"heldout-{version}")
        assert manifest.system_config == {"system_version": version} and [r.item_id for r in records] == [held.id]
        assert records[0].verdict.correct and records[0].trajectory.metadata.get("role") == (
            "shadow" if role == "shadow" else None
        )
    assert funnel["outputs"]["tasks.jsonl"] == 2 and funnel["outputs"]["heldout.jsonl"] == 1


def test_versions_keys_roles_time_and_outcome_select_episodes(traffic, tmp_path) -> None:
    directory, versions = traffic
    _, live_only = collected(directory, tmp_path / "live", served={"roles": ["live"], "keys": ["app"]})
    assert {DataRow.model_validate(row).provenance.system_version for row in live_only["sft.jsonl"]} == {
        versions["live"]
    }
    _, wrong = collected(directory, tmp_path / "wrong", served={"outcome": "wrong"})
    assert [row["question"] for row in wrong["tasks.jsonl"]] == ["What is 6*8?"] and wrong["sft.jsonl"] == []
    future = datetime.now(UTC) + timedelta(hours=1)
    funnel, _ = collected(directory, tmp_path / "later", served={"since": future.isoformat()})
    assert funnel["steps"][0]["left"] == {"before the time window": 12}
    assert "nothing reached sft.jsonl and tasks.jsonl: 'selection' removed all 12 episodes" in funnel["empty"]
    funnel, _ = collected(directory, tmp_path / "other", served={"versions": ["0123456789ab"]})
    assert funnel["steps"][0]["left"] == {"another version": 12}
    with pytest.raises(DataError, match="give one source of attempts"):
        collected(directory, tmp_path / "both", tasks="tasks.jsonl")
    with pytest.raises(DataError, match="holds no served traffic"):
        collected(tmp_path, tmp_path / "none")
    with pytest.raises(ValueError, match="served: selects served traffic"):
        CollectConfig(out="x", tasks="t.jsonl", served={"keys": ["app"]})


def test_the_command_line_collects_served_traffic_with_its_filters(traffic, tmp_path) -> None:
    directory, versions = traffic
    command = [
        sys.executable, "-m", "podium", "data", "collect", "--from-served", str(directory), "--out", str(tmp_path),
        "--served-version", versions["live"], "--served-role", "live", "--holdout-key", "val", "--outcome", "correct",
        "--max-tool-share", "1", "--json", "--quiet",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.splitlines()[-1])
    assert summary["outputs"]["sft.jsonl"] == 2 and summary["outputs"]["tasks.jsonl"] == 1
    assert summary["outputs"][f"heldout-{versions['live']}/results.jsonl"] == 1
