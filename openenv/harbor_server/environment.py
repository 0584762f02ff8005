"""The env a Harbor server's sessions hold: the reference's MCP tool flow over our env protocol.

The reference's `HarborEnv` opens a session with `openenv/session/create` on `/mcp`, attaches a WebSocket
to it and sends each tool call as a step, `{"type": "call_tool", "tool_name", "arguments"}`, reading back an
observation with `tool_name`, `result` (the tool's JSON text) and `error` (`{error_type, message}`). It never
resets, so these sessions need none (`requires_reset = False`). The same tools are served at `/mcp`
(`mcp_tools`). A WebSocket that drops mid-rollout cancels the step, and the rollout closes its episode.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Literal

from pydantic import Field

from openenv.core.environment import Environment, EnvMetadata
from openenv.core.types import Action, Observation, State
from openenv.errors import OpenEnvError
from openenv.harbor_server.service import RUN_ROLLOUT_ARGS, HarborService

__all__ = ["HarborAction", "HarborState", "ToolCallObservation", "ToolListObservation", "harbor_environment"]

TOOLS = ("run_rollout", "capabilities")


class HarborAction(Action):
    """A reference MCP action: call a tool, or list them."""

    type: Literal["call_tool", "list_tools"] = Field(
        description="call_tool runs `tool_name`; list_tools lists them"
    )
    tool_name: str = ""
    arguments: dict[str, Any] = Field(default_factory=dict)


class ToolCallObservation(Observation):
    """A tool's answer: `result` is its JSON text; `error` is set instead when it refused or failed."""

    tool_name: str
    result: Any = None
    error: dict[str, str] | None = None


class ToolListObservation(Observation):
    tools: list[dict[str, Any]]


class HarborState(State):
    rollouts_completed: int = 0
    last_reward: float | None = None
    last_task_id: str | None = None


def _tool_list() -> list[dict[str, Any]]:
    return [
        {
            "name": "run_rollout",
            "description": "Run one whole episode (harness, sandbox, engine, verifier) and "
            "return a HarborRolloutResult as JSON.",
            "input_schema": {"type": "object", "properties": {k: {} for k in RUN_ROLLOUT_ARGS}},
        },
        {
            "name": "capabilities",
            "description": "Harnesses, sandboxes, task splits and the engine of this server.",
            "input_schema": {"type": "object", "properties": {}},
        },
    ]


def harbor_environment(service: HarborService) -> type[Environment[Any, Any, Any]]:
    """An env class bound to `service` (the server builds one instance per session)."""

    class HarborEnvironment(Environment[HarborAction, ToolCallObservation, HarborState]):
        """Harbor env road: the Task API for discovery, `run_rollout` for whole episodes."""

        action_type = HarborAction
        observation_type = ToolCallObservation
        state_type = HarborState
        requires_reset: ClassVar[bool] = False

        def __init__(self) -> None:
            self._state = HarborState()

        @classmethod
        def metadata(cls) -> EnvMetadata:
            return EnvMetadata(
                name="harbor_env",
                description="Harbor tasks as whole-episode rollouts "
                "(the reference's Harbor env protocol) on openenv's harnesses and sandboxes",
            )

        @classmethod
        def mcp_tools(cls) -> list[Callable[..., Any]]:
            return _mcp_tools(service)

        def reset(
            self, seed: int | None = None, episode_id: str | None = None, **options: Any
        ) -> Observation:
            self._state = HarborState(episode_id=episode_id)
            return ToolCallObservation(
                tool_name="",
                result="ready: call run_rollout(split=..., task_index=..., harness=..., sandbox=...)",
            )

        def step(
            self, action: HarborAction
        ) -> Observation:  # pragma: no cover - the server awaits step_async
            raise NotImplementedError("HarborEnvironment is async: the server awaits step_async")

        async def step_async(self, action: HarborAction) -> Observation:
            self._state.step_count += 1
            if action.type == "list_tools":
                return ToolListObservation(tools=_tool_list())
            name = action.tool_name
            try:
                if name == "run_rollout":
                    result = await service.run_rollout(action.arguments)
                    self._state.rollouts_completed += 1
                    self._state.last_reward, self._state.last_task_id = result.reward, result.task_id
                    return ToolCallObservation(tool_name=name, result=result.model_dump_json())
                if name == "capabilities":
                    if action.arguments:
                        return _refused(name, "invalid_args", "capabilities takes no arguments")
                    return ToolCallObservation(tool_name=name, result=service.capabilities_json())
            except OpenEnvError as exc:
                return _refused(name, "invalid_args", exc.message)
            return _refused(
                name, "tool_not_found", f"no tool {name!r}; this server's tools: {', '.join(TOOLS)}"
            )

        @property
        def state(self) -> HarborState:
            return self._state

    return HarborEnvironment


def _refused(name: str, kind: str, message: str) -> ToolCallObservation:
    return ToolCallObservation(tool_name=name, error={"error_type": kind, "message": message})


def _mcp_tools(service: HarborService) -> list[Callable[..., Any]]:
    """The same two tools for `/mcp` (the official MCP SDK builds their schemas from these signatures)."""

    async def run_rollout(
        split: str = "",
        task_index: int = 0,
        harness: str = "opencode",
        sandbox: str = "e2b",
        reward_key: str = "",
        keep_sandbox: bool = False,
        force_build: bool = False,
        llm_url: str = "",
        model: str = "",
        api_key: str = "",
        auth_header: str = "",
        provider: str = "openai",
        purpose: str = "auto",
        eval_sampling: dict[str, Any] | None = None,
        agent_timeout_sec: float = 0.0,
        agent_step_limit: int = 0,
        sampling: dict[str, Any] | None = None,
    ) -> str:
        """Run one whole episode (harness, sandbox, engine, verifier); returns a HarborRolloutResult as JSON."""
        args = dict(locals())
        return (await service.run_rollout(args)).model_dump_json()

    def capabilities() -> str:
        """Harnesses, sandboxes, task splits and the engine of this server, as JSON."""
        return service.capabilities_json()

    return [run_rollout, capabilities]
