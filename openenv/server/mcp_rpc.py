"""The reference OpenEnv's MCP flow: plain JSON-RPC 2.0 on `POST /mcp` and in the WebSocket `mcp` message.

The reference's `MCPToolClient` does not speak MCP's streamable HTTP: it POSTs bare JSON-RPC requests
(`openenv/session/create`, then `tools/list` and `tools/call` naming that session, `openenv/session/close`
at the end) and attaches its WebSocket to the session with `/ws?session_id=`. Its `validate --url`
POSTs `{}` and wants a JSON-RPC error back with status 200. This module answers all of that from the
same tools the official SDK serves at `/mcp` (`openenv.server.mcp`), so both kinds of client see one
toolset. Every failure is a JSON-RPC error object, never an HTTP error: that is what these clients read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from openenv.core.wire import ErrorBody
from openenv.errors import CapacityError, OpenEnvError, UnknownSession
from openenv.server.sessions import EnvSession, EnvSessionRegistry

__all__ = ["JsonRpcCode", "McpRpc", "rpc_error"]

log = logging.getLogger(__name__)


class JsonRpcCode:
    """JSON-RPC 2.0's error codes, as the reference uses them."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    SERVER_ERROR = -32000


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")

    jsonrpc: str = Field(pattern=r"^2\.0$")
    method: str
    params: dict[str, Any] = Field(default_factory=dict)
    id: str | int | None = None


def rpc_error(
    code: int, message: str, request_id: str | int | None = None, data: Any = None
) -> dict[str, Any]:
    """A JSON-RPC error response."""
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message, "data": data}}


def _result(result: Any, request_id: str | int | None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


class McpRpc:
    """Answers one JSON-RPC request: the reference's session methods and MCP's `tools/list`/`tools/call`.

    Args:
        server: returns the running `MCPServer` (built per app lifespan by `openenv.server.mcp`), or None
            before the lifespan started.
        registry: returns the app's session registry; `openenv/session/create` opens a session there (an
            env instance, counted against `max_sessions`), which a WebSocket may then attach to.
    """

    def __init__(self, server: Callable[[], Any], registry: Callable[[], EnvSessionRegistry]) -> None:
        self._server = server
        self._registry = registry

    async def handle(self, payload: Any, *, session: EnvSession | None = None) -> dict[str, Any]:
        """The JSON-RPC response to `payload` (already JSON-decoded).

        Args:
            payload: the request object.
            session: the session of the WebSocket the request came on, if any.
        """
        try:
            req = _Request.model_validate(payload)
        except ValidationError as exc:
            request_id = payload.get("id") if isinstance(payload, dict) else None
            if not isinstance(request_id, (str, int)):
                request_id = None
            return rpc_error(JsonRpcCode.INVALID_REQUEST, f"Invalid request: {_first_error(exc)}", request_id)
        try:
            return await self._dispatch(req, session)
        except OpenEnvError as err:
            code = JsonRpcCode.SERVER_ERROR if isinstance(err, CapacityError) else JsonRpcCode.INTERNAL_ERROR
            return rpc_error(code, err.message, req.id, {"code": err.code, **ErrorBody.of(err).details})
        except Exception as exc:  # a tool's own failure; the SDK reports it as a ToolError
            log.info("MCP %s failed: %s", req.method, exc)
            return rpc_error(JsonRpcCode.INTERNAL_ERROR, str(exc), req.id)

    async def _dispatch(self, req: _Request, session: EnvSession | None) -> dict[str, Any]:
        registry = self._registry()
        match req.method:
            case "openenv/session/create":
                if session is None:
                    session = await registry.open("mcp")
                return _result({"session_id": session.id}, req.id)
            case "openenv/session/close":
                return await self._close(req, session, registry)
            case "tools/list" | "tools/call":
                if (named := req.params.get("session_id")) is not None:
                    try:
                        registry.get(str(named))
                    except UnknownSession:
                        return rpc_error(JsonRpcCode.INVALID_PARAMS, f"Unknown session_id: {named}", req.id)
                server = self._server()
                if server is None:
                    return rpc_error(
                        JsonRpcCode.INTERNAL_ERROR,
                        "MCP is not running (the app's lifespan has not started)",
                        req.id,
                    )
                if req.method == "tools/list":
                    tools = await server.list_tools()
                    return _result(
                        {
                            "tools": [
                                t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools
                            ]
                        },
                        req.id,
                    )
                return await self._call(server, req)
            case _:
                return rpc_error(JsonRpcCode.METHOD_NOT_FOUND, f"Method not found: {req.method}", req.id)

    async def _close(
        self, req: _Request, session: EnvSession | None, registry: EnvSessionRegistry
    ) -> dict[str, Any]:
        target = req.params.get("session_id")
        if not target:
            return rpc_error(JsonRpcCode.INVALID_PARAMS, "Invalid params - 'session_id' is required", req.id)
        if session is not None and target == session.id:
            return rpc_error(
                JsonRpcCode.INVALID_REQUEST,
                "Cannot close active WebSocket-managed session via MCP method",
                req.id,
            )
        try:
            live = registry.get(str(target))
        except UnknownSession:
            return rpc_error(JsonRpcCode.INVALID_PARAMS, f"Unknown session_id: {target}", req.id)
        if live.attached:  # its WebSocket closes it when it hangs up
            live.close_on_detach = True
            return _result({"session_id": live.id, "closed": False, "closing": True}, req.id)
        await registry.close(live.id)
        return _result({"session_id": live.id, "closed": True}, req.id)

    async def _call(self, server: Any, req: _Request) -> dict[str, Any]:
        name = req.params.get("name")
        arguments = req.params.get("arguments") or {}
        if not isinstance(name, str) or not name:
            return rpc_error(JsonRpcCode.INVALID_PARAMS, "Missing 'name' in params", req.id)
        if not isinstance(arguments, dict):
            return rpc_error(JsonRpcCode.INVALID_PARAMS, "'arguments' must be an object", req.id)
        if name not in {t.name for t in await server.list_tools()}:
            return rpc_error(JsonRpcCode.INVALID_PARAMS, f"Tool not found: {name}", req.id)
        result = await server.call_tool(name, arguments)
        body = result.model_dump(by_alias=True, exclude_none=True, mode="json")
        if body.get("isError"):
            text = " ".join(c.get("text", "") for c in body.get("content", []) if isinstance(c, dict))
            return rpc_error(JsonRpcCode.INTERNAL_ERROR, text or f"tool {name} failed", req.id)
        # The reference's client returns `result["data"]` when present: the tool's own return value, which
        # the SDK wraps as `{"result": value}` when it is not an object.
        structured = body.get("structuredContent")
        if isinstance(structured, dict):
            body["data"] = structured["result"] if set(structured) == {"result"} else structured
        return _result(body, req.id)


def _first_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "request"
    return f"{where}: {first['msg']}"
