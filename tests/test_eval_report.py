"""The HTML report: built from hand-made runs, then rendered in headless Chromium (no network, file:// only)."""

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from podium.core.calls import Status
from podium.core.trajectory import to_json_line
from podium.evaluate.report import build_report
from podium.evaluate.runner import MANIFEST_FILE, RESULTS_FILE, RunManifest

from .eval_fixtures import record, tool_result

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
OFFLINE_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-default-apps", "--disable-extensions",
]  # fmt: skip


def _write_run(directory: Path, benchmark: str, system: str, records) -> Path:
    directory.mkdir(parents=True)
    manifest = RunManifest(benchmark=benchmark, system=system, samples=1)
    (directory / MANIFEST_FILE).write_text(manifest.model_dump_json())
    (directory / RESULTS_FILE).write_text("".join(to_json_line(r) for r in records))
    return directory


@pytest.fixture
def report(tmp_path) -> Path:
    parallel = [
        tool_result("web_search", latency_s=1.5, usd=0.01),
        tool_result("python", Status.EXEC_ERR, latency_s=0.4),
        tool_result("qwen3_32b", Status.TIMEOUT, latency_s=3.0, usd=0.002),
    ]
    orchestrated = [
        record(f"q{i}", system="orchestrator", benchmark="frames", correct=i % 2 == 0, usd=0.002, tokens=900,
               wall_s=4.0, calls=parallel if i == 0 else [tool_result("web_search")])
        for i in range(4)
    ]  # fmt: skip
    alone = [record(f"q{i}", system="model-alone", benchmark="frames", correct=i == 0, usd=0.001) for i in range(4)]
    math = [record("m0", system="model-alone", benchmark="gsm8k", tokens=50)]
    runs = [
        _write_run(tmp_path / "orchestrator", "frames", "orchestrator", orchestrated),
        _write_run(tmp_path / "alone", "frames", "model-alone", alone),
        _write_run(tmp_path / "alone-math", "gsm8k", "model-alone", math),
    ]
    (tmp_path / "alone" / RESULTS_FILE).open("a").write('{"benchmark": "frames", "sys')  # a torn line is skipped
    return build_report(runs, tmp_path / "report", baseline="model-alone")


def test_report_files_and_content(report):
    out = report.parent
    assert {p.name for p in (out / "plots").iterdir()} == {"cost_frames.svg", "cost_gsm8k.svg", "tool_calls.svg"}
    index = report.read_text()
    assert index.count('<table class="metrics">') == 2 and "orchestrator" in index and "model-alone" in index
    viewer = (out / "runs" / "run-0.html").read_text()
    assert viewer.count('<details class="item') == 4
    assert 'class="bar TIMEOUT"' in viewer and 'class="bar EXEC_ERR"' in viewer and "web_search" in viewer
    for page in [report, *(out / "runs").glob("*.html")]:
        text = page.read_text()
        assert "http://" not in text and "https://" not in text, f"{page.name} refers to the network"


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_report_renders_in_headless_chromium(report):
    def dump(page: Path) -> str:
        with tempfile.TemporaryDirectory() as profile:
            command = [CHROMIUM, *OFFLINE_FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()]
            done = subprocess.run(command, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    index = dump(report)
    # index.js runs on load and counts the plots that decoded: every plot must have loaded.
    assert 'data-loaded="3" data-total="3"' in index, index[:2000]
    assert "<td>orchestrator</td>" in index and '<a href="runs/run-0.html">view</a>' in index
    viewer = dump(report.parent / "runs" / "run-0.html")
    # viewer.js ran: it filled in the count of shown attempts.
    assert "4 of 4 attempts shown" in viewer
    assert "web_search · OK" in viewer and "qwen3_32b · TIMEOUT" in viewer
