"""Primitives that need no sandbox: answer and reason, search and fact-checking, reading files, structured output,
and the prompt templates behind them."""

import json

import pytest

from podium.core.calls import Status
from podium.errors import ConfigError
from podium.pool.config import PRIMITIVES, PoolConfig
from podium.pool.primitives.templates import parse_template, template
from podium.pool.primitives.tools import PERFORMERS
from podium.pool.resources import Attachment
from tests.primitive_fixtures import Recorder, perform, pool_with, requests_of, worker


def test_every_primitive_has_a_performer_and_a_versioned_template():
    assert set(PERFORMERS) == set(PRIMITIVES)
    for name in PRIMITIVES:
        chosen = template(name)
        assert chosen.primitive == name and chosen.version >= 1 and chosen.tag == f"{name}@{chosen.version}"
        system, user = chosen.messages(instruction="INSTRUCTION", inputs="", **_extra_fields())
        assert "INSTRUCTION" in system.content + user.content


def _extra_fields() -> dict[str, str]:
    names = ("max_queries", "passages", "databases", "max_rows", "documents", "files", "schema", "text", "endpoints")
    return dict.fromkeys(names, "x")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("## system\nx\n## user\ny", "header"),
        ("---\nprimitive: reason\nversion: one\n---\n## system\nx\n## user\ny", "version"),
        ("---\nprimitive: reason\nversion: 2\n---\n## system\nx\n", "section"),
    ],
)
def test_a_broken_template_is_an_error_naming_the_file(text, problem):
    with pytest.raises(ConfigError, match=rf"broken\.md.*{problem}"):
        parse_template(text, "broken.md")


def test_direct_answer_and_reason_use_different_templates_and_pass_inputs():
    pool = pool_with(["42", "6*7 is 42. \\boxed{42}"], ["direct_answer", "reason"])
    direct = perform(pool, "direct_answer", "What is 6*7?")
    reasoned = perform(pool, "reason", "Multiply them", inputs='<obs subtask="1">6 and 7</obs>')
    assert direct.status is Status.OK and direct.value["answer"] == "42" and direct.observation == "42"
    assert direct.value["templates"] == ["direct_answer@1"]
    assert reasoned.value["answer"] == "42" and reasoned.value["templates"] == ["reason@1"]
    first, second = requests_of(pool)
    assert "answer directly" in first[0].content.lower() and "step by step" in second[0].content.lower()
    assert "<inputs>" in second[1].content and "6 and 7" in second[1].content and "<inputs>" not in first[1].content
    assert direct.usage.usd > 0 and direct.worker == "w-model"


def test_an_empty_direct_answer_is_an_exec_error():
    result = perform(pool_with(["   "], ["direct_answer"]), "direct_answer", "Say something")
    assert result.status is Status.EXEC_ERR and "empty" in result.reason


def test_routing_a_worker_to_a_primitive_it_does_not_admit_is_refused():
    pool = pool_with(["x"], ["reason"])
    assert "direct_answer" not in pool.primitives
    result = perform(pool, "reason", "x", model="nobody")
    assert result.status is Status.PARSE_ERR and "model" in result.reason


def tavily(results_by_query: dict[str, list[dict]]):
    def handle(method, path, body):
        query = json.loads(body)["query"]
        return 200, {"results": results_by_query.get(query, [])}, {}

    return handle


PAGES = {
    "eiffel tower height": [
        {"title": "Eiffel Tower", "url": "https://e.example/tower", "content": "The tower is 330 metres tall."},
    ],
    "eiffel tower completed": [
        {"title": "History", "url": "https://e.example/history", "content": "It was completed in 1889."},
        {"title": "Eiffel Tower", "url": "https://e.example/tower", "content": "The tower is 330 metres tall."},
    ],
}


def search_pool(replies, primitives, base_url, monkeypatch):
    monkeypatch.setenv("TAVILY_API_KEY", "test-key")
    return pool_with(replies, primitives, tools=["web_search"], web_search={"base_url": base_url})


