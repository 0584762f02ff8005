"""The prompt planner: which ids a request's prompt is, before anyone answers it.

Pure (no loop, no I/O): given the session's trajectory so far and a request, it finds the earlier turn
the request extends and builds the prompt as that turn's prompt + its exact sampled completion ids + the
rendered ids of the new messages only. A request that extends nothing (the first, or a history the
harness rewrote) is rendered whole, and a rewrite is flagged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from openenv.capture.canonical import CanonicalRequest
from openenv.capture.renderer import Renderer
from openenv.capture.trajectory import Link, Trajectory

__all__ = ["Plan", "PromptPlanner"]


@dataclass(slots=True)
class Plan:
    """A request rendered and linked, before anyone answers it.

    Attributes:
        prompt_ids: the exact prompt (often a read-only `TokenIds`).
        link: the earlier turn it extends (None: a new sequence).
        env_ids: the ids between that turn's completion and this prompt's end (tool results, new messages).
        text: the prompt's text, kept where the renderer cannot extend by ids alone ("" otherwise).
        rewritten: the harness rewrote a history that had model turns (a sequence break).
    """

    prompt_ids: Sequence[int]
    link: Link | None = None
    env_ids: Sequence[int] = ()
    text: str = ""
    rewritten: bool = False


class PromptPlanner:
    """Plans prompts with one model's renderer (chat template and tokenizer)."""

    def __init__(self, renderer: Renderer) -> None:
        self.renderer = renderer

    def plan(self, req: CanonicalRequest, trajectory: Trajectory, *, aux: bool) -> Plan:
        """The prompt for `req` after `trajectory`'s turns. An aux request is never linked (it is kept out
        of the sequences)."""
        r = self.renderer
        link = None if aux else trajectory.find_parent(req.messages, req.tools)
        if link is not None:
            text, env_ids = self._env_ids(req, link)
            if env_ids is not None:
                return Plan(trajectory.prefix_ids(link, then=env_ids), link, env_ids, text)
        text, ids = r.full_prompt(req.messages, req.tools)
        return Plan(ids, text="" if r.append_only else text, rewritten=not aux and trajectory.has_model_turns)

    def _env_ids(self, req: CanonicalRequest, link: Link) -> tuple[str, Sequence[int] | None]:
        """(prompt text, ids between the linked completion and this turn's); None ids on a rewrite."""
        r = self.renderer
        assert link.turn.completion is not None
        bridge = r.bridge_text(link.turn.completion.token_ids)
        if r.append_only:
            return "", r.suffix_ids(bridge, req.messages[link.n_messages :])
        full = r.full_text(req.messages, req.tools)
        suffix = r.extend_text(full, link.sequence.text[: link.turn.text_len])
        return full, None if suffix is None else tuple(r.encode(bridge + suffix))
