"""HarnessEnvironment lifecycle with a stand-in harness: crash, hang and early exit end the episode
with a clear status and leave no process behind; actions and options are validated."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from openenv.capture.engine import EngineSpec
from openenv.errors import BadRequest, InvalidAction
from openenv.harness.environment import EpisodeSettings, HarnessEnvironment
from openenv.harness.models import HarnessAction
from openenv.harness.tasks import Task

FAKE = Path(__file__).parent / "fixtures" / "fake_harness.py"
SPEC = """
name: fake
description: a stand-in harness for lifecycle tests
install: {method: npm, package: fake-harness, version: "1.0.0", bin: fake, node: system}
dialect: openai_chat
command: [fake, "${instruction}"]
env: {OPENAI_BASE_URL: "${base_url}/v1", OPENAI_API_KEY: "${api_key}"}
shell_tool: {name: bash, arguments: {command: "${command}"}}
"""


@pytest.fixture
def fake_harness(tmp_path, monkeypatch) -> str:
    """Install `fake` into a temporary harness cache and envs folder, as the real ones are laid out."""
    envs, cache = tmp_path / "envs", tmp_path / "cache"
    (envs / "fake").mkdir(parents=True)
    (envs / "fake" / "spec.yaml").write_text(SPEC)
    package = cache / "fake" / "lib" / "node_modules" / "fake-harness"
    package.mkdir(parents=True)
    (package / "package.json").write_text(json.dumps({"version": "1.0.0"}))
    bin_dir = cache / "fake" / "bin"
    bin_dir.mkdir()
    # Inside the cache, so the sandbox shows it (read-only) with the rest of the harness.
    shutil.copy(FAKE, package / "fake_harness.py")
    (bin_dir / "fake").write_text(f'#!/bin/sh\nexec {sys.executable} {package / "fake_harness.py"} "$@"\n')
    (bin_dir / "fake").chmod(0o755)
    monkeypatch.setenv("OPENENV_ENVS_PATH", str(envs))
    monkeypatch.setenv("OPENENV_HARNESS_CACHE", str(cache))
    return "fake"


def _task(mode: str, timeout_s: float = 60) -> Task:
    return Task(
        id=f"fake-{mode}",
        instruction=mode,
        tests={"t": ""},
        test_command='echo 0 > "$REWARD_DIR/reward.txt"',
        solution="true",
        timeout_s=timeout_s,
    )


@pytest.fixture
def env(fake_harness, capture_server, no_leftover_processes):
    environment = HarnessEnvironment(fake_harness, server=capture_server)
    yield environment
    environment.close()


def test_a_crash_ends_the_episode_as_crashed(env):
    obs = env.reset(task=_task("crash"))
    assert obs.pending is not None and not obs.done
    assert env.state.status == "waiting" and env.state.task_id == "fake-crash"
    obs = env.step(HarnessAction(kind="complete", text="hello"))
    assert obs.done and obs.harness_status == "crashed" and obs.reward == 0.0
    assert env.state.status == "done" and env.state.harness_status == "crashed"
    assert obs.turns == 1 and obs.last_turn is not None and obs.last_turn.text == "hello"


def test_each_turns_text_is_its_prompt_decoded(env, capture_server):
    # The second prompt extends the first: its text is decoded from the first's (decode_extending).
    renderer = capture_server.registry.renderer
    first = env.reset(task=_task("twice")).pending
    assert first is not None and first.text == renderer.decode(first.prompt_ids)
    second = env.step(HarnessAction(kind="complete", text="é 🌡")).pending
    assert second is not None and second.prompt_ids[: len(first.prompt_ids)] == first.prompt_ids
    assert second.text == renderer.decode(second.prompt_ids) and "温度" in second.text


def test_a_hang_ends_the_episode_as_timeout_and_kills_escaped_children(env):
    obs = env.reset(task=_task("hang"), timeout_s=8)  # room for a slow start on a loaded machine
    assert obs.pending is not None
    obs = env.step(HarnessAction(kind="complete", text="hello"))
    assert obs.done and obs.harness_status == "timeout"


def test_a_harness_that_exits_before_any_request_is_done_at_reset(env):
    obs = env.reset(task=_task("exit-early"))
    assert obs.done and obs.harness_status == "failed" and obs.turns == 0 and obs.pending is None


def test_the_harnesss_exit_ends_the_step_at_once_not_at_the_next_poll(env, monkeypatch):
    """A step waits for the harness's next request; its exit wakes that wait. With the safety-net poll
    at 90 s, only that wake-up ends these episodes within the 45 s each is given."""
    from concurrent.futures import ThreadPoolExecutor

    from openenv.harness import environment

    monkeypatch.setattr(environment, "ADVANCE_POLL_S", 90.0)
    with ThreadPoolExecutor(1) as pool:
        obs = pool.submit(env.reset, task=_task("exit-early")).result(45)
        assert obs.done and obs.harness_status == "failed"
        obs = pool.submit(env.reset, task=_task("crash")).result(45)
        assert obs.pending is not None
        obs = pool.submit(env.step, HarnessAction(kind="complete", text="hello")).result(45)
        assert obs.done and obs.harness_status == "crashed"


def test_step_before_reset_is_an_invalid_action(env):
    with pytest.raises(InvalidAction, match="call reset"):
        env.step(HarnessAction(kind="sample"))


def test_unknown_reset_option_is_named(env):
    with pytest.raises(BadRequest, match="taks"):
        env.reset(task=_task("crash"), taks="x")


def test_policy_is_a_reset_keyword_and_the_oracle_gets_its_solution_staged(env, monkeypatch):
    """A reference client names who plays beside the task (`reset(task=..., policy="oracle")`): the
    oracle's episode has the solution staged at /solution; the others do not; a bad value is named."""
    import openenv.harness.environment as environment

    staged: list[str] = []
    monkeypatch.setattr(environment, "_stage_solution", lambda sandbox, task: staged.append(task.id))
    env.reset(task=_task("exit-early"), policy="oracle")
    env.reset(task=_task("exit-early"), policy="sample")
    assert staged == ["fake-exit-early"]
    with pytest.raises(BadRequest, match="policy"):
        env.reset(task=_task("exit-early"), policy="teacher")