def test_web_search_runs_the_workers_queries_and_returns_deduplicated_passages(monkeypatch):
    server = Recorder(tavily(PAGES))
    queries = json.dumps({"queries": ["eiffel tower height", "eiffel tower completed"]})
    with server.running() as url:
        pool = search_pool([queries], ["web_search"], url, monkeypatch)
        result = perform(pool, "web_search", "How tall is the Eiffel Tower and when was it built?")
    assert result.status is Status.OK, result.reason
    assert [json.loads(body)["query"] for _, _, body in server.seen] == [
        "eiffel tower height",
        "eiffel tower completed",
    ]
    sources = [passage["source"] for passage in result.value["passages"]]
    assert sources == ["https://e.example/tower", "https://e.example/history"]
    assert "330 metres" in result.observation and result.value["search_tool"] == "web_search"
    assert result.usage.usd == pytest.approx(2 * 0.01, rel=0.01), "two Tavily searches at $0.01, tokens nearly free"


def test_fact_check_judges_the_claim_against_the_cited_evidence(monkeypatch):
    server = Recorder(tavily(PAGES))
    verdict = json.dumps({"verdict": "refuted", "evidence": [1], "explanation": "It opened in 1889."})
    with server.running() as url:
        pool = search_pool(
            [json.dumps({"queries": ["eiffel tower completed"]}), verdict], ["fact_check"], url, monkeypatch
        )
        result = perform(pool, "fact_check", "The Eiffel Tower was completed in 1920.")
    assert result.status is Status.OK, result.reason
    assert result.value["verdict"] == "refuted" and result.value["claim"] == "The Eiffel Tower was completed in 1920."
    assert [p["source"] for p in result.value["evidence"]] == ["https://e.example/history"]
    judge = requests_of(pool)[1][1].content
    assert "[1] History" in judge and "[2] Eiffel Tower" in judge and "<claim>" in judge


def test_fact_check_refuses_a_verdict_citing_passages_it_was_not_shown(monkeypatch):
    bad = json.dumps({"verdict": "supported", "evidence": [7]})
    with Recorder(tavily(PAGES)).running() as url:
        pool = search_pool([json.dumps({"queries": ["eiffel tower height"]}), bad], ["fact_check"], url, monkeypatch)
        result = perform(pool, "fact_check", "The tower is 330 m tall.")
    assert result.status is Status.PARSE_ERR and "verdict schema" in result.reason


def test_fact_check_without_evidence_says_so_without_asking_the_worker(monkeypatch):
    with Recorder(tavily({})).running() as url:
        pool = search_pool([json.dumps({"queries": ["nothing here"]})], ["fact_check"], url, monkeypatch)
        result = perform(pool, "fact_check", "The moon is made of cheese.")
    assert result.status is Status.OK and result.value["verdict"] == "not_enough_evidence"
    assert len(requests_of(pool)) == 1, "only the queries were asked for"


def test_primitives_that_need_a_search_tool_or_endpoints_are_config_errors():
    for primitive, needed in (
        ("web_search", "search tool"),
        ("fact_check", "search tool"),
        ("call_api", "api_endpoints"),
    ):
        with pytest.raises(ValueError, match=rf"workers\.0\.primitives: '{primitive}' needs .*{needed}"):
            PoolConfig(workers=[worker(["x"], [primitive])], tools=[])


def doc(tmp_path, name, text, **fields):
    path = tmp_path / name
    path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
    return Attachment(name=name.split(".")[0], path=str(path), **fields)


def test_read_document_answers_from_the_named_document_only(tmp_path):
    notes = doc(tmp_path, "notes.txt", "The meeting moved to Thursday.", description="team notes")
    menu = doc(tmp_path, "menu.md", "Soup of the day: tomato.")
    pool = pool_with(['Thursday ("The meeting moved to Thursday.")'], ["read_document"])
    result = perform(pool, "read_document", "When is the meeting, according to notes?", attachments=(notes, menu))
    assert result.status is Status.OK and result.value["documents"] == ["notes"]
    prompt = requests_of(pool)[0][1].content
    assert "moved to Thursday" in prompt and "team notes" in prompt and "tomato" not in prompt


def test_a_long_document_is_excerpted_around_the_instructions_words(tmp_path):
    filler = "\n".join(f"Line {i}: nothing of note happens here at all." for i in range(2000))
    text = filler + "\nThe vault combination is 4-8-15.\n" + filler
    report = doc(tmp_path, "report.txt", text)
    pool = pool_with(["4-8-15"], ["read_document"], primitive_limits={"max_context_chars": 4000})
    result = perform(pool, "read_document", "What is the vault combination?", attachments=(report,))
    prompt = requests_of(pool)[0][1].content
    assert result.value["excerpted"] is True
    assert "vault combination is 4-8-15" in prompt and "left out]" in prompt and len(prompt) < 6000


