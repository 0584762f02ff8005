"""What a node must have before it runs an episode: checked in each `EpisodeWorker.__init__`.

A cluster where one node lacks the tokenizer folder or a harness CLI, or cannot reach the engine,
otherwise fails one episode at a time, minutes in, as a masked group whose cause is buried in a
worker log. Checked up front, the run refuses to start and says which node lacks what.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from openenv.errors import EnvError
from openenv.executor.base import EngineSpec

__all__ = ["NodeNotReady", "node_problems", "probe_engine"]


class NodeNotReady(EnvError):
    """This node cannot run the run's episodes; the message lists every missing piece."""


def node_problems(engine: EngineSpec, harnesses: Sequence[str], sandbox: str = "local") -> list[str]:
    """Everything missing on this machine for `engine`, `harnesses` and `sandbox` (`docker`: an engine
    must answer here), as sentences (empty: ready)."""
    problems = _tokenizer_problems(engine.model)
    problems += _harness_problems(harnesses)
    if sandbox == "docker":
        problems += _docker_problems()
    for url in engine.vllm_urls if engine.backend == "vllm" else ():
        error = probe_engine(url)
        if error:
            problems.append(error)
    return problems


def _tokenizer_problems(model: str | None) -> list[str]:
    if model is None:
        from openenv.models.tiny import tiny_model_path

        try:
            folder = tiny_model_path()
        except Exception as exc:
            return [
                (
                    f"the tiny model is not built here ({type(exc).__name__}: {exc}); run "
                    "`python scripts/build_tiny_model.py` on this node or pass the model folder"
                )
            ]
    else:
        folder = Path(model)
    if not folder.is_dir():
        return [
            (
                f"the tokenizer folder {folder} does not exist here (copy the model folder to the same "
                "path on every node, or put it on a shared filesystem)"
            )
        ]
    if not any((folder / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json")):
        return [f"the folder {folder} has no tokenizer (tokenizer.json / tokenizer_config.json)"]
    return []


def _harness_problems(harnesses: Sequence[str]) -> list[str]:
    from openenv.harness.catalog import get_spec
    from openenv.harness.install import resolve_bin

    problems = []
    for name in dict.fromkeys(harnesses):
        try:
            spec = get_spec(name)
        except Exception as exc:
            problems.append(f"harness {name!r}: {getattr(exc, 'message', exc)}")
            continue
        if resolve_bin(spec) is None:
            problems.append(
                f"the {name} CLI is not installed here (run `openenv harness install {name}` on "
                "this node, or share $OPENENV_HARNESS_CACHE)"
            )
    return problems


def _docker_problems() -> list[str]:
    try:
        from openenv.harness.sandbox.docker_engine import engine_available
    except ImportError as exc:
        return [f"the run uses Docker sandboxes, but the Docker SDK does not import here ({exc})"]
    reason = engine_available()
    return [] if reason is None else [f"the run uses Docker sandboxes, but {reason}"]


def probe_engine(url: str, timeout_s: float = 5.0) -> str | None:
    """None when `url`'s `/v1/models` answers 200 from here; else why not, as a sentence."""
    import httpx

    try:
        reply = httpx.get(f"{url.rstrip('/')}/v1/models", timeout=timeout_s, trust_env=False)
    except httpx.HTTPError as exc:
        return f"the engine at {url} is unreachable from here ({type(exc).__name__}: {exc})"
    if reply.status_code != 200:
        return f"the engine at {url} answered /v1/models with HTTP {reply.status_code}"
    return None