def test_an_unknown_sandbox_kind_is_refused_before_anything_starts(env, fake_harness):
    with pytest.raises(BadRequest, match="sandbox must be 'local' or 'docker', got 'vm'"):
        env.reset(task=_task("crash"), sandbox="vm")
    with pytest.raises(ValidationError, match="got 'vm'"):
        EpisodeSettings(sandbox="vm")  # type: ignore[arg-type]


def test_reset_during_an_episode_aborts_the_old_one(env):
    env.reset(task=_task("hang"))
    obs = env.reset(task=_task("crash"))
    assert env.state.task_id == "fake-crash" and obs.pending is not None
    env.step(HarnessAction(kind="complete", text="bye"))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"kind": "complete"}, "exactly one of"),
        ({"kind": "complete", "text": "a", "token_ids": [1]}, "exactly one of"),
        ({"kind": "sample", "text": "a"}, "takes no"),
        ({"kind": "sample", "temperature": 1}, "temperature"),
    ],
)
def test_actions_are_validated(fields, message):
    with pytest.raises(ValidationError, match=message):
        HarnessAction.model_validate(fields)


def test_the_harness_env_holds_its_engine_as_one_value(tiny_model: Path) -> None:
    spec = EngineSpec("vllm", str(tiny_model), ("http://127.0.0.1:9",))
    assert HarnessEnvironment("pi", engine=spec).engine == spec
    with pytest.raises(TypeError, match="backend"):
        HarnessEnvironment("pi", backend="vllm")  # type: ignore[call-arg]


def test_the_constructor_has_one_door_per_value_and_reads_no_environment(monkeypatch) -> None:
    """Two values (engine, settings), a shared server and the hooks: nothing loose beside them. A served env
    is built with no arguments and takes its engine from the environment at its first use, not when built."""
    import inspect

    assert list(inspect.signature(HarnessEnvironment.__init__).parameters) == [
        "self",
        "harness",
        "engine",
        "server",
        "settings",
        "hooks",
    ]
    monkeypatch.setenv("OPENENV_BACKEND", "nonsense")
    env = HarnessEnvironment("pi")  # built: nothing read yet
    with pytest.raises(BadRequest, match="OPENENV_BACKEND='nonsense'"):
        _ = env.engine
    monkeypatch.setenv("OPENENV_BACKEND", "local")
    assert env.engine.backend == "local"
