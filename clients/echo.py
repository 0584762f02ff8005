"""Drive the echo env with its typed client: `python clients/echo.py [--url URL] [--steps N]`.

Without `--url` the env is served in-process (AutoEnv); with it, the client talks to a running server
(`openenv serve echo --port 8765`, `python server/app.py` or the Docker image).
"""

from __future__ import annotations

import argparse
import asyncio

from echo_env import EchoAction, EchoClient
from openenv.auto import AutoEnv

__all__ = ["EchoClient", "main"]


async def run_episode(client: EchoClient, steps: int) -> float:
    obs = await client.reset(seed=0, max_steps=steps)
    total = 0.0
    for i in range(steps):
        obs = await client.step(EchoAction(message=f"hello {i}"))
        total += obs.reward or 0.0
        print(f"step {i + 1}: echoed={obs.echoed_message!r} reward={obs.reward:.1f} done={obs.done}")
    state = await client.state()
    print(f"episode {state.episode_id}: {state.step_count} steps, return {total:.1f}")
    return total


async def main(url: str | None, steps: int) -> None:
    client = EchoClient.from_url(url) if url else AutoEnv.from_env("echo")
    async with client:
        await run_episode(client, steps)  # type: ignore[arg-type]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="env server base URL, e.g. http://127.0.0.1:8765")
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.url, args.steps))
