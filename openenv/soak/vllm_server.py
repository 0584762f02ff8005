"""Start and stop a real vLLM (CPU build) OpenAI-compatible server on a free loopback port.

Used by the test suite (one server per session), benchmarks and the `openenv` commands that start an
engine. `python -m openenv.soak.vllm_server MODEL --url-file FILE` serves one until it is stopped
(scripts/test.sh shares one between its two pytest runs). The flags are the ones measured to work with the tiny float32 model on this CPU, plus
`--logprobs-mode processed_logprobs`: a sampled token's logprob is then `log_softmax(logits / temperature)`,
the one it was sampled with and the one a trainer recomputes (`capture/logprob_mode.py`).
"""

from __future__ import annotations

import argparse
import atexit
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Self

from openenv.core.guard import die_with_parent, guarded
from openenv.core.net import free_port, wait_for_health
from openenv.errors import TransportError

__all__ = ["VLLMServer", "main"]


class VLLMServer:
    """A vLLM server subprocess in its own process group, killed as a group on stop, and with this
    process if it dies first (`openenv.core.guard`)."""

    def __init__(
        self,
        model: str | Path,
        *,
        port: int | None = None,
        kv_cache_bytes: int = 1024 * 1024 * 1024,
        max_model_len: int | None = None,
        extra_args: list[str] | None = None,
        python: str | None = None,
        logprobs_mode: str = "processed_logprobs",
    ) -> None:
        self.model = str(model)
        self.port = port or free_port()
        self.kv_cache_bytes = kv_cache_bytes
        self.max_model_len = max_model_len
        self.extra_args = list(extra_args or [])
        self.python = python or sys.executable
        # `raw_logprobs` (vLLM's default) only to measure or test what training must refuse.
        self.logprobs_mode = logprobs_mode
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = Path(tempfile.mkstemp(prefix="vllm-", suffix=".log")[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        cmd = [
            self.python,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            self.model,
            "--served-model-name",
            "tiny",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--dtype",
            "float32",
            "--enforce-eager",
            "--kv-cache-memory-bytes",
            str(self.kv_cache_bytes),
            "--enable-auto-tool-choice",
            "--tool-call-parser",
            "hermes",
            "--disable-log-stats",
            "--logprobs-mode",
            self.logprobs_mode,
        ]
        if self.max_model_len:
            cmd += ["--max-model-len", str(self.max_model_len)]
        return cmd + self.extra_args

    def start(self, timeout: float = 240.0) -> Self:
        """Launch the server and wait until it answers `/health`."""
        return self.launch().wait_ready(timeout)

    def environment(self) -> dict[str, str]:
        """The server's environment: this process's, on the CPU platform, offline, without usage stats.

        `VLLM_CPU_KVCACHE_SPACE` is dropped: vLLM's CPU platform lets that legacy variable (whole GiB)
        replace `--kv-cache-memory-bytes`, so while it was set here (to 1) `kv_cache_bytes` was ignored
        and every server got 1 GiB whatever it asked for."""
        env = dict(os.environ)
        env.pop("VLLM_CPU_KVCACHE_SPACE", None)
        env.setdefault("VLLM_TARGET_DEVICE", "cpu")
        env.setdefault("VLLM_NO_USAGE_STATS", "1")
        env.setdefault("DO_NOT_TRACK", "1")
        env.setdefault("HF_HUB_OFFLINE", "1")
        env.setdefault("TRANSFORMERS_OFFLINE", "1")
        return env

    def launch(self) -> Self:
        """Start the process and return at once (`wait_ready` waits for it): a caller can do other work
        while vLLM spends its ~30 s importing and loading."""
        env = self.environment()
        log = self.log_path.open("wb")
        # Its own process group, led by a guard that stops the group when this process dies in any way
        # (pytest-timeout's os._exit, SIGKILL): an orphaned vLLM holds 1.8 GB. atexit covers a normal exit
        # that skipped the fixture's teardown.
        self.proc = subprocess.Popen(
            guarded(self.command(), python=sys.executable),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        atexit.register(self.stop)
        return self

    def wait_ready(self, timeout: float = 240.0) -> Self:
        """Wait until the launched server answers `/health`.

        Raises:
            RuntimeError: the process exited (its log's tail is in the message).
            TimeoutError: not healthy within `timeout` (the server is stopped).
        """
        proc = self.proc
        assert proc is not None, "launch() the server first"
        try:
            wait_for_health(
                self.base_url,
                timeout_s=timeout,
                interval_s=0.5,
                gone=lambda: None if proc.poll() is None else f"it exited with {proc.returncode}",
            )
        except TransportError:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"vLLM exited with {proc.returncode}; log tail:\n{self.log_tail()}"
                ) from None
            self.stop()
            raise TimeoutError(
                f"vLLM not healthy after {timeout:.0f}s; log tail:\n{self.log_tail()}"
            ) from None
        return self

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        atexit.unregister(self.stop)
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """Start a server, write its base URL to `--url-file` (or `error: ...` if it did not start), and serve
    until SIGTERM, SIGINT or the death of the process that started this one."""
    parser = argparse.ArgumentParser(prog="python -m openenv.soak.vllm_server", description=main.__doc__)
    parser.add_argument("model", help="the model folder (e.g. .cache/tiny-model)")
    parser.add_argument("--url-file", type=Path, required=True, help="where the base URL is written")
    parser.add_argument("--logprobs-mode", default="processed_logprobs")
    args = parser.parse_args(argv)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    die_with_parent()

    def say(text: str) -> None:
        partial = args.url_file.with_name(args.url_file.name + ".partial")
        partial.write_text(text + "\n")
        partial.replace(args.url_file)  # readers see all of it or nothing

    server = VLLMServer(args.model, logprobs_mode=args.logprobs_mode)
    try:
        server.start()
    except (RuntimeError, TimeoutError) as exc:
        say(f"error: {str(exc).splitlines()[0]} (log: {server.log_path})")
        return 1
    try:
        say(server.base_url)
        stop.wait()
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
