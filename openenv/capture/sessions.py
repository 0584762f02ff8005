"""The session table: what every session shares (renderer, backend, parser) and the token lookup."""

from __future__ import annotations

import asyncio
import secrets

from openenv.capture.backends.base import Backend
from openenv.capture.canonical import SamplingParams
from openenv.capture.parsers import detect_parser, get_parser
from openenv.capture.renderer import Renderer
from openenv.capture.session import AuxPredicate, Mode, Session
from openenv.errors import CapacityError, UnknownSession

__all__ = ["SessionManager"]


class SessionManager:
    """Opens, finds and closes sessions. Call its methods on the server's event loop.

    Args:
        renderer: the model's chat template and tokenizer.
        backend: what samples and scores.
        parser: the registered completion parser name (`hermes`, ...), or `auto` to pick it from the
            chat template (`detect_parser`; hermes when nothing matches).
        served_model: the model name listed by `/v1/models`.
        sampling: proxy-wide sampling settings that override every harness's.
        max_sessions: how many sessions may be open at once.
    """

    def __init__(self, *, renderer: Renderer, backend: Backend, parser: str = "hermes",
                 served_model: str = "tiny", sampling: SamplingParams | None = None,
                 max_sessions: int = 4096) -> None:
        self.renderer = renderer
        self.backend = backend
        if parser == "auto":  # the chat template shows how the model was taught to write tool calls
            parser = detect_parser(renderer.tokenizer.get_chat_template(None, [{}])) or "hermes"
        self.parser = get_parser(parser)
        self.served_model = served_model
        self.sampling = sampling
        self.max_sessions = max_sessions
        self.sessions: dict[str, Session] = {}
        self._bound: dict[str, Backend] = {}

    def open(self, *, base_url: str, mode: Mode = "auto", sampling: SamplingParams | None = None,
             aux: AuxPredicate | None = None, gate_aux: bool = False, token: str | None = None) -> Session:
        """A new session whose harness-facing base URL is `{base_url}/s/{token}`.

        Raises:
            CapacityError: `max_sessions` are already open.
        """
        if len(self.sessions) >= self.max_sessions:
            raise CapacityError(len(self.sessions), self.max_sessions)
        token = token or secrets.token_urlsafe(18)
        merged = self.sampling.merged(sampling) if self.sampling is not None else sampling
        # A backend over several engines (VLLMEngines) gives each session its own view, pinned to one engine.
        bind = getattr(self.backend, "bind", None)
        backend = bind(token) if bind is not None else self.backend
        self._bound[token] = backend
        session = Session(token=token, base_url=f"{base_url.rstrip('/')}/s/{token}",
                          loop=asyncio.get_running_loop(), renderer=self.renderer, backend=backend,
                          parser=self.parser, mode=mode, sampling=merged, aux=aux, gate_aux=gate_aux,
                          served_model=self.served_model)
        self.sessions[token] = session
        return session

    def get(self, token: str | None) -> Session:
        """The live session for `token`.

        Raises:
            UnknownSession: no live session has this token (401 in the harness's dialect).
        """
        session = self.sessions.get(token or "")
        if session is None:
            shown = f"{token[:6]}..." if token else "none given"
            raise UnknownSession(f"unknown session token ({shown}); open a session with POST /sessions "
                                 "and point the harness at its base_url")
        return session

    def close(self, token: str) -> Session:
        """Close a session: parked requests get an error, later requests get 401."""
        session = self.get(token)
        del self.sessions[token]
        release = getattr(self._bound.pop(token, None), "release", None)
        if release is not None:
            release()
        session.fail_all(UnknownSession("the session was closed while this request was waiting"))
        return session
