"""A harness environment served over the env protocol: reset/step over a real WebSocket, the oracle as
the remote policy, and the typed observation (pending request, reward breakdown, sequences) intact."""

from __future__ import annotations

import pytest

from openenv.client.env_client import EnvClient
from openenv.harness.catalog import get_spec
from openenv.harness.environment import HarnessEnvironment
from openenv.harness.models import HarnessAction, HarnessObservation, HarnessState
from openenv.harness.oracle import OraclePolicy
from openenv.harness.tasks import builtin_task
from openenv.server.app import create_app
from openenv.server.runner import LocalServer

pytestmark = pytest.mark.slow


class HarnessClient(EnvClient[HarnessAction, HarnessObservation, HarnessState]):
    pass


def test_pi_over_websocket_with_a_remote_oracle(capture_server, require_harness, no_leftover_processes):
    require_harness("pi")
    app = create_app(
        lambda: HarnessEnvironment("pi", server=capture_server),
        action_type=HarnessAction,
        observation_type=HarnessObservation,
        state_type=HarnessState,
    )
    server = LocalServer(app).start()
    oracle = OraclePolicy(get_spec("pi"), builtin_task("fix-paginate-off-by-one"))
    try:
        with HarnessClient.from_url(server.base_url).sync() as client:
            obs = client.reset(task="fix-paginate-off-by-one", stage_solution=True)
            assert obs.pending is not None and obs.pending.prompt_ids
            assert client.state().task_id == "fix-paginate-off-by-one"
            while not obs.done:
                obs = client.step(HarnessAction(kind="complete", text=oracle.reply(obs.pending.request)))
    finally:
        server.stop()
    assert obs.reward == 1.0 and obs.reward_breakdown["tests_passed"] == 3
    assert obs.stats.merge_ratio == 1.0 and len(obs.sequences) == 1
