"""`podium serve` keeps its traffic: each served system's version (in /v1/models, /metrics and every response), every
ended episode recorded with its provenance and graded against the request's gold, feedback on the key's own
responses (once each, surviving kill -9 of the server), a candidate run in shadow beside the live system, and its
promotion without dropping the requests in flight."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import openai
import pytest
import yaml

from podium.serve.accounts import ApiKey
from podium.serve.traffic import TrafficLog
from podium.solve.router import RouterSystemConfig, load_system
from podium.solve.served import read_traffic
from tests.serve_fixtures import PRICE, ask, client, served, system
from tests.test_recording import small_recording
from tests.test_serve_operations import metric, until

ROOT = Path(__file__).resolve().parents[1]
GOLD_42 = {"podium": {"verifier": "math", "gold": "42"}}


def forty_three(_messages) -> str:  # type: ignore[no-untyped-def]
    return "<answer>43</answer>"


def feedback(url: str, key: str | None = None, **body: object) -> httpx.Response:
    headers = {} if key is None else {"authorization": f"Bearer {key}"}
    return httpx.post(f"{url}/feedback", json=body, headers=headers, timeout=30)


def test_each_served_system_shows_its_version_in_models_metrics_and_responses() -> None:
    live, other = system(), system("other-orchestrator", script=forty_three, max_episode_usd=10.0)
    assert live.version != other.version  # another run config: another version
    assert system("renamed").version == live.version  # the same content is the same version, whatever its name
    with served(live, other) as url:
        api = client(url)
        shown = {model.id: model.model_extra for model in api.models.list().data}
        assert shown["tiny-orchestrator"]["version"] == live.version
        assert shown["tiny-orchestrator"]["podium"] == {"system": live.name, "version": live.version, "shadow": None}
        assert api.models.retrieve("other-orchestrator").model_extra["version"] == other.version
        reply = api.chat.completions.create(model="tiny-orchestrator", messages=ask())
        assert reply.model_extra["podium"]["version"] == live.version
        assert metric(url, "podium_system_info", model="tiny-orchestrator", version=live.version, role="live") == 1
        assert metric(url, "podium_episodes_total", version=live.version, stop_reason="answer") == 1
        assert metric(url, "podium_calls_total", version=live.version, worker="helper-model") == 1


def test_a_version_is_the_content_of_the_system_not_the_place_of_its_files(tmp_path) -> None:
    adapter = ROOT / "experiments" / "claim" / "adapter" / "sft"
    system_file = yaml.safe_load((ROOT / "experiments" / "claim" / "system-sft.yaml").read_text())
    pool = str(ROOT / "experiments" / "claim" / "pool.yaml")

    def version(adapter_dir: Path, **changes: object) -> str:
        own = {"name": "candidate", "backend": "local", "model": "m", "adapter": str(adapter_dir),
               "price": {"input_per_mtok": 0, "output_per_mtok": 0}}  # fmt: skip
        (tmp_path / "system.yaml").write_text(
            yaml.safe_dump(system_file | {"pool": pool, "orchestrator": own} | changes)
        )
        return load_system(tmp_path / "system.yaml").version

    copied = tmp_path / "elsewhere"
    shutil.copytree(adapter, copied)
    assert version(copied) == version(adapter)  # the same weights at another path
    weights = copied / "adapter_model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1  # one bit of one weight
    weights.write_bytes(bytes(data))
    assert version(copied) != version(adapter)
    assert version(adapter, max_tokens=17) != version(adapter)  # a setting
    prices = tmp_path / "prices.yaml"
    prices.write_text(yaml.safe_dump({"models": {"gpt-4-1106-preview": {"input_per_mtok": 1, "output_per_mtok": 2}}}))
    repriced = yaml.safe_load(Path(pool).read_text()) | {"prices": str(prices)}
    repriced["workers"] = [
        {**w, "path": str(ROOT / w["path"])} if w["backend"] == "replay" else w for w in repriced["workers"]
    ]
    (tmp_path / "pool.yaml").write_text(yaml.safe_dump(repriced))
    assert version(adapter, pool=str(tmp_path / "pool.yaml")) != version(adapter)  # a price sheet
    elsewhere = {**repriced, "prices": None, "sandbox": {"python": "/elsewhere/bin/python3"}}
    (tmp_path / "elsewhere.yaml").write_text(yaml.safe_dump(elsewhere))
    (tmp_path / "here.yaml").write_text(yaml.safe_dump({**repriced, "prices": None}))
    # the interpreter a machine runs the sandbox with is not the system's (serve and eval run under other paths)
    assert version(adapter, pool=str(tmp_path / "elsewhere.yaml")) == version(adapter, pool=str(tmp_path / "here.yaml"))


def test_an_episode_is_graded_against_the_requests_gold_and_recorded_with_its_provenance(tmp_path) -> None:
    with served(system(), served=str(tmp_path)) as url:
        api = client(url)
        options = {"verifier": "math", "gold": "42", "preference": "cheap please", "max_usd": 5.0}
        right = api.chat.completions.create(model="tiny-orchestrator", messages=ask(), extra_body={"podium": options})
        wrong = api.chat.completions.create(
            model="tiny-orchestrator", messages=ask(), extra_body={"podium": {"verifier": "math", "gold": "41"}}
        )
        plain = api.chat.completions.create(model="tiny-orchestrator", messages=ask())
        assert right.choices[0].message.content == "42"
        assert right.model_extra["podium"]["grade"]["correct"] is True
        assert wrong.model_extra["podium"]["grade"]["correct"] is False
        assert "grade" not in plain.model_extra["podium"]
        assert metric(url, "podium_graded_total", correct="true") == 1
        assert metric(url, "podium_graded_total", correct="false") == 1
        with pytest.raises(openai.BadRequestError) as no_kind:
            api.chat.completions.create(model="tiny-orchestrator", messages=ask(), extra_body={"podium": {"gold": "1"}})
        assert no_kind.value.body["param"] == "podium" and "gold needs verifier" in no_kind.value.body["message"]
        with pytest.raises(openai.BadRequestError) as two_formats:
            api.chat.completions.create(
                model="tiny-orchestrator", messages=ask(), response_format={"type": "json_object"}, extra_body=GOLD_42
            )
        assert two_formats.value.body["param"] == "podium.verifier"
    traffic = read_traffic(tmp_path)
    assert [episode.id for episode in traffic.episodes] == [right.id, wrong.id, plain.id]
    record = traffic.episodes[0]
    assert (record.version, record.system, record.role, record.key) == (
        system().version,
        "tiny-orchestrator",
        "live",
        None,
    )
    assert (record.task, record.verifier, record.gold, record.answer) == ("What is 6*7?", "math", "42", "42")
    assert record.preference is not None and record.preference.instruction == "cheap please"
    assert record.budget["max_usd"] == 5.0 and record.budget["max_turns"] == 4
    [call] = record.calls
    assert (call.tool, call.worker, call.status) == ("helper", "helper-model", "OK")
    assert (call.price.input_per_mtok, call.price.output_per_mtok) == (PRICE.input_per_mtok, PRICE.output_per_mtok)
    assert call.usd == pytest.approx(PRICE.cost(call.input_tokens, call.output_tokens))
    assert record.usd == pytest.approx(right.model_extra["podium"]["usd"])
    assert record.trajectory.metadata["system_version"] == record.version
    assert [traffic.outcome(episode) for episode in traffic.episodes][2] is None  # no gold, no feedback: ungraded
    assert traffic.outcome(traffic.episodes[1]).model_dump() == {"correct": False, "score": 0.0, "source": "gold"}


def test_a_system_of_the_escalate_policy_is_served_and_graded_like_any_other(tmp_path) -> None:
    """A router (or the claim's orchestrator) plays the escalate policy, which calls no tools by name: served, it
    answers (before, every request was refused: the server handed it the client's tool_choice)."""
    recording = small_recording(tmp_path / "rec")
    router = RouterSystemConfig(router="cascade", recording=str(recording), threshold=0.5).build()
    question = "Question number 2? Options are: A. yes B. no"  # w is recorded right on it
    with served(router, served=str(tmp_path / "traffic")) as url:
        reply = client(url).chat.completions.create(
            model=router.name,
            messages=ask(question),
            extra_body={"podium": {"verifier": "multiple_choice", "gold": "A"}},
        )
    assert reply.choices[0].message.content == "A" and reply.model_extra["podium"]["grade"]["correct"] is True
    [record] = read_traffic(tmp_path / "traffic").episodes
    assert [call.worker for call in record.calls] == ["model-w"] and record.calls[0].price.input_per_mtok == 1.0


def test_a_torn_or_repeated_episode_line_is_set_aside_when_the_server_starts(tmp_path) -> None:
    with served(system(), served=str(tmp_path)) as url:
        ids = [client(url).chat.completions.create(model="tiny-orchestrator", messages=ask()).id for _ in range(2)]
    log = tmp_path / "episodes.jsonl"
    first, second = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(first + second + first + second[: len(second) // 2])  # a repeat, then a line torn by a kill
    traffic = TrafficLog(tmp_path)
    assert traffic.dropped == 2 and log.read_bytes() == first + second
    assert (tmp_path / "episodes.rejected.jsonl").read_bytes() == first + second[: len(second) // 2] + b"\n"
    assert [traffic.episode(response_id).id for response_id in ids] == ids  # type: ignore[union-attr]


@pytest.fixture
def keys(monkeypatch) -> list[ApiKey]:
    monkeypatch.setenv("ALICE_KEY", "alice-key")
    monkeypatch.setenv("BOB_KEY", "bob-key")
    return [ApiKey(name="alice", key_env="ALICE_KEY"), ApiKey(name="bob", key_env="BOB_KEY")]


def test_feedback_is_taken_once_per_episode_and_only_from_the_key_that_asked(tmp_path, keys) -> None:
    with served(system(), served=str(tmp_path), keys=keys) as url:
        alice = client(url, api_key="alice-key")
        first, second, third, fourth = (
            alice.chat.completions.create(model="tiny-orchestrator", messages=ask(), extra_body=GOLD_42)
            for _ in range(4)
        )
        untyped = alice.chat.completions.create(model="tiny-orchestrator", messages=ask())
        refused = feedback(url, "bob-key", response_id=first.id, label="bad")  # bob's key, alice's response
        assert refused.status_code == 404 and refused.json()["error"]["code"] == "response_not_found"
        assert feedback(url, "bob-key", response_id="chatcmpl-nope", label="bad").json() == refused.json() | {
            "error": {**refused.json()["error"], "message": "no response 'chatcmpl-nope' of this API key is known here"}
        }  # another key's response reads exactly as an unknown one
        assert feedback(url, response_id=first.id, label="bad").status_code == 401
        given = feedback(url, "alice-key", response_id=first.id, label="bad", comment="off by one")
        assert given.status_code == 200 and given.json()["status"] == "recorded"
        assert given.json()["outcome"] == {"correct": False, "score": 0.0, "source": "label"}
        again = feedback(url, "alice-key", response_id=first.id, label="bad")
        assert again.status_code == 200 and again.json()["status"] == "duplicate"
        other = feedback(url, "alice-key", response_id=first.id, label="good")
        assert other.status_code == 409 and other.json()["error"]["code"] == "feedback_exists"
        assert "label 'bad'" in other.json()["error"]["message"]
        scored = feedback(url, "alice-key", response_id=second.id, score=0.7).json()
        assert scored["outcome"] == {"correct": True, "score": 0.7, "source": "score"}
        referenced = feedback(url, "alice-key", response_id=third.id, reference="41").json()
        assert referenced["outcome"]["source"] == "reference" and referenced["outcome"]["correct"] is False
        kindless = feedback(url, "alice-key", response_id=untyped.id, reference="42")
        assert kindless.status_code == 400 and kindless.json()["error"]["param"] == "verifier"
        typed = feedback(url, "alice-key", response_id=untyped.id, reference="42", verifier="math").json()
        assert typed["outcome"] == {"correct": True, "score": 1.0, "source": "reference"}
        two = feedback(url, "alice-key", response_id=fourth.id, label="good", score=1.0)
        assert two.status_code == 400 and "give one outcome" in two.json()["error"]["message"]
        assert metric(url, "podium_feedback_total", status="recorded") == 4
        assert metric(url, "podium_feedback_total", status="duplicate") == 1
        assert metric(url, "podium_requests_total", key="bob", outcome="response_not_found") == 2
    with served(system(), served=str(tmp_path), keys=keys) as url:  # late: after a restart
        assert feedback(url, "alice-key", response_id=first.id, label="bad").json()["status"] == "duplicate"
        assert feedback(url, "alice-key", response_id=fourth.id, label="good").json()["status"] == "recorded"
    traffic = read_traffic(tmp_path)
    assert sorted(traffic.feedback) == sorted([first.id, second.id, third.id, fourth.id, untyped.id])
    assert traffic.feedback[first.id].comment == "off by one" and traffic.feedback[first.id].key == "alice"
    # the gold said right; the application's label said wrong, and the label is the outcome
    episode = next(episode for episode in traffic.episodes if episode.id == first.id)
    assert episode.grade.correct and traffic.outcome(episode).correct is False


def test_feedback_needs_a_traffic_directory_and_an_ended_episode(tmp_path) -> None:
    with served(system()) as url:
        reply = client(url).chat.completions.create(model="tiny-orchestrator", messages=ask())
        kept = feedback(url, response_id=reply.id, label="good")
        assert kept.status_code == 400 and kept.json()["error"]["code"] == "feedback_not_kept"
    with served(system(delay=0.5), served=str(tmp_path), heartbeat_s=0.1) as url:
        stream = iter(client(url).chat.completions.create(model="tiny-orchestrator", messages=ask(), stream=True))
        response_id = next(stream).id
        early = feedback(url, response_id=response_id, label="good")
        assert early.status_code == 409 and early.json()["error"]["code"] == "episode_running"
        list(stream)
        assert feedback(url, response_id=response_id, label="good").json()["status"] == "recorded"


def test_a_shadow_runs_beside_the_live_system_and_is_promoted_without_dropping_requests(tmp_path, keys) -> None:
    live, candidate = system(delay=0.3), system("candidate", script=forty_three, max_episode_usd=10.0)
    config = {"served": str(tmp_path), "keys": keys, "admin_keys": ["alice"], "heartbeat_s": 0.1}
    with served(live, shadows={"tiny-orchestrator": candidate}, **config) as url:
        api = client(url, api_key="bob-key")
        assert api.models.retrieve("tiny-orchestrator").model_extra["podium"]["shadow"] == {
            "system": "candidate", "version": candidate.version
        }  # fmt: skip
        reply = api.chat.completions.create(model="tiny-orchestrator", messages=ask(), extra_body=GOLD_42)
        assert reply.choices[0].message.content == "42"  # the live answer; the shadow's 43 is kept, not returned
        until(lambda: len(read_traffic(tmp_path).episodes) == 2)
        live_record, shadow_record = sorted(read_traffic(tmp_path).episodes, key=lambda episode: episode.role)
        assert shadow_record.id == f"{reply.id}:shadow" and shadow_record.role == "shadow"
        assert (shadow_record.answer, shadow_record.version, shadow_record.grade.correct) == (
            "43",
            candidate.version,
            False,
        )
        assert (live_record.answer, live_record.version, live_record.grade.correct) == ("42", live.version, True)
        graded = feedback(url, "bob-key", response_id=reply.id, reference="43").json()  # grades both answers
        assert {episode: v["correct"] for episode, v in graded["verdicts"].items()} == {
            reply.id: False, shadow_record.id: True
        }  # fmt: skip
        promote = f"{url}/models/tiny-orchestrator/promote"
        not_admin = httpx.post(
            promote, json={"version": candidate.version}, headers={"authorization": "Bearer bob-key"}
        )
        assert not_admin.status_code == 403 and not_admin.json()["error"]["type"] == "permission_error"
        admin = {"authorization": "Bearer alice-key"}
        mismatch = httpx.post(promote, json={"version": live.version}, headers=admin)
        assert mismatch.status_code == 409 and mismatch.json()["error"]["code"] == "version_mismatch"
        in_flight: list[openai.types.chat.ChatCompletion] = []
        flying = threading.Thread(
            target=lambda: in_flight.append(api.chat.completions.create(model="tiny-orchestrator", messages=ask()))
        )
        flying.start()
        until(lambda: metric(url, "podium_running_responses") == 1)
        promoted = httpx.post(promote, json={"version": candidate.version}, headers=admin)
        assert promoted.status_code == 200 and promoted.json()["version"] == candidate.version
        flying.join(timeout=30)
        assert in_flight[0].choices[0].message.content == "42"  # started on the old version, answered by it
        assert in_flight[0].model_extra["podium"]["version"] == live.version
        after = api.chat.completions.create(model="tiny-orchestrator", messages=ask())
        assert (after.choices[0].message.content, after.model_extra["podium"]["version"]) == ("43", candidate.version)
        assert metric(url, "podium_system_info", version=candidate.version, role="live") == 1
        assert metric(url, "podium_system_info", version=live.version, role="live") == 0
        again = httpx.post(promote, json={"version": candidate.version}, headers=admin)
        assert again.status_code == 409 and again.json()["error"]["code"] == "no_shadow"


SERVE_SYSTEM = {
    "kind": "orchestrator",
    "name": "scripted",
    "orchestrator": "orchestrator",
    "deny": ["orchestrator"],
    "pool": {
        "workers": [
            {"name": "orchestrator", "backend": "scripted", "model": "scripted", "replies": ["<answer>42</answer>"]}
        ],
        "tools": [],
    },
}  # fmt: skip


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(tmp_path: Path, port: int) -> subprocess.Popen:
    command = [
        sys.executable, "-m", "podium", "serve", "--system", str(tmp_path / "system.yaml"), "--config",
        str(tmp_path / "serve.yaml"), "--port", str(port),
    ]  # fmt: skip
    environment = {**os.environ, "ALICE_KEY": "alice-key", "PYTHONPATH": str(ROOT / "src")}
    server = subprocess.Popen(command, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while True:
        assert server.poll() is None, server.stderr.read().decode()[-2000:]  # type: ignore[union-attr]
        assert time.monotonic() < deadline, "the server did not start"
        try:
            if httpx.get(
                f"http://127.0.0.1:{port}/v1/models", headers={"authorization": "Bearer alice-key"}
            ).is_success:
                return server
        except httpx.TransportError:
            time.sleep(0.1)


@pytest.mark.slow
def test_killing_the_server_during_feedback_loses_no_acknowledged_feedback_and_counts_none_twice(tmp_path) -> None:
    (tmp_path / "system.yaml").write_text(yaml.safe_dump(SERVE_SYSTEM))
    keys = [{"name": "alice", "key_env": "ALICE_KEY"}]
    (tmp_path / "serve.yaml").write_text(yaml.safe_dump({"served": str(tmp_path / "traffic"), "keys": keys}))
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    server = start_server(tmp_path, port)
    try:
        api = client(url, api_key="alice-key")
        ids = [api.chat.completions.create(model="scripted", messages=ask()).id for _ in range(40)]
        acknowledged: dict[str, str] = {}
        lock = threading.Lock()

        def give(chunk: list[str]) -> None:
            for number, response_id in enumerate(chunk):
                label = "good" if number % 2 else "bad"
                try:
                    answer = feedback(url, "alice-key", response_id=response_id, label=label)
                except httpx.TransportError:
                    return  # the server is gone: this feedback was never acknowledged
                if answer.status_code == 200:
                    with lock:
                        acknowledged[response_id] = label
                        if len(acknowledged) == 8:  # killed here, while the other senders are still sending
                            server.send_signal(signal.SIGKILL)

        senders = [threading.Thread(target=give, args=(ids[i::4],)) for i in range(4)]
        for sender in senders:
            sender.start()
        for sender in senders:
            sender.join(timeout=60)
        server.wait(timeout=10)
        assert 8 <= len(acknowledged) < len(ids)
    finally:
        if server.poll() is None:
            server.kill()
    kept = read_traffic(tmp_path / "traffic").feedback
    assert {episode: record.label for episode, record in kept.items() if episode in acknowledged} == acknowledged
    server = start_server(tmp_path, port)
    try:
        statuses = {}
        for number, response_id in enumerate(ids):  # the client retries everything, acknowledged or not
            label = acknowledged.get(response_id, "good" if number % 2 else "bad")
            answer = feedback(url, "alice-key", response_id=response_id, label=label)
            statuses[response_id] = answer.json()["status"]
        assert all(statuses[response_id] == "duplicate" for response_id in acknowledged)
    finally:
        server.kill()
        server.wait(timeout=10)
    lines = (tmp_path / "traffic" / "feedback.jsonl").read_text().splitlines()
    traffic = read_traffic(tmp_path / "traffic")
    assert len(lines) == len(traffic.feedback) == len(ids) and traffic.unreadable == 0  # once each, none twice
