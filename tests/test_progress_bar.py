"""The progress bar of longer waits reports to a log file or a pipe too, where Rich shows nothing until the end."""

import io

from rich.console import Console
from rich.progress import MofNCompleteColumn, TextColumn

from podium.core.progress import ProgressBar


def run(console: Console, every_s: float, **options: object) -> str:
    with ProgressBar(TextColumn("{task.description}"), MofNCompleteColumn(), console=console, every_s=every_s,
                     **options) as bar:  # fmt: skip
        task = bar.add_task("solving", total=3)
        for _ in range(3):
            bar.advance(task)
    return "\n".join(line for line in console.file.getvalue().splitlines() if line.strip())


def test_on_a_file_the_bar_prints_its_line_as_it_goes() -> None:
    printed = run(Console(file=io.StringIO(), force_terminal=False, width=80), every_s=0.0, transient=True)
    assert [line.split() for line in printed.splitlines()] == [["solving", "1/3"], ["solving", "2/3"],
                                                                ["solving", "3/3"]]  # fmt: skip


def test_on_a_file_it_prints_at_most_every_interval_and_rich_shows_the_end() -> None:
    printed = run(Console(file=io.StringIO(), force_terminal=False, width=80), every_s=3600.0)
    assert [line.split() for line in printed.splitlines()] == [["solving", "3/3"]]  # rich's own final render


def test_on_a_terminal_only_the_live_display_draws() -> None:
    printed = run(Console(file=io.StringIO(), force_terminal=True, width=80), every_s=0.0, transient=True,
                  auto_refresh=False)  # fmt: skip
    assert "1/3" not in printed and "2/3" not in printed


def test_a_disabled_bar_prints_nothing() -> None:
    assert run(Console(file=io.StringIO(), force_terminal=False, width=80), every_s=0.0, disable=True) == ""
