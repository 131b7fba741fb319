"""Recordings: the format, replaying a recorded worker, recording a pool of HTTP workers (graded, priced, capped,
resumable, failures kept as failures), RouteLLM's recordings imported, and bad input refused before anything is
written."""

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from podium.backends.base import BackendError
from podium.backends.factory import build_backend
from podium.core.messages import Message
from podium.costs.prices import ModelPrice
from podium.errors import ConfigError
from podium.evaluate.routing.config import RecordConfig
from podium.evaluate.routing.record import RecordingJob, RecordingWriter, new_manifest
from podium.pool.config import PoolConfig, WorkerConfig
from podium.recording import RecordedOutcome, RecordedTask, RecordedWorker, Recording, SplitRule
from podium.solve.config import SystemConfig
from tests.workers_server import DATA, SKILL, reply, workers_server

ROOT = Path(__file__).resolve().parents[1]
PRICES = {"mc-small": (0.1, 0.1), "mc-medium": (1.0, 1.0), "mc-large": (10.0, 30.0)}
"""The test pool's prices per 1M input and output tokens."""


def small_recording(directory: Path, count: int = 40) -> Path:
    """A recording of workers ``w`` ($1 per 1M tokens) and ``s`` ($10) on ``count`` multiple-choice tasks: ``w``
    right on every other task, ``s`` on three in four; the first task's ``s`` call failed."""
    workers = [
        RecordedWorker(
            name=name, model=f"model-{name}", backend="http", price=ModelPrice(input_per_mtok=usd, output_per_mtok=usd)
        )
        for name, usd in (("w", 1.0), ("s", 10.0))
    ]
    tasks = [RecordedTask(**task_item(n).model_dump(), split=SplitRule().split(task_item(n))) for n in range(count)]
    writer = RecordingWriter(directory, new_manifest(workers), tasks)
    outcomes = []
    for n, task in enumerate(tasks):
        for worker, right in (("w", n % 2 == 0), ("s", n % 4 != 3)):
            if (n, worker) == (0, "s"):
                outcomes.append(RecordedOutcome(task_id=task.id, worker=worker, status="failed", reason="HTTP 503"))
                continue
            text = "Answer: A" if right else "I am not sure. Answer: B"
            price = 1.0 if worker == "w" else 10.0
            outcomes.append(RecordedOutcome(task_id=task.id, worker=worker, status="ok", reply=text, correct=right,
                                            score=float(right), input_tokens=100, output_tokens=10,
                                            usd=110 * price / 1e6, latency_s=0.5))  # fmt: skip
    writer.extend(outcomes)
    return directory


def task_item(n: int):
    from podium.datasets.items import BenchmarkItem

    return BenchmarkItem(id=f"t{n}", question=f"Question number {n}? Options are: A. yes B. no", gold="A",
                         verifier="multiple_choice")  # fmt: skip


def test_a_recording_round_trips_and_its_workers_replay_as_recorded(tmp_path) -> None:
    recording = Recording.load(small_recording(tmp_path / "rec"))
    assert recording.worker_names == ["w", "s"] and len(recording.tasks) == 40 and recording.missing() == []
    assert recording.outcomes["t0", "s"].status == "failed"
    spec = WorkerConfig(name="w", backend="replay", model="model-w", path=str(tmp_path / "rec")).backend
    replay = build_backend(spec)
    generation = asyncio.run(
        replay.generate([Message(role="user", content="Question number 2? Options are: A. yes B. no")])
    )
    assert generation.text == "Answer: A" and (generation.input_tokens, generation.output_tokens) == (100, 10)
    assert generation.latency_s == 0.5  # the real call's, recorded
    # another name replays the recorded worker of its model (a copy of s at another price, say)
    copy = build_backend(WorkerConfig(name="s_copy", backend="replay", model="model-s", path=str(tmp_path / "rec"),
                                      price={"input_per_mtok": 5, "output_per_mtok": 5}).backend)  # fmt: skip
    question = [Message(role="user", content="Question number 0? Options are: A. yes B. no")]
    with pytest.raises(BackendError, match="the recorded call failed: HTTP 503"):
        asyncio.run(copy.generate(question))
    with pytest.raises(ConfigError, match="no recorded worker named 'x', and 0 ran model 'model-x'"):
        build_backend(WorkerConfig(name="x", backend="replay", model="model-x", path=str(tmp_path / "rec"),
                                   price={"input_per_mtok": 1, "output_per_mtok": 1}).backend)  # fmt: skip