def test_read_document_refusals_say_why(tmp_path):
    pool = pool_with(["x"], ["read_document", "read_code"])
    missing = perform(pool, "read_document", "Summarise it")
    assert missing.status is Status.EXEC_ERR and "no document is attached" in missing.reason
    binary = doc(tmp_path, "blob.txt", b"\x00\x01\x02 binary")
    result = perform(pool, "read_document", "Summarise blob", attachments=(binary,))
    assert result.status is Status.EXEC_ERR and "binary" in result.reason


def test_read_code_numbers_lines_and_reads_only_up_to_the_size_limit(tmp_path):
    source = doc(tmp_path, "app.py", "import os\n\ndef main():\n    return os.getcwd()\n" + "# pad\n" * 400)
    pool = pool_with(["main is at line 3"], ["read_code"], primitive_limits={"max_file_bytes": 200})
    result = perform(pool, "read_code", "Where is main defined?", attachments=(source,))
    prompt = requests_of(pool)[0][1].content
    assert result.status is Status.OK and result.value["codes"] == ["app"]
    assert "    3  def main():" in prompt and "longer than 200 bytes" in prompt


def test_extract_field_validates_the_workers_json_against_the_fields(tmp_path):
    good = json.dumps({"name": "Ada Lovelace", "year": 1843})
    missing = json.dumps({"name": "Ada Lovelace"})
    extra = json.dumps({"name": "Ada", "year": 1843, "city": "London"})
    pool = pool_with([good, missing, extra], ["extract_field"])
    text = "In 1843 Ada Lovelace published her notes."
    ok = perform(pool, "extract_field", "fields: name, year", inputs=text)
    assert ok.status is Status.OK and ok.value["data"] == {"name": "Ada Lovelace", "year": 1843}
    assert text in requests_of(pool)[0][1].content and '"required": ["name", "year"]' in requests_of(pool)[0][1].content
    for result in (perform(pool, "extract_field", "fields: name, year", inputs=text) for _ in range(2)):
        assert result.status is Status.PARSE_ERR and "fails the schema" in result.reason
        assert result.value["reply"]


def test_extract_field_without_fields_or_with_an_unknown_schema_is_refused():
    pool = pool_with(["{}"], ["extract_field"], schemas={"person": {"type": "object"}})
    refusals = (
        ("extract the date", "needs the fields"),
        ("schema: invoice", "no schema named"),
        ("fields: name, year of birth", "cannot read the field list"),
    )
    for instruction, reason in refusals:
        result = perform(pool, "extract_field", instruction)
        assert result.status is Status.PARSE_ERR and reason in result.reason
    assert requests_of(pool) == [], "refused before the worker is asked"


def test_parse_structured_uses_a_named_or_inline_schema(tmp_path):
    schema = {
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"type": "string"}}},
        "required": ["items"],
    }
    pool = pool_with(
        ['{"items": ["milk", "eggs"]}', "not json at all", '{"items": "milk"}'],
        ["parse_structured"],
        schemas={"list": schema},
    )
    listing = doc(tmp_path, "shopping.txt", "Buy milk and eggs.")
    named = perform(pool, "parse_structured", "schema: list from shopping", attachments=(listing,))
    assert named.status is Status.OK and named.value["data"] == {"items": ["milk", "eggs"]}
    assert "Buy milk and eggs." in requests_of(pool)[0][1].content
    inline = 'parse into {"type": "object", "required": ["items"]}'
    assert perform(pool, "parse_structured", inline, inputs="milk").status is Status.PARSE_ERR
    wrong = perform(pool, "parse_structured", "schema: list", inputs="milk")
    assert wrong.status is Status.PARSE_ERR and "at items" in wrong.reason


def test_a_pool_schema_that_is_not_a_json_schema_names_the_field():
    with pytest.raises(ValueError, match=r"schemas\.broken"):
        PoolConfig(workers=[worker(["x"], ["reason"])], schemas={"broken": {"type": "no-such-type"}})
