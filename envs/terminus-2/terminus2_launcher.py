"""Run Harbor's Terminus-2 agent headless on one instruction, in the sandbox this script runs in.

Terminus-2 has no CLI: Harbor drives it against a `BaseEnvironment` (normally a container it execs into).
openenv runs harnesses inside its own sandbox, so this launcher hands Terminus-2 the smallest environment
it calls: `exec` runs a shell command right here (its tmux session included), files are local paths.
The agent itself, its prompt, JSON parser, tmux keystrokes and litellm client are Harbor's, unmodified.

The tmux server gets a socket folder of its own (TMUX_TMPDIR) and is killed when the run ends, so the
episode leaves nothing running. Usage (what envs/terminus-2/spec.yaml starts):

    python terminus2_launcher.py --instruction TEXT --model openai/NAME --api-base URL/v1 --logs DIR
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from harbor.agents.terminus_2 import Terminus2
from harbor.environments.base import ExecResult
from harbor.models.agent.context import AgentContext


class HereEnvironment:
    """The part of harbor's BaseEnvironment that Terminus-2 and its TmuxSession use, run in place."""

    def __init__(self, logs: Path) -> None:
        self.session_id = "openenv"
        self.default_user = None
        self.trial_paths = SimpleNamespace(agent_dir=logs)

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: float | None = None,
        user: str | int | None = None,
        **_: object,
    ) -> ExecResult:
        # `user` is ignored: the whole sandbox already runs as one user.
        proc = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            command,
            cwd=cwd,
            env={**os.environ, **(env or {})},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout=timeout_sec)
        except TimeoutError:
            proc.kill()
            out, err = await proc.communicate()
            return ExecResult(
                stdout=out.decode(errors="replace"), stderr=err.decode(errors="replace"), return_code=124
            )
        return ExecResult(
            stdout=out.decode(errors="replace"),
            stderr=err.decode(errors="replace"),
            return_code=proc.returncode if proc.returncode is not None else -1,
        )

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        Path(target_path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source_path, target_path)

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        Path(target_path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source_path, target_path)

    async def is_dir(self, path: str, **_: object) -> bool:
        return Path(path).is_dir()

    async def is_file(self, path: str, **_: object) -> bool:
        return Path(path).is_file()


async def run(args: argparse.Namespace) -> int:
    logs = Path(args.logs)
    logs.mkdir(parents=True, exist_ok=True)
    agent = Terminus2(
        logs_dir=logs,
        model_name=args.model,
        api_base=args.api_base,
        max_turns=args.max_turns,
        record_terminal_session=False,
        enable_summarize=False,
        model_info={
            "max_input_tokens": args.context,
            "max_output_tokens": args.max_tokens,
            "input_cost_per_token": 0.0,
            "output_cost_per_token": 0.0,
        },
    )
    env = HereEnvironment(logs)
    await agent.setup(env)
    await agent.run(args.instruction, env, AgentContext())
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instruction", required=True)
    parser.add_argument("--model", required=True, help="a litellm model route, e.g. openai/NAME")
    parser.add_argument("--api-base", required=True)
    parser.add_argument("--logs", required=True, help="where Terminus-2 writes its trajectory")
    parser.add_argument("--max-turns", type=int, default=50)
    parser.add_argument("--context", type=int, default=131072)
    parser.add_argument("--max-tokens", type=int, default=2048)
    args = parser.parse_args()
    tmux_dir = Path(args.logs) / "tmux"
    tmux_dir.mkdir(parents=True, exist_ok=True)
    os.environ["TMUX_TMPDIR"] = str(tmux_dir)
    try:
        return asyncio.run(run(args))
    finally:
        subprocess.run(["tmux", "kill-server"], check=False, capture_output=True)


if __name__ == "__main__":
    sys.exit(main())
