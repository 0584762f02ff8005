"""MCP at `/mcp`: an env's agent-facing tools over streamable HTTP, on the official `mcp` SDK.

The same tools answer the reference OpenEnv's plain JSON-RPC (a POST that does not accept an event
stream, and the WebSocket's `mcp` message): `openenv.server.mcp_rpc`.

The control plane (reset/step/state over HTTP and WebSocket) is for trainers; MCP is for agents and
IDEs that want an env's *tools*. An env class names its tools with a `mcp_tools()` classmethod that
returns plain (sync or async) functions: their names, docstrings and type hints become the MCP tool
schemas. Envs that cannot carry the hook are mapped to a toolset here (the harness env's lives in
`openenv.eval.tools`). An env with no tools still answers MCP, with an empty tool list.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from openenv.core.environment import EnvMetadata
from openenv.errors import OpenEnvError
from openenv.manifest import import_object
from openenv.server.mcp_rpc import JsonRpcCode, McpRpc, rpc_error
from openenv.server.security import ServerSecurity
from openenv.server.sessions import EnvSessionRegistry

__all__ = ["MCP_PATH", "build_mcp_server", "env_tools", "mount_mcp"]

MCP_PATH = "/mcp"
Tool = Callable[..., Any]
# `module.Class` of an env base -> `module:factory(env_cls) -> tools`, for classes we do not own.
_TOOLSETS = {"openenv.harness.environment.HarnessEnvironment": "openenv.eval.tools:harness_tools"}


def env_tools(env_factory: object) -> list[Tool]:
    """The agent-facing tools of an env class: its `mcp_tools()` hook, else a mapped toolset, else none."""
    if not isinstance(env_factory, type):
        return []
    hook = getattr(env_factory, "mcp_tools", None)
    if callable(hook):
        return list(hook())
    for klass in env_factory.__mro__:
        ref = _TOOLSETS.get(f"{klass.__module__}.{klass.__qualname__}")
        if ref is not None:
            return list(import_object(ref)(env_factory))
    return []


def build_mcp_server(
    metadata: EnvMetadata, tools: list[Tool], registry: Callable[[], EnvSessionRegistry] | None = None
) -> Any:
    """An `MCPServer` named after the env, with `tools` registered.

    With `registry`, every tool call in flight holds one of the server's `max_sessions` slots (an
    episode run over MCP is as heavy as one over the control plane, and used to be uncounted)."""
    from mcp.server.mcpserver import MCPServer

    # log_level: the SDK calls logging.basicConfig with it; WARNING keeps a server's root logger as quiet
    # as Python's default instead of INFO-logging every MCP request.
    server = MCPServer(
        name=f"openenv-{metadata.name}",
        version=metadata.version,
        instructions=metadata.description or None,
        log_level="WARNING",
    )
    for tool in tools:
        server.add_tool(_reporting_errors(tool, registry))
    return server


def _reporting_errors(tool: Tool, registry: Callable[[], EnvSessionRegistry] | None = None) -> Tool:
    """Let an `OpenEnvError` reach the MCP client as a tool error with its message (the SDK hides the
    text of any other exception as a crash). `wraps` keeps the signature the SDK builds the schema from."""
    from anyio import to_thread
    from mcp.server.mcpserver.exceptions import ToolError

    @functools.wraps(tool)
    async def call(*args: Any, **kwargs: Any) -> Any:
        try:
            async with registry().hold("mcp") if registry is not None else contextlib.nullcontext():
                if inspect.iscoroutinefunction(tool):
                    return await tool(*args, **kwargs)
                return await to_thread.run_sync(functools.partial(tool, *args, **kwargs))
        except OpenEnvError as exc:
            raise ToolError(exc.message) from exc

    return call


class _McpEndpoint:
    """The ASGI app behind `/mcp`. The SDK's session manager runs once per lifespan, so a fresh one is
    built each time the app starts (tests and `LocalServer` may start the same app more than once)."""

    def __init__(
        self,
        metadata: EnvMetadata,
        env_factory: object,
        security: ServerSecurity,
        registry: Callable[[], EnvSessionRegistry],
    ) -> None:
        self._metadata = metadata
        self._env_factory = env_factory
        self._security = security
        self._registry = registry
        self._handler: Any = None
        self.server: Any = None  # the running MCPServer; the reference's plain JSON-RPC uses it too
        self.rpc = McpRpc(lambda: self.server, registry)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        from mcp.server.streamable_http_manager import StreamableHTTPASGIApp

        server = build_mcp_server(self._metadata, env_tools(self._env_factory), self._registry)
        # The app's SecurityMiddleware checked token, Host and Origin already; the SDK's own DNS-rebinding
        # check gets the same rules, so /mcp stays guarded if it is ever served without the middleware.
        server.streamable_http_app(
            stateless_http=True,
            json_response=True,
            transport_security=self._security.mcp_transport_security(),
        )
        async with server.session_manager.run():
            self._handler = StreamableHTTPASGIApp(server.session_manager)
            self.server = server
            try:
                yield
            finally:
                self._handler = self.server = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._handler is None:
            response = JSONResponse(
                {
                    "error": {
                        "code": "unavailable",
                        "message": "MCP is not running (the app's lifespan has not started)",
                        "details": {},
                    }
                },
                status_code=503,
            )
            await response(scope, receive, send)
            return
        request = Request(scope, receive)
        if request.method == "POST" and not _streamable_http(request):
            response = await self._plain_rpc(request)
            await response(scope, receive, send)
            return
        await self._handler(scope, receive, send)

    async def _plain_rpc(self, request: Request) -> JSONResponse:
        """The reference's MCP over HTTP: one bare JSON-RPC request per POST, always answered 200 with a
        JSON-RPC response (its `validate --url` checks exactly that with a POST of `{}`)."""
        try:
            payload = json.loads(await request.body())
        except ValueError:
            return JSONResponse(rpc_error(JsonRpcCode.PARSE_ERROR, "Parse error: the body is not JSON"))
        return JSONResponse(await self.rpc.handle(payload))


def _streamable_http(request: Request) -> bool:
    """True for MCP's streamable-HTTP clients (the official SDK): the spec makes them accept both JSON and
    an event stream. A POST that does not is the reference OpenEnv's plain JSON-RPC."""
    return "text/event-stream" in request.headers.get("accept", "")


def mount_mcp(app: FastAPI, env_factory: object, metadata: EnvMetadata, security: ServerSecurity) -> McpRpc:
    """Serve the env's MCP tools at `/mcp` of `app`, beside its control plane and sharing its session cap.

    Returns:
        The reference-style JSON-RPC handler over the same tools, for the WebSocket's `mcp` message.
    """
    endpoint = _McpEndpoint(metadata, env_factory, security, lambda: app.state.registry)
    app.router.routes.append(Route(MCP_PATH, endpoint, include_in_schema=False))  # an ASGI app: every method
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with endpoint.running(), inner(a) as state:
            yield state

    app.router.lifespan_context = lifespan
    return endpoint.rpc
