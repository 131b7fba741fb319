"""Search tools: ``local_search`` (dense retrieval over a local FAISS index) and ``web_search`` (Tavily).

``local_search`` serves every call of one tool from a single worker thread: hundreds of concurrent calls queue
there instead of each holding a thread, the embedding model is never run by two threads at once, and each
query is embedded and searched alone, so a result never depends on what else was in flight (identical to
sequential calls). ``web_search`` needs a Tavily API key in the environment; without one each call is an
EXEC_ERR saying how to make it available, never a crash.
"""

import asyncio
import os
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import httpx
from pydantic import Field, PositiveFloat, PositiveInt

from podium.config import Config
from podium.core.calls import Status
from podium.pool.tool import Tool, ToolOutput

if TYPE_CHECKING:  # needs the search extra, imported when a local_search tool is made
    from podium.retrieval.index import Hit, PassageIndex

# The registry's limit backs up web_search's own HTTP timeout, which reports TIMEOUT itself.
TIMEOUT_GRACE_S = 5.0


class LocalSearchConfig(Config):
    """Settings of the ``local_search`` tool."""

    index_dir: Path | None = None
    """Index directory built by `podium index build`; default: the HotpotQA demo index in Podium's cache."""
    default_k: PositiveInt = 5
    """Passages per query when the call does not say."""
    max_k: PositiveInt = 20
    """Most passages a call may ask for per query."""
    max_queries: PositiveInt = 32
    """Most queries in one query_list."""
    query_cache_size: int = Field(1024, ge=0)
    """Query embeddings kept for repeated queries (0: none)."""
    timeout_s: PositiveFloat = 60.0
    """Time limit of one call, queueing included."""


def local_search_tool(config: LocalSearchConfig | None = None, *, index: "PassageIndex | None" = None) -> Tool:
    """The ``local_search`` tool over ``index``, or over the index in ``config.index_dir`` (default: the demo
    index), loaded at the first call; a missing index makes that call an EXEC_ERR saying how to build it."""
    from podium.retrieval.hotpot import load_default_index

    config = config or LocalSearchConfig()
    # The index (and its embedding model) loads on the first call, in the worker thread: building a pool
    # stays cheap, and the single worker serialises the load like every search.
    loaded: list[PassageIndex] = [] if index is None else [index]
    worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="local_search")

    def search(queries: list[str], k: int) -> "list[list[Hit]]":
        if not loaded:
            loaded.append(load_default_index(config.index_dir, query_cache_size=config.query_cache_size))
        return loaded[0].search(queries, k)

    async def local_search(
        query: str | None = None, query_list: list[str] | None = None, k: int | None = None
    ) -> ToolOutput:
        queries = [query] if query is not None else list(query_list or [])
        wanted = k or config.default_k
        # Cancelling a queued call (its time limit) cancels its job before it starts.
        hits = await asyncio.get_running_loop().run_in_executor(worker, search, queries, wanted)
        results = [
            {"query": text, "passages": [hit.to_dict() for hit in found]}
            for text, found in zip(queries, hits, strict=True)
        ]
        return ToolOutput({"results": results}, observation=render_passages(queries, hits))

    built = Tool.from_schema(
        "local_search",
        "Search a local corpus of encyclopedia passages by meaning (dense retrieval). Give exactly one of `query` "
        "or `query_list`; returns, per query, the top-k passages with their id, title, text and a similarity "
        "score (cosine, higher is closer). Phrase queries as the facts you need, one entity or relation each.",
        local_search_parameters(config),
        local_search,
        timeout_s=config.timeout_s,
    )
    weakref.finalize(built, worker.shutdown, wait=False, cancel_futures=True)
    return built


def local_search_parameters(config: LocalSearchConfig) -> dict[str, Any]:
    """The JSON schema of ``local_search``'s arguments: one ``query`` or a ``query_list``, and ``k``."""
    return {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "description": "One search query."},
            "query_list": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "minItems": 1,
                "maxItems": config.max_queries,
                "description": f"Several queries searched in one call (at most {config.max_queries}).",
            },
            "k": {
                "type": "integer",
                "minimum": 1,
                "maximum": config.max_k,
                "default": config.default_k,
                "description": "Passages to return per query.",
            },
        },
        "oneOf": [{"required": ["query"]}, {"required": ["query_list"]}],
        "additionalProperties": False,
    }


