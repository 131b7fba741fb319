"""Text from models, tools and files is printed as text: markup is never interpreted and control sequences never
reach the terminal, in tables, plain lines and JSON alike."""

import json
import logging

import pytest
from rich.console import Console
from typer.testing import CliRunner

from podium.cli import app
from podium.cli.output import shown
from podium.core.printable import json_printable, printable
from support.hostile import text_campaign

runner = CliRunner()

# What a terminal would act on: OSC 52 (write the clipboard), clear the screen, set the title, an 8-bit CSI, a
# right-to-left override, a carriage return that overwrites the line.
CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"
CLEAR = "\x1b[2J"
TITLE = "\x1b]0;owned\x07"
CSI_8BIT = "\x9b2J"
RTL = "\u202e"
HOSTILE = f"{CLIPBOARD}{CLEAR}{TITLE}{CSI_8BIT}{RTL}cr\rover"
ACTING = ("\x1b", "\x07", "\x9b", "\u202e", "\r")


def acting(text: str) -> list[str]:
    """The characters of ``text`` a terminal would act on."""
    return [character for character in ACTING if character in text]


def test_printable_shows_control_characters_and_keeps_newlines_and_tabs():
    assert printable("a\tb\nc") == "a\tb\nc"
    shown_text = printable(HOSTILE)
    assert acting(shown_text) == []
    assert "\\x1b]52;c;" in shown_text and "\\x1b[2J" in shown_text and "\\x9b" in shown_text
    assert "\\u202e" in shown_text and "cr\\x0dover" in shown_text


def test_json_printable_is_the_same_json_value_without_acting_characters():
    text = json.dumps({"answer": HOSTILE}, ensure_ascii=False)
    safe = json_printable(text)
    assert acting(safe) == [] and json.loads(safe) == {"answer": HOSTILE}


@pytest.mark.parametrize("text", ["x [/bold] y", "[link=https://example.invalid]click[/link]", "a [red]b", "tail\\"])
def test_shown_text_renders_as_its_own_characters(text):
    console = Console(record=True, width=200, force_terminal=True, color_system="truecolor")
    console.print(f"[bold]answer:[/bold] {shown(text)}")
    assert console.export_text().rstrip("\n") == f"answer: {text}"
    assert "\x1b]8;" not in console.export_text(styles=True)  # no hyperlink


def test_random_hostile_texts_print_as_text_in_markup_and_json():
    campaign = text_campaign(seed=28, texts=400)
    assert campaign.violations == []


def scripted_run_pool(tmp_path, replies: list[str]) -> str:
    path = tmp_path / "pool.yaml"
    worker = {"name": "boss", "backend": "scripted", "model": "boss-m", "replies": replies}
    path.write_text(json.dumps({"workers": [worker], "tools": ["python"]}))
    return str(path)


@pytest.mark.parametrize("answer", ["x [/bold] y", "[link=https://example.invalid]click[/link]", HOSTILE])
def test_run_prints_any_answer_as_text(tmp_path, answer):
    result = runner.invoke(app, ["run", "q?", "--pool", scripted_run_pool(tmp_path, [f"<answer>{answer}</answer>"])])
    assert result.exit_code == 0, result.output
    assert f"answer: {printable(answer)}" in result.stdout
    assert acting(result.output) == []
    as_json = runner.invoke(
        app, ["run", "q?", "--json", "--pool", scripted_run_pool(tmp_path, [f"<answer>{answer}</answer>"])]
    )
    assert acting(as_json.stdout) == [] and json.loads(as_json.stdout)["answer"] == answer


def test_run_shows_a_failed_calls_output_as_text(tmp_path):
    code = "import sys\\nprint('\\\\x1b]0;owned\\\\x07\\\\x1b[2J')\\nsys.exit('oops [/red]')"
    replies = [f'<tool_call>{{"name": "python", "arguments": {{"code": "{code}"}}}}</tool_call>', "<answer>1</answer>"]
    result = runner.invoke(app, ["run", "q?", "--pool", scripted_run_pool(tmp_path, replies)])
    assert result.exit_code == 0, result.output
    assert "EXEC_ERR" in result.stdout and "oops [/red]" in result.stdout and "answer: 1" in result.stdout
    assert acting(result.output) == []


def test_tools_call_prints_sandbox_output_as_text():
    code = "print('\\x1b]52;c;cm0=\\x07\\x1b[2J\\x9b2J'); raise SystemExit('oops [/red]')"
    result = runner.invoke(app, ["tools", "call", "python", "--args", json.dumps({"code": code})])
    assert result.exit_code == 1
    assert "\\x1b]52;c;cm0=\\x07" in result.stdout and "oops [/red]" in result.output
    assert acting(result.output) == []
    as_json = runner.invoke(app, ["tools", "call", "python", "--json", "--args", json.dumps({"code": code})])
    assert acting(as_json.stdout) == [] and "\x1b]52" in json.loads(as_json.stdout)["observation"]


def test_grade_prints_responses_as_text(tmp_path):
    responses = tmp_path / "responses.jsonl"
    rows = [{"id": f"[red]{CLEAR}", "response": f"[link=https://example.invalid]{TITLE}[/link]", "gold": "4"}]
    responses.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    result = runner.invoke(app, ["grade", "--responses", str(responses), "--kind", "em"])
    assert result.exit_code == 0, result.output
    assert "[red]" in result.stdout and acting(result.output) == []


def test_math_verify_warnings_and_verdicts_keep_a_printable_excerpt_of_the_answer(caplog):
    # math-verify's "Timeout during parsing: <the whole answer>" printed megabytes of a model's reply.
    import podium.graders.math  # noqa: F401  (adds the filter to math-verify's loggers)
    from podium.graders.verdict import Verdict

    answer = HOSTILE + "[" * 1_000_000
    message = f"Timeout during parsing: {answer}"
    with caplog.at_level(logging.WARNING, logger="math_verify.parser"):
        logging.getLogger("math_verify.parser").warning(message)
    [record] = caplog.records
    assert len(record.getMessage()) < 600 and f"{len(message)} characters in all" in record.getMessage()
    assert acting(record.getMessage()) == [] and record.getMessage().startswith("Timeout during parsing: ")
    verdict = Verdict.binary(False, extracted=answer, reason=f"'{answer}' is not equivalent to '4'")
    assert len(verdict.extracted or "") <= 4_096 and len(verdict.reason or "") <= 4_096