def test_a_system_replays_the_recorded_workers_of_its_pool(tmp_path) -> None:
    small_recording(tmp_path / "rec")
    live = WorkerConfig(
        name="w",
        backend="http",
        model="model-w",
        base_url="http://127.0.0.1:9/v1",
        price={"input_per_mtok": 1, "output_per_mtok": 1},
    )
    pool = PoolConfig(
        workers=[live, WorkerConfig(name="other", backend="scripted", model="other", replies=["hi"])], tools=[]
    )
    replayed = SystemConfig(pool=pool, replay=str(tmp_path / "rec")).pool_config()
    assert [(w.name, w.backend.kind) for w in replayed.workers] == [("w", "replay"), ("other", "scripted")]
    assert replayed.workers[0].backend.path == str(tmp_path / "rec")
    with pytest.raises(ConfigError, match="holds none of the pool's workers"):
        SystemConfig(
            pool=pool.model_copy(update={"workers": pool.workers[1:]}), replay=str(tmp_path / "rec")
        ).pool_config()


def write_pool(path: Path, base_url: str, *extra: dict) -> Path:
    """The test server's three workers (and ``extra`` ones) as a pool file."""
    workers = [{"name": name.removeprefix("mc-"), "backend": "http", "model": name, "base_url": base_url,
                "max_retries": 0, "price": {"input_per_mtok": PRICES[name][0], "output_per_mtok": PRICES[name][1]}}
               for name in SKILL]  # fmt: skip
    path.write_text(yaml.safe_dump({"workers": [*workers, *extra], "tools": []}), encoding="utf-8")
    return path


def golds(limit: int) -> list[dict]:
    return [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()[:limit]]


def test_recording_a_pool_grades_prices_and_keeps_failures_as_failures(tmp_path) -> None:
    with workers_server() as url:
        broken = {"name": "broken", "backend": "http", "model": "broken", "base_url": url, "max_retries": 0,
                  "price": {"input_per_mtok": 1, "output_per_mtok": 1}}  # fmt: skip
        pool = write_pool(tmp_path / "pool.yaml", url, broken)
        settings = RecordConfig(pool=str(pool), benchmark="mmlu_pro", limit=12, out=str(tmp_path / "rec"),
                                max_tokens=64)  # fmt: skip
        job = RecordingJob.prepare(settings, "test")
        runner = asyncio.run(job.run(progress=False))
        summary = job.summary(runner)
    recording = Recording.load(tmp_path / "rec")
    assert recording.worker_names == ["small", "medium", "large", "broken"] and recording.missing() == []
    assert summary["workers"]["broken"] == {"recorded": 12, "failed": 12, "correct": 0, "usd": 0.0}
    assert all(o.status == "failed" and o.correct is None and "500" in (o.reason or "")
               for (_, worker), o in recording.outcomes.items() if worker == "broken")  # fmt: skip
    for row, task in zip(golds(12), recording.tasks, strict=True):
        assert task.question == row["question"] and task.split == SplitRule().split(task)
        for name in SKILL:
            outcome = recording.outcomes[task.id, name.removeprefix("mc-")]
            expected = reply(name, " ".join(row["question"].split()), row["answer"])
            assert outcome.reply == expected and outcome.status == "ok"
            assert outcome.correct == expected.endswith(f"Answer: {row['answer']}")  # graded by its letter
            price_in, price_out = PRICES[name]
            assert outcome.usd == pytest.approx(
                (outcome.input_tokens * price_in + outcome.output_tokens * price_out) / 1e6
            )
    manifest = recording.manifest
    assert manifest.workers[2].price.input_per_mtok == 10.0 and manifest.source["tasks"] == {
        "benchmark": "mmlu_pro",
        "limit": 12,
    }
    assert runner.spent == pytest.approx(sum(o.usd for o in recording.outcomes.values()))


def test_a_recording_stops_at_its_usd_cap_and_resumes_without_asking_again(tmp_path) -> None:
    with workers_server() as url:
        pool = write_pool(tmp_path / "pool.yaml", url)
        settings = RecordConfig(pool=str(pool), benchmark="mmlu_pro", limit=6, out=str(tmp_path / "rec"),
                                max_tokens=64, max_run_usd=0.004, concurrency=2)  # fmt: skip
        capped = RecordingJob.prepare(settings, "test")
        runner = asyncio.run(capped.run(progress=False))
        assert runner.stopped_by_budget and runner.spent <= 0.004
        done = len(Recording.load(tmp_path / "rec").outcomes)
        assert 0 < done < 18
        full = settings.model_copy(update={"max_run_usd": None})
        asyncio.run(RecordingJob.prepare(full, "test").run(progress=False))
        assert len(Recording.load(tmp_path / "rec").outcomes) == 18
        before = Path(tmp_path / "rec" / "outcomes.jsonl").read_bytes()
        asyncio.run(RecordingJob.prepare(full, "test").run(progress=False))  # nothing left to ask
        assert Path(tmp_path / "rec" / "outcomes.jsonl").read_bytes() == before
        other = full.model_copy(update={"limit": 5})
        with pytest.raises(ConfigError, match="holds another recording: tasks differ"):
            RecordingJob.prepare(other, "test")


