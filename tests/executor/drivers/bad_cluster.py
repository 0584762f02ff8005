"""Driver (inside the cluster's namespace): the ways a Ray run is refused before any episode starts.

argv: vLLM URL, a model folder that does not exist, a harness whose install only the head node sees.
Prints one JSON line: each refusal's message.
"""

from __future__ import annotations

import json
import sys

from openenv.errors import OpenEnvError
from openenv.executor import EngineSpec
from openenv.executor.cluster import RayExecutor

url, absent, missing_on_one = sys.argv[1], sys.argv[2], sys.argv[3]
cases: dict[str, dict[str, object]] = {
    "missing_model": {"engine": EngineSpec(model=absent, vllm_urls=(url,)), "harnesses": ["pi"]},
    "unreachable_engine": {"engine": EngineSpec(vllm_urls=("http://127.0.0.1:9",)), "harnesses": ["pi"]},
    "no_slot_resource": {
        "engine": EngineSpec(vllm_urls=(url,)),
        "harnesses": ["pi"],
        "slot_resource": "gpu_slot",
    },
    "local_backend": {"engine": EngineSpec(backend="local"), "harnesses": ["pi"]},
    "cli_missing_on_one_node": {"engine": EngineSpec(vllm_urls=(url,)), "harnesses": ["pi", missing_on_one]},
}
messages = {}
for name, options in cases.items():
    try:
        RayExecutor("auto", start_timeout_s=120, **options).close()  # type: ignore[arg-type]
        messages[name] = "started"
    except OpenEnvError as exc:
        messages[name] = exc.message
print(json.dumps(messages))
