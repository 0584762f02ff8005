"""Environment: the sync contract, and async variants that keep the caller's event loop free."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from echo_env import EchoAction, EchoEnvironment, EchoObservation
from openenv.core import Environment


class ThreadRecordingEnv(EchoEnvironment):
    """Echo that records which thread ran its sync methods."""

    blocking = True
    threads: list[str]

    def __init__(self) -> None:
        super().__init__()
        self.threads = []

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **options: Any
    ) -> EchoObservation:
        self.threads.append(threading.current_thread().name)
        return super().reset(seed, episode_id, **options)

    def step(self, action: EchoAction) -> EchoObservation:
        self.threads.append(threading.current_thread().name)
        return super().step(action)


def test_an_env_missing_step_cannot_be_instantiated() -> None:
    class Incomplete(Environment[Any, Any, Any]):
        def reset(self, seed: int | None = None, episode_id: str | None = None, **options: Any) -> Any: ...

        @property
        def state(self) -> Any: ...

    with pytest.raises(TypeError, match="step"):
        Incomplete()  # type: ignore[abstract]


async def test_async_variants_run_the_sync_methods_off_the_event_loop_thread() -> None:
    env = ThreadRecordingEnv()
    await env.reset_async(episode_id="e1")
    obs = await env.step_async(EchoAction(message="abc"))
    assert obs.echoed_message == "abc"
    assert env.state.episode_id == "e1"
    assert threading.current_thread().name not in env.threads


async def test_non_blocking_envs_run_inline_on_the_callers_thread() -> None:
    class InlineEnv(ThreadRecordingEnv):
        blocking = False

    env = InlineEnv()
    await env.reset_async()
    await env.step_async(EchoAction(message="abc"))
    assert env.threads == [threading.current_thread().name] * 2


def test_reset_passes_options_through_as_keywords() -> None:
    env = EchoEnvironment()
    env.reset(max_steps=1)
    assert env.step(EchoAction(message="x")).done is True


def test_metadata_defaults_to_class_name_and_first_doc_line() -> None:
    class Tiny(EchoEnvironment):
        """A tiny env.

        More words.
        """

    meta = Environment.metadata.__func__(Tiny)  # type: ignore[attr-defined]
    assert (meta.name, meta.description) == ("Tiny", "A tiny env.")