def test_a_recording_killed_mid_write_resumes_with_every_pair_once(tmp_path) -> None:
    with workers_server() as url:
        pool = write_pool(tmp_path / "pool.yaml", url)
        command = [sys.executable, "-m", "podium", "routing", "record", "--pool", str(pool), "--benchmark",
                   "mmlu_pro", "--limit", "40", "--out", str(tmp_path / "rec"), "--max-tokens", "64",
                   "--concurrency", "1", "--quiet"]  # fmt: skip
        environment = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        process = subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        outcomes = tmp_path / "rec" / "outcomes.jsonl"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (not outcomes.exists() or outcomes.read_bytes().count(b"\n") < 10):
            assert process.poll() is None, process.communicate()[1][-2000:]
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        with outcomes.open("ab") as handle:
            handle.write(b'{"task_id": "torn')  # as a kill in the middle of a write leaves it
        finished = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr[-2000:]
    lines = [json.loads(line) for line in outcomes.read_text().splitlines()]
    keys = [(line["task_id"], line["worker"]) for line in lines]
    assert len(keys) == len(set(keys)) == 120  # every (task, worker) once
    assert (tmp_path / "rec" / "outcomes.rejected.jsonl").read_text().startswith('{"task_id": "torn')


def test_bad_input_is_refused_naming_the_file_and_field_before_anything_is_written(tmp_path) -> None:
    pool = write_pool(tmp_path / "pool.yaml", "http://127.0.0.1:9/v1")
    out = tmp_path / "rec"
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"question": "Book a flight", "gold": "1", "verifier": "environment"}) + "\n")
    with pytest.raises(ConfigError, match=r"tasks.jsonl: task tasks-1: verifier: 'environment' has no grader"):
        RecordingJob.prepare(RecordConfig(pool=str(pool), tasks=str(tasks), out=str(out)), "test")
    single = tmp_path / "single.yaml"
    single.write_text(yaml.safe_dump({"workers": yaml.safe_load(pool.read_text())["workers"][:1], "tools": []}))
    with pytest.raises(ConfigError, match=r"single\.yaml: workers: routing needs two or more workers"):
        RecordingJob.prepare(RecordConfig(pool=str(single), benchmark="mmlu_pro", out=str(out)), "test")
    unpriced = tmp_path / "unpriced.yaml"
    data = yaml.safe_load(pool.read_text())
    del data["workers"][1]["price"]
    data["workers"][1]["model"] = "no-such-model-anywhere"
    unpriced.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"unpriced.yaml: workers.1 \(medium\): .*no-such-model-anywhere"):
        RecordingJob.prepare(RecordConfig(pool=str(unpriced), benchmark="mmlu_pro", out=str(out)), "test")
    with pytest.raises(ConfigError, match=r"workers: \['nobody'\] are not workers"):
        RecordingJob.prepare(
            RecordConfig(pool=str(pool), benchmark="mmlu_pro", out=str(out), workers=["small", "nobody"]), "test"
        )
    with pytest.raises(ValueError, match="give tasks"):
        RecordConfig(pool=str(pool), out=str(out))
    assert not out.exists()


def test_routellm_gsm8k_imports_as_a_recording_graded_by_podiums_verifier(tmp_path) -> None:
    from podium.evaluate.routing.importers import import_routellm

    assert import_routellm("routellm-gsm8k", tmp_path / "gsm8k") == 2638
    recording = Recording.load(tmp_path / "gsm8k")
    assert [len(recording.in_split(split)) for split in ("train", "validation", "test")] == [910, 139, 270]
    right = {
        name: sum(bool(o.correct) for (_, w), o in recording.outcomes.items() if w == name)
        for name in ("mixtral", "gpt4")
    }
    assert right == {"mixtral": 839, "gpt4": 1175}  # RouteLLM's own flags: 842 and 1,130 (the module notes why)
    first = recording.outcomes["gsm8k-0", "gpt4"]
    assert first.usd == pytest.approx((first.input_tokens * 10 + first.output_tokens * 30) / 1e6)
    assert import_routellm("routellm-gsm8k", tmp_path / "gsm8k") == 0  # imported already: nothing written
