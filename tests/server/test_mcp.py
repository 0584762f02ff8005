"""MCP at /mcp of every env server, driven by the official `mcp` SDK client over a real socket."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from echo_env import EchoEnvironment
from openenv.client.mcp import connect_mcp
from openenv.core.auth import auth_headers
from openenv.errors import BadRequest
from openenv.server.mcp import env_tools


class WordCount(BaseModel):
    words: int
    longest: str


def count_words(text: str) -> WordCount:
    """Count the words of `text` and name the longest."""
    words = text.split()
    if not words:
        raise BadRequest("text has no words; send at least one")
    return WordCount(words=len(words), longest=max(words, key=len))


async def shout(text: str) -> str:
    """Upper-case `text` (an async tool)."""
    return text.upper()


class ToolEchoEnvironment(EchoEnvironment):
    """Echo with two agent-facing tools, declared through the `mcp_tools` hook."""

    @classmethod
    def mcp_tools(cls) -> list[Any]:
        return [count_words, shout]


async def _with_client(url: str, body: Any) -> Any:
    async with connect_mcp(url) as client:
        return await body(client)


async def test_env_without_tools_answers_mcp_with_an_empty_tool_list(serve):
    url = serve(EchoEnvironment)

    async def body(client: Any) -> Any:
        return await client.list_tools()

    listed = await _with_client(url, body)
    assert listed.tools == []


async def test_mcp_tools_hook_becomes_tools_with_schemas_and_structured_results(serve):
    url = serve(ToolEchoEnvironment)

    async def body(client: Any) -> Any:
        listed = await client.list_tools()
        counted = await client.call_tool("count_words", {"text": "reset step state"})
        shouted = await client.call_tool("shout", {"text": "hi"})
        return listed, counted, shouted

    listed, counted, shouted = await _with_client(url, body)
    tools = {t.name: t for t in listed.tools}
    assert sorted(tools) == ["count_words", "shout"]
    assert tools["count_words"].description.startswith("Count the words")
    assert tools["count_words"].input_schema["required"] == ["text"]
    assert counted.is_error is False
    assert counted.structured_content == {"words": 3, "longest": "reset"}
    assert shouted.content[0].text == "HI"


async def test_a_tool_error_reaches_the_mcp_client_as_an_error_result_naming_the_problem(serve):
    url = serve(ToolEchoEnvironment)

    async def body(client: Any) -> Any:
        return await client.call_tool("count_words", {"text": "   "})

    result = await _with_client(url, body)
    assert result.is_error is True
    assert "text has no words" in result.content[0].text


async def test_control_plane_stays_separate_from_mcp(serve, http):
    url = serve(ToolEchoEnvironment)

    async def body(client: Any) -> Any:
        return [t.name for t in (await client.list_tools()).tools]

    assert "reset" not in await _with_client(url, body)
    reset = http.post(f"{url}/reset", json={})
    assert reset.status_code == 200, reset.text
    assert "/mcp" not in http.get(f"{url}/openapi.json").json()["paths"]


def test_env_tools_maps_the_harness_env_to_its_four_tools():
    from openenv.harness.environment import HarnessEnvironment

    class PiLike(HarnessEnvironment):
        harness = "pi"

    names = [t.__name__ for t in env_tools(PiLike)]
    assert names == ["list_tasks", "list_harnesses", "run_episode", "get_trajectory"]
    assert env_tools(EchoEnvironment) == []
    assert env_tools(lambda: EchoEnvironment()) == []


@pytest.mark.parametrize("body", [b"not json", b'{"jsonrpc": "2.0"}'])
def test_a_malformed_mcp_post_is_refused_and_the_server_keeps_serving(serve, body):
    url = serve(EchoEnvironment)
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    response = httpx.post(f"{url}/mcp", content=body, headers=headers | auth_headers(url), timeout=10.0)
    assert 400 <= response.status_code < 500
    assert httpx.get(f"{url}/health", timeout=10.0).status_code == 200
