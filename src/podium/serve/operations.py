"""What operators watch: Prometheus metrics (``GET /metrics``, text format) and structured request logs.

Metrics (each server has its own registry):

* ``podium_requests_total{model,key,outcome}``: every response by outcome (``stop``, ``length``, ``tool_calls``,
  or the error code of a refusal or failure: ``invalid_request_error``, ``request_too_large``, ``unknown_url``,
  ``invalid_api_key``, ``queue_full``, ``queue_timeout``, ``insufficient_quota``, ``request_timeout``,
  ``cancelled``…); ``podium_request_seconds{model}`` and ``podium_queue_wait_seconds`` their latency and queue
  wait.
* ``podium_queue_depth``, ``podium_running_responses``, ``podium_waiting_episodes`` (parked on client tools) and
  ``podium_waiting_cancelled_total{reason}`` (``client_tool_timeout``, ``waiting_cap``, ``superseded``).
* ``podium_system_info{model,version,role}``: 1 for the version serving each model (``role`` ``live``) and the
  candidate in its shadow (``shadow``), 0 for a version promoted away.
* ``podium_episode_usd_total{model,version,key}``, ``podium_episode_tokens_total{model,version,kind}``,
  ``podium_episodes_total{model,version,stop_reason}`` (a shadow's episodes under its own version, key empty).
* ``podium_calls_total{model,version,tool,worker,status}``, ``podium_call_seconds{tool}``,
  ``podium_call_usd_total{model,version,tool,worker}``: every call of every episode, per tool and the worker behind
  it.
* ``podium_graded_total{model,version,correct}``: episodes graded against their request's gold as they ended;
  ``podium_feedback_total{model,version,status}``: feedback ``recorded`` or ``duplicate`` (refusals are
  responses, counted above); ``podium_shadow_total{model,outcome}``: shadow episodes ``started``, and those not
  run (``client_tools``, ``busy``, ``refused``) or ``failed``.

Label values come from one place (:class:`Labels`): only names the server knows (its models and their versions,
the tools and workers of their pools, its keys); any other value a client or a model could choose (a model id a
request asks for, a tool name an orchestrator made up, a client tool's name) is ``unknown`` (client tools:
``(client)``), so no request can grow the metrics. ``model`` is empty for a request refused before its model was
read.

The request log has one JSON object per line per response (``event: request``), refusals included, and per
ended episode (``event: episode``): ids, model, key name, outcome, HTTP status, stop reason, turns, calls, tokens,
USD, queue wait and wall time. It goes to a file, or to stderr for ``-``.
"""

import json
import sys
import threading
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any, TextIO

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from podium.core.jsonsafe import json_ready
from podium.core.trajectory import Trajectory
from podium.pool.summarizer import FINAL_ANSWER
from podium.solve.system import System

CLIENT_TOOL_LABEL = "(client)"
UNKNOWN_LABEL = "unknown"
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


class Labels:
    """The values metric labels may take: the names the server knows, and ``unknown`` for any other."""

    def __init__(
        self, models: Collection[str], tools: Collection[str], workers: Collection[str], keys: Collection[str],
        versions: Collection[str] = (),
    ) -> None:  # fmt: skip
        self.models, self.tools, self.workers, self.keys = set(models), set(tools), set(workers), set(keys)
        self.versions = set(versions)

    def model(self, name: str | None) -> str:
        """A served model's name; empty when the request named none."""
        return "" if name is None else self._known(name, self.models)

    def key(self, name: str | None) -> str:
        return "" if name is None else self._known(name, self.keys)

    def tool(self, name: str, client_tools: Collection[str] = ()) -> str:
        return CLIENT_TOOL_LABEL if name in client_tools else self._known(name, self.tools)

    def worker(self, name: str | None) -> str:
        return "" if not name else self._known(name, self.workers)

    def version(self, version: str) -> str:
        return self._known(version, self.versions)

    @staticmethod
    def _known(name: str, known: set[str]) -> str:
        return name if name in known else UNKNOWN_LABEL


