"""EnvClient and its sync twin: typed results, one session per client, server errors as exceptions."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from echo_env import EchoAction, EchoClient, EchoEnvironment, EchoObservation, EchoState
from openenv.client import AnyObservation, EnvClient, SyncEnvClient
from openenv.core.net import free_port
from openenv.errors import BadRequest, CapacityError, InvalidAction, TransportError
from openenv.server import LocalServer, create_app


async def test_typed_client_returns_the_env_models(echo_url: str) -> None:
    async with EchoClient.from_url(echo_url) as env:
        first = await env.reset(episode_id="typed", max_steps=2)
        obs = await env.step(EchoAction(message="hi"))
        state = await env.state()
    assert isinstance(first, EchoObservation) and isinstance(obs, EchoObservation)
    assert (obs.echoed_message, obs.message_length) == ("hi", 2)
    assert isinstance(state, EchoState)
    assert (state.episode_id, state.step_count, state.max_steps) == ("typed", 1, 2)


async def test_generic_arguments_declare_the_models() -> None:
    assert (EchoClient.action_type, EchoClient.observation_type, EchoClient.state_type) == (
        EchoAction,
        EchoObservation,
        EchoState,
    )


async def test_an_untyped_client_keeps_env_fields_as_extras(echo_url: str) -> None:
    async with EnvClient(echo_url) as env:
        await env.reset()
        obs = await env.step({"message": "raw"})
    assert isinstance(obs, AnyObservation)
    assert obs.model_extra == {"echoed_message": "raw", "message_length": 3}


async def test_a_mapping_action_is_validated_before_it_is_sent(echo_url: str) -> None:
    async with EchoClient.from_url(echo_url) as env:
        await env.reset()
        with pytest.raises(InvalidAction, match="action field 'mesage': Extra inputs are not permitted"):
            await env.step({"mesage": "typo"})
        assert (await env.step({"message": "fine"})).echoed_message == "fine"


async def test_server_side_invalid_action_raises_invalid_action(echo_url: str) -> None:
    async with EnvClient(echo_url) as env:
        await env.reset()
        with pytest.raises(InvalidAction, match="action field 'mesage'") as info:
            await env.step({"mesage": "typo"})
        assert info.value.code == "invalid_action"


async def test_server_errors_map_to_openenv_error_classes(echo_url: str) -> None:
    async with EchoClient.from_url(echo_url) as env:
        with pytest.raises(BadRequest, match="reset before step"):
            await env.step(EchoAction(message="early"))
        with pytest.raises(BadRequest, match="max_steps"):
            await env.reset(difficulty="hard")


async def test_capacity_error_carries_the_servers_numbers(echo_url: str) -> None:
    async with EchoClient.from_url(echo_url) as a, EchoClient.from_url(echo_url) as b:
        await a.reset()
        await b.reset()
        with pytest.raises(CapacityError) as info:
            async with EchoClient.from_url(echo_url) as c:
                await c.reset()
    assert info.value.details == {"active": 2, "maximum": 2}


async def test_closing_the_client_frees_the_session_on_the_server(echo_url: str) -> None:
    async def active() -> int:
        async with httpx.AsyncClient() as http:
            return int((await http.get(f"{echo_url}/health")).json()["active_sessions"])

    env = EchoClient.from_url(echo_url)
    await env.reset()
    assert await active() == 1
    await env.close()
    await env.close()  # idempotent
    for _ in range(50):
        if await active() == 0:
            break
        await asyncio.sleep(0.02)
    assert await active() == 0


async def test_no_server_is_a_transport_error_naming_the_url() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(TransportError, match=url.replace("http", "ws")):
        await EchoClient.from_url(url, open_timeout_s=2).reset()


async def test_a_server_that_goes_away_is_a_transport_error() -> None:
    from echo_env import EchoEnvironment
    from openenv.server import create_app

    server = LocalServer(create_app(EchoEnvironment)).start()
    env = EchoClient.from_url(server.base_url)
    await env.reset()
    server.stop()
    with pytest.raises(TransportError):
        await env.step(EchoAction(message="anyone?"))
    await env.close()


def test_sync_twin_runs_the_same_episode(echo_url: str) -> None:
    with EchoClient.from_url(echo_url).sync() as env:
        assert isinstance(env, SyncEnvClient)
        env.reset(max_steps=1)
        obs = env.step(EchoAction(message="sync"))
        assert (obs.echoed_message, obs.done) == ("sync", True)
        assert env.state().step_count == 1


def test_sync_twin_raises_the_same_errors(echo_url: str) -> None:
    with EchoClient.from_url(echo_url).sync() as env, pytest.raises(BadRequest, match="reset before step"):
        env.step(EchoAction(message="early"))


async def test_sync_refuses_an_already_connected_client(echo_url: str) -> None:
    async with EchoClient.from_url(echo_url) as env:
        with pytest.raises(RuntimeError, match="before connect"):
            env.sync()


def test_urls_map_to_the_ws_endpoint() -> None:
    assert EnvClient("http://127.0.0.1:9/").ws_url == "ws://127.0.0.1:9/ws"
    assert EnvClient("https://owner-env.hf.space").ws_url == "wss://owner-env.hf.space/ws"
    with pytest.raises(ValueError, match="http"):
        EnvClient("ftp://nope")


class SlowEcho(EchoEnvironment):
    blocking = True

    def step(self, action: EchoAction) -> EchoObservation:
        time.sleep(1.0)
        return super().step(action)


async def test_a_reply_timeout_closes_the_connection_so_late_replies_cannot_cross() -> None:
    with LocalServer(create_app(SlowEcho)) as server:
        env = EchoClient.from_url(server.base_url, request_timeout_s=0.2)
        await env.reset()
        with pytest.raises(TransportError, match=r"no reply to step .* within 0.2 s"):
            await env.step(EchoAction(message="slow"))
        # the next call opens a fresh connection (a new session) instead of reading the stale reply
        obs = await env.reset(episode_id="fresh")
        assert obs.echoed_message == ""
        assert (await env.state()).episode_id == "fresh"
        await env.close()