def render_passages(queries: list[str], hits: list[list["Hit"]]) -> str:
    """What the orchestrator reads: per query, numbered passages with title, id and score."""
    blocks = []
    for query, found in zip(queries, hits, strict=True):
        lines = [f"Results for {query!r}:"]
        if not found:
            lines.append("(no passages)")
        for rank, hit in enumerate(found, start=1):
            lines.append(f"[{rank}] {hit.title} (id: {hit.id}, score {hit.score:.3f})\n{hit.text}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


class WebSearchConfig(Config):
    """Settings of the ``web_search`` tool (the Tavily search API)."""

    base_url: str = "https://api.tavily.com"
    """Tavily API root; requests go to <base_url>/search."""
    api_key_env: str = "TAVILY_API_KEY"
    """Environment variable holding the API key (read at each call)."""
    search_depth: Literal["basic", "advanced"] = "basic"
    """Tavily search depth; advanced costs two credits."""
    default_k: PositiveInt = 5
    """Results per query when the call does not say."""
    max_k: int = Field(10, ge=1, le=20)
    """Most results a call may ask for (Tavily allows up to 20)."""
    timeout_s: PositiveFloat = 20.0
    """HTTP timeout of one request; exceeding it is a TIMEOUT."""
    use_env_proxies: bool = True
    """Honour HTTP(S)_PROXY, NO_PROXY and SSL_CERT_FILE from the environment."""

    def unavailable_reason(self) -> str | None:
        """Why web_search cannot run now (no API key), or None when it can."""
        if os.environ.get(self.api_key_env, "").strip():
            return None
        return f"web_search is unavailable: set {self.api_key_env} to a Tavily API key"


def web_search_tool(config: WebSearchConfig | None = None) -> Tool:
    """The ``web_search`` tool. Without an API key it is still listed, and each call is an EXEC_ERR naming the
    variable to set; use :meth:`WebSearchConfig.unavailable_reason` to leave it out of a pool instead."""
    config = config or WebSearchConfig()

    async def web_search(query: str, k: int | None = None) -> ToolOutput:
        unavailable = config.unavailable_reason()
        if unavailable:
            return ToolOutput(None, Status.EXEC_ERR, unavailable)
        request = {"query": query, "max_results": k or config.default_k, "search_depth": config.search_depth}
        headers = {"Authorization": f"Bearer {os.environ[config.api_key_env].strip()}"}
        try:
            async with httpx.AsyncClient(
                base_url=config.base_url, timeout=config.timeout_s, trust_env=config.use_env_proxies
            ) as client:
                response = await client.post("/search", json=request, headers=headers)
        except httpx.TimeoutException:
            return ToolOutput(None, Status.TIMEOUT, f"Tavily did not answer within {config.timeout_s:g} s")
        except httpx.HTTPError as error:
            return ToolOutput(None, Status.EXEC_ERR, f"cannot reach {config.base_url}: {type(error).__name__}: {error}")
        failure = _http_failure(response, config.api_key_env)
        if failure:
            return ToolOutput(None, Status.EXEC_ERR, failure)
        try:
            results = [_web_result(item) for item in response.json()["results"]]
        except (ValueError, KeyError, TypeError) as error:
            return ToolOutput(None, Status.EXEC_ERR, f"unexpected answer from Tavily: {type(error).__name__}: {error}")
        return ToolOutput({"query": query, "results": results}, observation=render_web_results(query, results))

    parameters = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "description": "The search query."},
            "k": {
                "type": "integer",
                "minimum": 1,
                "maximum": config.max_k,
                "default": config.default_k,
                "description": "Number of results.",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    return Tool.from_schema(
        "web_search",
        "Search the web (Tavily). Returns the top-k pages with title, URL, an extract of the content and a "
        "relevance score. Costs money per call: prefer local_search for encyclopedic facts.",
        parameters,
        web_search,
        timeout_s=config.timeout_s + TIMEOUT_GRACE_S,
    )


def _http_failure(response: httpx.Response, api_key_env: str) -> str | None:
    if response.is_success:
        return None
    detail = " ".join(response.text.split())[:300]
    if response.status_code in (401, 403):
        return f"Tavily refused the API key in {api_key_env} (HTTP {response.status_code}): {detail}"
    if response.status_code == 429:
        return f"Tavily rate limit or plan quota reached (HTTP 429): {detail}"
    return f"Tavily answered HTTP {response.status_code}: {detail}"


def _web_result(item: Any) -> dict[str, Any]:
    return {
        "title": str(item.get("title") or ""),
        "url": str(item["url"]),
        "content": str(item.get("content") or ""),
        "score": float(item.get("score") or 0.0),
    }


def render_web_results(query: str, results: list[dict[str, Any]]) -> str:
    """What the orchestrator reads: numbered results with title, URL and extract."""
    lines = [f"Web results for {query!r}:"]
    if not results:
        lines.append("(no results)")
    for rank, item in enumerate(results, start=1):
        lines.append(f"[{rank}] {item['title']} <{item['url']}>\n{item['content']}")
    return "\n".join(lines)
