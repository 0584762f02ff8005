"""openenv as a user gets it from `pip install`: the wheel, in a fresh virtualenv outside the repository.

The virtualenv is new (`python -m venv`, no pip) and gets the wheel with `pip --python VENV install
--no-deps`. The heavy dependencies (torch, transformers, ...) are not installed again: a `.pth` line adds
the repo virtualenv's site-packages *after* the venv's own, as plain path entries (its `.pth` files, the
editable install's import hook among them, are not run). So `openenv` and `echo_env` come from the
wheel, and every command runs with the working directory, HOME and caches outside the repository.
The tiny model is built by the wheel's own `openenv.models` into the fresh cache.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from openenv.core.net import free_port, wait_for_health
from openenv.errors import TransportError
from openenv.harness.catalog import get_spec, harness_names
from openenv.harness.install import install_status
from openenv.harness.tasks import builtin_task_ids

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
TASK = "fix-temperature-conversion"


@dataclass(frozen=True)
class WheelEnv:
    venv: Path
    home: Path
    wheel: Path

    @property
    def python(self) -> str:
        return str(self.venv / "bin" / "python")

    @property
    def openenv(self) -> str:
        return str(self.venv / "bin" / "openenv")

    def env(self) -> dict[str, str]:
        drop = ("PYTHONPATH", "OPENENV_TINY_MODEL", "OPENENV_ENVS_PATH", "VIRTUAL_ENV")
        env = {k: v for k, v in os.environ.items() if k not in drop}
        return {**env, "HOME": str(self.home), "XDG_CACHE_HOME": str(self.home / ".cache"),
                "PATH": f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"}

    def run(self, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(argv, cwd=self.home, env=self.env(), capture_output=True, text=True,
                              timeout=timeout, check=False)
        assert proc.returncode == 0, f"{argv} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        return proc


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory: pytest.TempPathFactory) -> WheelEnv:
    root = tmp_path_factory.mktemp("wheel")
    src, dist, venv, home = root / "src", root / "dist", root / "venv", root / "home"
    home.mkdir()
    # Build from a copy of the files git would commit: setuptools builds in-tree, and a stale build/ in
    # the checkout would carry deleted files into the wheel.
    listed = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=REPO, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        source, target = REPO / rel, src / rel
        if not source.is_symlink() and not source.is_file():
            continue  # deleted in the working tree, not yet committed
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, target)
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(dist), str(src)], check=True, capture_output=True, text=True, cwd=root, env=clean)
    (wheel,) = dist.glob("openenv-*.whl")
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", str(venv)],
                   check=True)
    purelib = subprocess.run([str(venv / "bin" / "python"), "-c",
                              "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    (Path(purelib) / "zz_repo_venv_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
                    "--no-deps", "--force-reinstall", "-q", str(wheel)], check=True, capture_output=True, text=True,
                   cwd=root, env=clean)
    return WheelEnv(venv, home, wheel)


def test_the_wheel_is_what_runs_and_it_carries_specs_tasks_and_the_installer(wheel_env: WheelEnv) -> None:
    out = wheel_env.run(wheel_env.python, "-c", textwrap.dedent("""
        import json, openenv, echo_env
        from openenv.resources import harness_installer, shipped_envs_dir, builtin_tasks_dir
        print(json.dumps([openenv.__file__, echo_env.__file__, str(shipped_envs_dir()),
                          str(builtin_tasks_dir()), harness_installer().is_file()]))
    """)).stdout
    package, echo, envs, tasks, installer = json.loads(out)
    site = str(wheel_env.venv)
    assert package.startswith(site) and echo.startswith(site) and envs.startswith(site) and tasks.startswith(site)
    assert installer is True


def test_harness_list_and_tasks_from_the_wheel(wheel_env: WheelEnv) -> None:
    listed = wheel_env.run(wheel_env.openenv, "harness", "list").stdout
    assert all(name in listed for name in harness_names())
    tasks = wheel_env.run(wheel_env.openenv, "tasks").stdout
    assert all(task in tasks for task in builtin_task_ids())


def _require(name: str) -> None:
    status = install_status(get_spec(name))
    if not status.ready:
        pytest.skip(f"{name} {status.pinned} is not installed; run scripts/install_harnesses.sh {name}")


def test_an_oracle_episode_of_pi_from_the_wheel_scores_one(wheel_env: WheelEnv) -> None:
    _require("pi")
    out = wheel_env.run(wheel_env.openenv, "run", "--harness", "pi", "--task", TASK, "--policy", "oracle",
                        "--json", timeout=600).stdout
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["reward"] == 1.0 and summary["turns"] >= 2 and summary["merge_ratio"] == 1.0
    # the wheel's own builder made the tiny model in the fresh cache
    assert (wheel_env.home / ".cache" / "openenv" / "tiny-model" / "config.json").is_file()


def test_autoenv_from_env_pi_plays_an_oracle_episode(wheel_env: WheelEnv) -> None:
    _require("pi")
    out = wheel_env.run(wheel_env.python, "-c", textwrap.dedent(f"""
        import json
        from openenv import AutoEnv
        from openenv.harness.catalog import get_spec
        from openenv.harness.oracle import OraclePolicy
        from openenv.harness.tasks import builtin_task

        oracle = OraclePolicy(get_spec("pi"), builtin_task("{TASK}"))
        with AutoEnv.from_env("pi").sync() as env:
            obs = env.reset(task="{TASK}")
            first = len(obs.pending.prompt_ids)
            while not obs.done:
                obs = env.step({{"kind": "complete", "text": oracle.reply(obs.pending.request)}})
            print(json.dumps({{"first_prompt_ids": first, "reward": obs.reward, "turns": obs.turns,
                              "sequences": len(obs.sequences), "task": env.state().task_id}}))
    """), timeout=300).stdout
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["first_prompt_ids"] > 100 and seen["task"] == TASK
    assert seen["reward"] == 1.0 and seen["turns"] >= 2 and seen["sequences"] == 1


@pytest.fixture
def served_pi(wheel_env: WheelEnv) -> Iterator[tuple[str, str]]:
    port, token = free_port(), secrets.token_urlsafe(16)
    proc = subprocess.Popen([wheel_env.openenv, "serve", "pi", "--port", str(port)], cwd=wheel_env.home,
                            env={**wheel_env.env(), "OPENENV_TOKEN": token}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_for_health(url, timeout_s=60, gone=lambda: None if proc.poll() is None else "it exited")
        except TransportError as exc:
            pytest.fail(f"openenv serve pi: {exc}\n{proc.stderr.read() if proc.poll() is not None else ''}")
        yield url, token
    finally:
        proc.terminate()
        proc.wait(timeout=20)


async def test_openenv_serve_pi_from_the_wheel_lists_its_tools_over_mcp(served_pi: tuple[str, str]) -> None:
    from openenv.client.mcp import connect_mcp  # the official mcp SDK client, with the bearer token

    url, token = served_pi
    async with connect_mcp(url, token=token) as client:
        tools = await client.list_tools()
        harnesses: Any = await client.call_tool("list_harnesses", {})
        tasks: Any = await client.call_tool("list_tasks", {})
    assert sorted(t.name for t in tools.tools) == ["get_trajectory", "list_harnesses", "list_tasks", "run_episode"]
    assert {h["name"] for h in harnesses.structured_content["result"]} == set(harness_names())
    assert [t["id"] for t in tasks.structured_content["result"]] == builtin_task_ids()
