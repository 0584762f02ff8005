"""Pulling task images: `[environment].docker_image` (or a Dockerfile's FROM) fetched by the Docker engine.

The pull goes through the engine (the Docker SDK's `/images/create`), so the engine's and the Docker
CLI's registry setup applies as it does to `docker pull`: credentials from `docker login` (the SDK reads
`$DOCKER_CONFIG/config.json`, credential helpers included), mirrors, insecure-registry settings.

When to pull is a policy, as Docker's `--pull`: `missing` (the default, as Docker's) pulls an image the
engine lacks; `always` asks the registry again once per process and reference, so a long run sees one
version of a moving tag; `never` is for offline use and refuses a missing image with the ways out. A
pinned digest (`repo@sha256:...`) is immutable: present means current, under every policy. Concurrent
episodes share one pull (`once.py`), and every image a pull brought in is recorded in `pulled.py`'s
ledger so it is garbage-collected when no live run uses it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import docker
import docker.errors

from openenv.errors import EnvError
from openenv.harness.sandbox import pulled
from openenv.harness.sandbox.once import once
from openenv.harness.sandbox.pull_policy import PULL_ENV, PullPolicy

__all__ = [
    "PullProgress",
    "ensure_image",
    "has_image",
    "pull_image",
    "split_reference",
]

Progress = Callable[[str], None]
_asked_this_process: set[str] = set()  # `always`: references re-checked with the registry by this process
_asked = threading.Lock()


def split_reference(reference: str) -> tuple[str, str]:
    """`host:port/x/y:1` -> (`host:port/x/y`, `1`); `x@sha256:..` (a tag beside it ignored, as Docker
    does) -> (`x`, `sha256:..`); no tag -> `latest`."""
    name, at, digest = reference.partition("@")
    slash = name.rfind("/")
    colon = name.rfind(":")
    tag = name[colon + 1 :] if colon > slash else ""
    repository = name[:colon] if colon > slash else name
    return repository, (digest if at else tag or "latest")


def has_image(client: docker.DockerClient, reference: str) -> bool:
    """Whether the engine holds `reference` (a tag, a digest reference or an image id)."""
    try:
        client.images.get(reference)
        return True
    except docker.errors.ImageNotFound:
        return False


class PullProgress:
    """Turns the engine's pull stream into a line every `every_s` seconds: layers done, bytes fetched."""

    def __init__(self, reference: str, progress: Progress, *, every_s: float = 2.0) -> None:
        self.reference = reference
        self.progress = progress
        self.every_s = every_s
        self.digest: str | None = None
        self._layers: dict[str, tuple[int, int]] = {}  # id -> (bytes fetched, bytes in all)
        self._done: set[str] = set()
        self._started = time.monotonic()
        self._said = self._started

    def feed(self, chunk: Mapping[str, Any]) -> None:
        """Take one decoded stream message (`{"status", "id", "progressDetail"}`)."""
        status = str(chunk.get("status", ""))
        layer = str(chunk.get("id", ""))
        detail = chunk.get("progressDetail") or {}
        if status.startswith("Digest: "):
            self.digest = status.removeprefix("Digest: ").strip()
        elif status == "Downloading" and layer and detail.get("total"):
            self._layers[layer] = (int(detail.get("current", 0)), int(detail["total"]))
        elif status in ("Pulling fs layer", "Waiting") and layer:
            self._layers.setdefault(layer, (0, 0))
        elif status in ("Pull complete", "Already exists") and layer:
            self._done.add(layer)
            self._layers.setdefault(layer, (0, 0))
        now = time.monotonic()
        if now - self._said >= self.every_s:
            self._said = now
            self.progress(self.line())

    def line(self) -> str:
        fetched = sum(current for current, _ in self._layers.values()) / 1e6
        total = sum(size for _, size in self._layers.values()) / 1e6
        return (
            f"pulling {self.reference}: {len(self._done)} of {len(self._layers)} layers done, "
            f"{fetched:.1f} of {total:.1f} MB fetched, {time.monotonic() - self._started:.0f} s"
        )


def pull_image(client: docker.DockerClient, reference: str, *, progress: Progress = print) -> str | None:
    """Pull `reference` through the engine (its credentials apply), reporting progress; returns the digest.

    Raises:
        EnvError: the registry or the engine refused; the message names the image and their answer.
    """
    repository, tag = split_reference(reference)
    watch = PullProgress(reference, progress)
    progress(f"pulling {reference}")
    try:
        for chunk in client.api.pull(repository, tag=tag, stream=True, decode=True):
            if "error" in chunk:
                raise EnvError(
                    f"pulling image {reference} failed: {str(chunk['error']).strip()}", image=reference
                )
            watch.feed(chunk)
    except docker.errors.APIError as exc:
        raise EnvError(
            f"pulling image {reference} failed: {exc.explanation or exc}", image=reference
        ) from exc
    except docker.errors.DockerException as exc:
        raise EnvError(f"pulling image {reference} failed: {exc}", image=reference) from exc
    if not has_image(client, reference):
        raise EnvError(
            f"pulling image {reference} finished, but the engine does not hold it", image=reference
        )
    progress(f"pulled {reference}" + (f" ({watch.digest})" if watch.digest else ""))
    return watch.digest


def ensure_image(
    client: docker.DockerClient,
    reference: str,
    *,
    policy: PullPolicy,
    progress: Progress = print,
    offline_ways: Iterable[str] = (),
) -> str | None:
    """Make sure the engine holds `reference` under `policy`, pulling it at most once among concurrent callers.

    Returns:
        A note for the episode when this call (or the one it waited on) pulled, else None.

    Raises:
        EnvError: `never` and the image is missing (the message names it and `offline_ways`), or the
            pull failed (each concurrent caller gets the same reason).
    """
    pinned = "@" in reference
    pulled.claim(reference)  # before looking: a collector must not remove what this run is about to use
    present = has_image(client, reference)
    if policy == "never":
        if present:
            return None
        ways = "; ".join(
            ["allow pulls: --pull missing (OPENENV_PULL=missing)", f"docker pull {reference}", *offline_ways]
        )
        raise EnvError(
            f"image {reference} is not in the Docker engine and pulling is off (--pull never / "
            f"{PULL_ENV}=never). Ways out: {ways}",
            image=reference,
        )
    if present and (policy == "missing" or pinned or reference in _asked_this_process):
        # Claimed again now that it is there: another process may have pulled it since the claim above,
        # and entered it in the ledger before pulling (below), so this user is counted and not collected.
        pulled.claim(reference)
        return None

    def work() -> str | None:
        with _asked:
            asked = reference in _asked_this_process
        if has_image(client, reference) and (policy == "missing" or pinned or asked):
            return None  # another thread or process pulled it while this one waited
        before = has_image(client, reference)
        if not before:  # in the ledger before the pull: whoever finds the image present after it claims it
            pulled.pending(reference)
        try:
            digest = pull_image(client, reference, progress=progress)
        except BaseException:
            if not before:
                pulled.forget(reference)
            raise
        with _asked:
            _asked_this_process.add(reference)
        if not before:
            pulled.record(client, reference)  # the pending entry completed: the image's id and size
        return f"image {reference} pulled" + (f" ({digest})" if digest else "")

    note = once(f"docker-pull:{reference}", work, on_wait=progress)
    pulled.claim(reference)  # a waiter uses what another process pulled: it is a user of it too
    return note
