"""``web_search`` and ``fact_check``: the worker writes queries, the pool's search tool retrieves passages; for
``fact_check`` the worker then judges the claim against those passages only and cites the ones its verdict rests on.
"""

from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from podium.core.calls import Status, ToolCall, ToolResult
from podium.pool.primitives.job import Job, json_reply
from podium.pool.tool import ToolOutput

MAX_QUERIES = 3
"""Most queries one web_search or fact_check runs."""
QUERY_CHARS = 200
QUERY_SCHEMA = {
    "type": "object",
    "properties": {
        "queries": {
            "type": "array",
            "items": {"type": "string", "minLength": 1, "maxLength": QUERY_CHARS},
            "minItems": 1,
            "maxItems": MAX_QUERIES,
        }
    },
    "required": ["queries"],
    "additionalProperties": False,
}
VERDICTS = ("supported", "refuted", "not_enough_evidence")


@dataclass(frozen=True)
class Passage:
    """One retrieved passage, whichever search tool found it."""

    source: str
    """Passage id (local_search) or URL (web_search)."""
    title: str
    text: str

    def render(self, number: int) -> str:
        return f"[{number}] {self.title} ({self.source})\n{self.text}"


async def web_search(job: Job) -> ToolOutput:
    """Queries from the worker, passages from the pool's search tool (at most ``max_passages``)."""
    found = await _retrieve(job)
    if isinstance(found, ToolOutput):
        return found
    queries, passages = found
    listing = "\n\n".join(p.render(n) for n, p in enumerate(passages, 1)) or "(no passages found)"
    value = {"queries": queries, "passages": [vars(p) for p in passages], "search_tool": job.kit.search_tool}
    return job.done(value, f"queries: {queries}\n\n{listing}")


async def fact_check(job: Job) -> ToolOutput:
    """Retrieve evidence for the claim, then the worker's verdict over the numbered passages, checked against a
    schema (PARSE_ERR when it does not match); the result carries the passages cited. With no evidence found
    the verdict is ``not_enough_evidence`` without asking the worker."""
    found = await _retrieve(job)
    if isinstance(found, ToolOutput):
        return found
    queries, passages = found
    claim = job.instruction
    if not passages:
        value = {"claim": claim, "verdict": "not_enough_evidence", "evidence": [], "queries": queries}
        return job.done(value, "verdict: not_enough_evidence (the search found no passages)")
    schema = verdict_schema(len(passages))
    listing = "\n\n".join(p.render(n) for n, p in enumerate(passages, 1))
    reply = await job.generate("fact_check", json_schema=schema, passages=listing)
    if reply.status is not Status.OK:
        return job.failed(reply.status, reply.reason or "the worker failed")
    judged = json_reply(str(reply.value))
    error = best_match(Draft202012Validator(schema).iter_errors(judged)) if judged is not None else None
    if judged is None or error is not None:
        problem = "is not JSON" if judged is None else f"fails the verdict schema: {error.message}"  # type: ignore[union-attr]
        return job.failed(Status.PARSE_ERR, f"the worker's verdict {problem}", {"reply": reply.value})
    cited = [passages[number - 1] for number in dict.fromkeys(judged["evidence"])]
    value = {
        "claim": claim,
        "verdict": judged["verdict"],
        "explanation": judged.get("explanation", ""),
        "evidence": [vars(p) for p in cited],
        "queries": queries,
    }
    shown = "\n\n".join(p.render(n) for n, p in enumerate(cited, 1)) or "(no passage cited)"
    return job.done(value, f"verdict: {judged['verdict']}\n{value['explanation']}\n\nevidence:\n{shown}")


def verdict_schema(passages: int) -> dict[str, Any]:
    """The verdict's JSON schema: a verdict, cited passage numbers between 1 and ``passages``, an explanation."""
    return {
        "type": "object",
        "properties": {
            "verdict": {"enum": list(VERDICTS)},
            "evidence": {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": passages}},
            "explanation": {"type": "string", "maxLength": 1000},
        },
        "required": ["verdict", "evidence"],
        "additionalProperties": False,
    }


async def _retrieve(job: Job) -> tuple[list[str], list[Passage]] | ToolOutput:
    """The worker's queries and the passages they found, or the failure to return."""
    search = job.kit.search_tool
    if search is None:  # the pool config requires a search tool for these primitives
        return job.failed(Status.EXEC_ERR, "the pool has no search tool (add local_search or web_search)")
    written = await job.generate("web_search", json_schema=QUERY_SCHEMA, max_tokens=256, max_queries=MAX_QUERIES)
    if written.status is not Status.OK:
        return job.failed(written.status, written.reason or "the worker failed")
    queries = _queries(written.value, job.instruction)
    results = [await job.kit.run_tool(ToolCall(name=search, arguments={"query": q})) for q in queries]
    for result in results:
        job.spent.add(result)
    if not any(result.ok for result in results):
        return job.failed(results[0].status, f"{search} failed: {results[0].reason}", {"queries": queries})
    passages: dict[str, Passage] = {}
    for result in results:
        for passage in _passages(result):
            passages.setdefault(passage.source, passage)
    return queries, list(passages.values())[: job.kit.config.primitive_limits.max_passages]


def _queries(reply: Any, fallback: str) -> list[str]:
    parsed = json_reply(str(reply))
    queries = parsed.get("queries") if isinstance(parsed, dict) else None
    if isinstance(queries, list):
        kept = [str(q).strip()[:QUERY_CHARS] for q in queries if str(q).strip()]
        if kept:
            return kept[:MAX_QUERIES]
    return [fallback.strip()[:QUERY_CHARS]]


def _passages(result: ToolResult) -> list[Passage]:
    """Passages in a local_search or web_search result, in rank order."""
    if not result.ok or not isinstance(result.value, dict):
        return []
    if "query" in result.value:  # web_search: one query, ranked results with URLs
        return [Passage(r["url"], r["title"], r["content"]) for r in result.value["results"]]
    found = []
    for group in result.value["results"]:  # local_search: per query, ranked passages with ids
        found += [Passage(str(p["id"]), p["title"], p["text"]) for p in group["passages"]]
    return found
