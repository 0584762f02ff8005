"""The Harbor env road: `openenv serve harbor` answers the reference OpenEnv's `HarborEnv` (its Task API and
the MCP tools `run_rollout` and `capabilities`) with episodes run by our own machinery. See docs/interop.md.

Layering: above `openenv.harness` (it runs `HarnessEnvironment` episodes) and `openenv.server` (it is an
env server with one more router); below the CLI.
"""

from openenv.harbor_server.admission import RolloutPolicy, check_training_sampling
from openenv.harbor_server.app import build_harbor_app
from openenv.harbor_server.service import HarborService
from openenv.harbor_server.splits import Splits
from openenv.harbor_server.wire import HarborRolloutResult, HarborTaskRef, HarborTurn

__all__ = [
    "HarborRolloutResult",
    "HarborService",
    "HarborTaskRef",
    "HarborTurn",
    "RolloutPolicy",
    "Splits",
    "build_harbor_app",
    "check_training_sampling",
]