class Metrics:
    """The server's Prometheus instruments, labelled through :class:`Labels`."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self, labels: Labels) -> None:
        self.labels = labels
        self.registry = CollectorRegistry()
        registry = self.registry
        self.requests = Counter(
            "podium_requests", "Responses by outcome.", ["model", "key", "outcome"], registry=registry
        )
        self.request_seconds = Histogram(
            "podium_request_seconds", "Time to answer a request.", ["model"], buckets=LATENCY_BUCKETS,
            registry=registry,
        )  # fmt: skip
        self.queue_wait = Histogram(
            "podium_queue_wait_seconds", "Time a request waited for a slot.", buckets=LATENCY_BUCKETS,
            registry=registry,
        )  # fmt: skip
        self.queue_depth = Gauge("podium_queue_depth", "Requests waiting for a slot.", registry=registry)
        self.running = Gauge("podium_running_responses", "Responses being worked on.", registry=registry)
        self.waiting = Gauge("podium_waiting_episodes", "Episodes waiting for client tool results.", registry=registry)
        self.waiting_cancelled = Counter(
            "podium_waiting_cancelled", "Episodes cancelled while waiting for client tool results, by reason.",
            ["reason"], registry=registry,
        )  # fmt: skip
        self.systems = Gauge(
            "podium_system_info", "The version serving each model (live) and the candidate beside it (shadow).",
            ["model", "version", "role"], registry=registry,
        )  # fmt: skip
        self.episodes = Counter(
            "podium_episodes", "Episodes ended, by stop reason.", ["model", "version", "stop_reason"],
            registry=registry,
        )  # fmt: skip
        self.usd = Counter(
            "podium_episode_usd", "US dollars spent by episodes.", ["model", "version", "key"], registry=registry
        )
        self.tokens = Counter(
            "podium_episode_tokens", "Tokens of episodes (orchestrator and calls).", ["model", "version", "kind"],
            registry=registry,
        )  # fmt: skip
        self.calls = Counter(
            "podium_calls", "Calls by tool, worker and status.", ["model", "version", "tool", "worker", "status"],
            registry=registry,
        )  # fmt: skip
        self.call_seconds = Histogram(
            "podium_call_seconds", "Latency of calls.", ["tool"], buckets=LATENCY_BUCKETS, registry=registry
        )
        self.call_usd = Counter(
            "podium_call_usd", "US dollars of calls.", ["model", "version", "tool", "worker"], registry=registry
        )
        self.graded = Counter(
            "podium_graded", "Episodes graded against their request's gold.", ["model", "version", "correct"],
            registry=registry,
        )  # fmt: skip
        self.feedback = Counter(
            "podium_feedback", "Feedback taken, by status.", ["model", "version", "status"], registry=registry
        )
        self.shadow = Counter(
            "podium_shadow", "Shadow episodes started, and those not run, by outcome.", ["model", "outcome"],
            registry=registry,
        )  # fmt: skip

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def response(self, model: str | None, key: str | None, outcome: str, seconds: float | None = None) -> None:
        """Count a response (a refusal included) and, when it was worked on, how long it took."""
        label = self.labels.model(model)
        self.requests.labels(label, self.labels.key(key), outcome).inc()
        if seconds is not None:
            self.request_seconds.labels(label).observe(seconds)

    def serving(self, model: str, version: str, role: str, serves: bool = True) -> None:
        """Show that ``version`` serves ``model`` in ``role`` (or, ``serves=False``, no longer does)."""
        self.systems.labels(self.labels.model(model), self.labels.version(version), role).set(int(serves))

    def episode(
        self, model: str, version: str, key: str | None, trajectory: Trajectory, client_tools: Collection[str]
    ) -> None:
        """Count an ended episode and every call it made."""
        usage = trajectory.usage
        model, version = self.labels.model(model), self.labels.version(version)
        self.episodes.labels(model, version, str(trajectory.stop_reason)).inc()
        self.usd.labels(model, version, self.labels.key(key)).inc(usage.usd)
        self.tokens.labels(model, version, "prompt").inc(usage.input_tokens)
        self.tokens.labels(model, version, "completion").inc(usage.output_tokens)
        for result in trajectory.results:
            tool = self.labels.tool(result.call.name, client_tools)
            worker = self.labels.worker(result.worker)
            self.calls.labels(model, version, tool, worker, result.status.value).inc()
            self.call_seconds.labels(tool).observe(result.usage.latency_s)
            self.call_usd.labels(model, version, tool, worker).inc(result.usage.usd)

    def grade(self, model: str, version: str, correct: bool) -> None:
        self.graded.labels(self.labels.model(model), self.labels.version(version), str(correct).lower()).inc()

    def feedback_taken(self, model: str, version: str, recorded: bool) -> None:
        status = "recorded" if recorded else "duplicate"
        self.feedback.labels(self.labels.model(model), self.labels.version(version), status).inc()


class RequestLog:
    """JSON lines, one per response and per ended episode."""

    def __init__(self, target: str | None) -> None:
        self.target = target
        self.lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        if self.target is None:
            return
        line = json.dumps(json_ready(record), ensure_ascii=False, allow_nan=False, default=str) + "\n"
        with self.lock:
            if self.target == "-":
                _write(sys.stderr, line)
            else:
                with Path(self.target).open("a", encoding="utf-8") as handle:
                    _write(handle, line)


def _write(stream: TextIO, line: str) -> None:
    stream.write(line)
    stream.flush()


def episode_record(
    request_id: str, model: str, version: str, key: str | None, trajectory: Trajectory
) -> dict[str, Any]:
    """The log record of an ended episode."""
    usage = trajectory.usage
    return {
        "event": "episode",
        "request_id": request_id,
        "trajectory_id": trajectory.id,
        "model": model,
        "version": version,
        "key": key,
        "stop_reason": str(trajectory.stop_reason),
        "answered": trajectory.answer is not None,
        "turns": len(trajectory.turns),
        "calls": len(trajectory.results),
        "tokens": usage.tokens,
        "usd": usage.usd,
        "abandoned_usd": trajectory.metadata.get("abandoned_usd", 0.0),
        "wall_s": round(trajectory.wall_s, 4),
    }


def known_labels(systems: Sequence[System], keys: Sequence[str]) -> Labels:
    """The label values the metrics of a server of ``systems`` may show: the systems' names, every tool their
    episodes can call (the pools' tools and workers as shown, the summarizer, the primitives) and every worker
    model."""
    tools: set[str] = {FINAL_ANSWER.name}
    workers: set[str] = set()
    for system in systems:
        pool = system.pool
        tools |= {*pool.registry.names(), *pool.labels.values(), *pool.primitives.names()}
        workers |= {backend.model for backend in pool.backends.values()}
    versions = [system.version for system in systems]
    return Labels([system.name for system in systems], tools, workers, keys, versions)
