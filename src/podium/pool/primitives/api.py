"""``call_api``: the worker writes one HTTP request; it is sent only when its method and URL are exactly those of an
endpoint declared in the pool (``api_endpoints``) and its body matches that endpoint's schema. Everything else is
refused with a reason (PARSE_ERR: not executed) before any connection is opened. Requests never follow redirects
nor use proxy settings from the environment, stop at the endpoint's timeout (TIMEOUT) and read at most
``max_response_bytes``; each is charged at the endpoint's price."""

import asyncio
import json
import os
import time
from typing import Any

import httpx
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from podium.core.calls import Status
from podium.pool.primitives.job import Job, json_reply
from podium.pool.resources import HTTP_METHODS, ApiEndpoint
from podium.pool.tool import ToolOutput

REQUEST_SCHEMA = {
    "type": "object",
    "properties": {
        "method": {"enum": list(HTTP_METHODS)},
        "url": {"type": "string", "minLength": 1, "maxLength": 2000},
        "body": {"type": ["object", "null"]},
    },
    "required": ["method", "url"],
    "additionalProperties": False,
}


async def call_api(job: Job) -> ToolOutput:
    """One allowed request, its status code and response (JSON when it parses, else text)."""
    endpoints = job.kit.config.api_endpoints
    listing = "\n".join(_describe(endpoint) for endpoint in endpoints)
    reply = await job.generate("call_api", json_schema=REQUEST_SCHEMA, endpoints=listing)
    if reply.status is not Status.OK:
        return job.failed(reply.status, reply.reason or "the worker failed")
    request = json_reply(str(reply.value))
    if not isinstance(request, dict) or not Draft202012Validator(REQUEST_SCHEMA).is_valid(request):
        return job.failed(
            Status.PARSE_ERR, "the worker's reply is not a request {method, url, body}", {"reply": reply.value}
        )
    method, url, body = str(request["method"]).upper(), str(request["url"]), request.get("body") or {}
    allowed = admit(endpoints, method, url, body)
    if isinstance(allowed, str):
        return job.failed(Status.PARSE_ERR, f"refused: {allowed}", {"method": method, "url": url, "body": body})
    return await _send(job, allowed, body)


def admit(endpoints: list[ApiEndpoint], method: str, url: str, body: Any) -> ApiEndpoint | str:
    """The endpoint a request is for, or why it is refused: a URL that is not exactly an endpoint's, another
    method than the endpoint's, a body that fails the endpoint's schema."""
    wanted = _normal(url)
    matches = [endpoint for endpoint in endpoints if _normal(endpoint.url) == wanted]
    if not matches:
        allowed = ", ".join(f"{e.method} {e.url}" for e in endpoints)
        return f"{url} is not an allowed endpoint (allowed: {allowed})"
    endpoint = next((e for e in matches if e.method == method), None)
    if endpoint is None:
        return f"{matches[0].name} accepts {' or '.join(e.method for e in matches)}, not {method}"
    error = best_match(Draft202012Validator(endpoint.body_schema).iter_errors(body))
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path) or "(top level)"
        return f"the body fails the schema of {endpoint.name} at {where}: {error.message}"
    return endpoint


def _normal(url: str) -> str | None:
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        return None
    return str(parsed.copy_with(fragment=None)) if parsed.scheme in ("http", "https") else None


def _describe(endpoint: ApiEndpoint) -> str:
    about = f" — {endpoint.description}" if endpoint.description else ""
    return (
        f"{endpoint.name}: {endpoint.method} {endpoint.url}{about}\n  body schema: {json.dumps(endpoint.body_schema)}"
    )


async def _send(job: Job, endpoint: ApiEndpoint, body: dict[str, Any]) -> ToolOutput:
    headers = dict(endpoint.headers)
    if endpoint.api_key_env:
        key = os.environ.get(endpoint.api_key_env, "").strip()
        if not key:
            return job.failed(Status.EXEC_ERR, f"{endpoint.name} needs an API key: set {endpoint.api_key_env}")
        headers["Authorization"] = f"Bearer {key}"
    sent = {"endpoint": endpoint.name, "method": endpoint.method, "url": endpoint.url, "body": body}
    started = time.perf_counter()
    try:
        status, data, truncated = await asyncio.wait_for(
            _request(endpoint, body, headers, job.kit.config.primitive_limits.max_response_bytes), endpoint.timeout_s
        )
    except (TimeoutError, httpx.TimeoutException):
        job.spent.usd += endpoint.price.cost(time.perf_counter() - started, served=False)
        return job.failed(Status.TIMEOUT, f"{endpoint.name} did not answer within {endpoint.timeout_s:g} s", sent)
    except httpx.HTTPError as error:
        job.spent.usd += endpoint.price.cost(time.perf_counter() - started, served=False)
        return job.failed(Status.EXEC_ERR, f"cannot reach {endpoint.name}: {type(error).__name__}: {error}", sent)
    served = 200 <= status < 300
    job.spent.usd += endpoint.price.cost(time.perf_counter() - started, served=served)
    value = {**sent, "status_code": status, "response": data, "truncated": truncated}
    shown = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    observation = f"{endpoint.method} {endpoint.url} → HTTP {status}\n{shown}"
    if not served:
        why = "a redirect, which is not followed" if 300 <= status < 400 else f"HTTP {status}"
        return job.failed(Status.EXEC_ERR, f"{endpoint.name} answered {why}", value, observation)
    return job.done(value, observation)


async def _request(
    endpoint: ApiEndpoint, body: dict[str, Any], headers: dict[str, str], limit: int
) -> tuple[int, Any, bool]:
    """Send the request; the status code, the response (JSON or text) and whether it was cut at ``limit``."""
    options: dict[str, Any] = {"headers": headers}
    if endpoint.method == "GET":
        options["params"] = {
            k: v if isinstance(v, str | int | float | bool) else json.dumps(v) for k, v in body.items()
        }
    else:
        options["json"] = body
    client = httpx.AsyncClient(timeout=endpoint.timeout_s, trust_env=False, follow_redirects=False)
    async with client, client.stream(endpoint.method, endpoint.url, **options) as response:
        data = bytearray()
        async for chunk in response.aiter_bytes():
            data += chunk
            if len(data) > limit:
                break
        status = response.status_code
    truncated = len(data) > limit
    text = bytes(data[:limit]).decode("utf-8", errors="replace")
    try:
        return status, (text if truncated else json.loads(text)), truncated
    except json.JSONDecodeError:
        return status, text, truncated
