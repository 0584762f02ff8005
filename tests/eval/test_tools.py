"""The harness env's MCP tools at /mcp of a real pi env server, called with the official `mcp` SDK client."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from openenv.auto import load_env, resolve
from openenv.server import LocalServer, create_app


@pytest.fixture
def pi_server(monkeypatch: pytest.MonkeyPatch, tmp_path) -> Iterator[str]:
    monkeypatch.setenv("OPENENV_EPISODES_DIR", str(tmp_path / "episodes"))
    loaded = load_env(resolve("pi"))
    with LocalServer(create_app(loaded.env_class, metadata=loaded.metadata)) as server:
        yield server.base_url


async def _call(url: str, body: Any) -> Any:
    from openenv.client.mcp import connect_mcp

    async with connect_mcp(url) as client:
        return await body(client)


async def test_pi_env_server_lists_the_four_harness_tools_and_the_catalog(pi_server):
    async def body(client: Any) -> Any:
        tools = await client.list_tools()
        harnesses = await client.call_tool("list_harnesses", {})
        tasks = await client.call_tool("list_tasks", {})
        return tools, harnesses, tasks

    tools, harnesses, tasks = await _call(pi_server, body)
    by_name = {t.name: t for t in tools.tools}
    assert sorted(by_name) == ["get_trajectory", "list_harnesses", "list_tasks", "run_episode"]
    assert by_name["run_episode"].input_schema["required"] == ["task"]
    assert set(by_name["run_episode"].input_schema["properties"]) >= {"harness", "task", "backend", "policy"}
    names = {h["name"] for h in harnesses.structured_content["result"]}
    assert {"pi", "codex", "claude-code", "mini-swe-agent"} <= names
    ids = [t["id"] for t in tasks.structured_content["result"]]
    assert "fix-temperature-conversion" in ids and len(ids) == 13


async def test_get_trajectory_of_an_unknown_or_malformed_id_is_a_tool_error(pi_server):
    async def body(client: Any) -> Any:
        return (
            await client.call_tool("get_trajectory", {"episode_id": "nope"}),
            await client.call_tool("get_trajectory", {"episode_id": "../../etc/passwd"}),
        )

    unknown, traversal = await _call(pi_server, body)
    assert unknown.is_error and "no episode 'nope'" in unknown.content[0].text
    assert traversal.is_error and "is not an episode id" in traversal.content[0].text


@pytest.mark.slow
async def test_run_episode_returns_reward_and_summary_then_get_trajectory_returns_the_log(pi_server):
    """A whole real pi episode (oracle policy) through one MCP tool call, then its log by id."""

    async def body(client: Any) -> Any:
        ran = await client.call_tool(
            "run_episode", {"task": "fix-temperature-conversion", "policy": "oracle"}
        )
        assert not ran.is_error, ran.content
        log = await client.call_tool("get_trajectory", {"episode_id": ran.structured_content["episode_id"]})
        return ran.structured_content, log

    ran, log = await _call(pi_server, body)
    summary = ran["summary"]
    assert (summary["harness"], summary["reward"], summary["merge_ratio"]) == ("pi", 1.0, 1.0)
    assert summary["tool_calls"] == 1 and summary["turns"] == 2
    episode = log.structured_content
    assert [t["kind"] for t in episode["turns"]] == ["new", "merged"]
    assert len(episode["sequences"]) == 1 and set(episode["requests"]) == {t["id"] for t in episode["turns"]}


@pytest.mark.parametrize(
    ("arguments", "needle"),
    [
        ({"task": "../../../../tmp/x"}, "task id '../../../../tmp/x' is not a plain name"),
        (
            {"task": "fix-temperature-conversion", "harness": "/tmp/evil-harness"},
            "unknown harness '/tmp/evil-harness'",
        ),
        ({"task": "fix-temperature-conversion", "harness": "../../tmp/evil"}, "unknown harness"),
        ({"task": "fix-temperature-conversion", "task_set": "/tmp"}, "unknown task set '/tmp'"),
    ],
)
async def test_run_episode_takes_only_known_harnesses_task_sets_and_plain_task_ids(
    pi_server, arguments, needle, tmp_path
):
    """Host paths as harness or task set (a spec.yaml or a task the caller wrote), and a task id that walks
    out of the episodes folder, are refused before anything runs or is written."""

    async def body(client: Any) -> Any:
        return await client.call_tool("run_episode", arguments)

    refused = await _call(pi_server, body)
    assert refused.is_error and needle in refused.content[0].text
    assert not (tmp_path / "episodes").exists() or not list((tmp_path / "episodes").iterdir())


async def test_list_tasks_lists_only_the_servers_task_sets(pi_server, tmp_path, monkeypatch):
    async def body(client: Any) -> Any:
        return await client.call_tool("list_tasks", {"task_set": "/etc"})

    refused = await _call(pi_server, body)
    assert refused.is_error and "unknown task set '/etc'" in refused.content[0].text


def test_the_operator_adds_task_sets_with_an_environment_variable(monkeypatch, tmp_path):
    from openenv.harness.tasks.sets import served_task_sets

    monkeypatch.setenv("OPENENV_TASK_SETS", f"{tmp_path}, org/dataset, builtin")
    assert served_task_sets() == ["builtin", str(tmp_path), "org/dataset"]


def test_a_recorded_episode_refuses_a_task_id_that_leaves_the_episodes_folder(tmp_path):
    from openenv.errors import BadRequest
    from openenv.eval.episodes import EpisodeRequest, run_recorded_episode

    with pytest.raises(BadRequest, match="task id"):
        run_recorded_episode(EpisodeRequest(harness="pi", task="../../../../tmp/x"), tmp_path / "episodes")
    assert not (tmp_path / "episodes").exists()
