"""openenv as a user gets it from `pip install`: the wheel, in a fresh virtualenv outside the repository.

The virtualenv is new (`python -m venv`, no pip) and gets the wheel with `pip --python VENV install
--no-deps`. The heavy dependencies (torch, transformers, ...) are not installed again: a `.pth` line adds
the repo virtualenv's site-packages *after* the venv's own, as plain path entries (its `.pth` files, the
editable install's import hook among them, are not run). So `openenv` and `echo_env` come from the
wheel, and every command runs with the working directory, HOME and caches outside the repository.
The tiny model is built by the wheel's own `openenv.models` into the fresh cache.

Two tests use venvs of their own instead: docs/install.md's install line, run as written in a venv that has
only pip (the wheel is found through PIP_FIND_LINKS, its dependencies through pip's usual index and
cache), and the clash with Hugging Face's OpenEnv (`openenv==0.10.0`, import name `openenv` too)
installed over ours and under it.
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
from openenv.distribution import NAME
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
        return {
            **env,
            "HOME": str(self.home),
            "XDG_CACHE_HOME": str(self.home / ".cache"),
            "PATH": f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        }

    def run(self, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            argv, cwd=self.home, env=self.env(), capture_output=True, text=True, timeout=timeout, check=False
        )
        assert proc.returncode == 0, (
            f"{argv} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
        return proc


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory: pytest.TempPathFactory) -> WheelEnv:
    root = tmp_path_factory.mktemp("wheel")
    src, dist, venv, home = root / "src", root / "dist", root / "venv", root / "home"
    home.mkdir()
    # Build from a copy of the files git would commit: setuptools builds in-tree, and a stale build/ in
    # the checkout would carry deleted files into the wheel.
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=REPO, check=True, capture_output=True
        )
        .stdout.decode()
        .split("\0")
    )
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
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(dist),
            str(src),
        ],
        check=True,
        capture_output=True,
        text=True,
        cwd=root,
        env=clean,
    )
    (wheel,) = dist.glob("openenv_harness-*.whl")
    subprocess.run(
        [getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", str(venv)],
        check=True,
    )
    purelib = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(purelib) / "zz_repo_venv_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "--no-deps",
            "--force-reinstall",
            "-q",
            str(wheel),
        ],
        check=True,
        capture_output=True,
        text=True,
        cwd=root,
        env=clean,
    )
    return WheelEnv(venv, home, wheel)


def test_the_wheel_is_what_runs_and_it_carries_specs_tasks_and_the_installer(wheel_env: WheelEnv) -> None:
    out = wheel_env.run(
        wheel_env.python,
        "-c",
        textwrap.dedent("""
        import json, openenv, echo_env
        from openenv.resources import harness_installer, shipped_envs_dir, builtin_tasks_dir
        print(json.dumps([openenv.__file__, echo_env.__file__, str(shipped_envs_dir()),
                          str(builtin_tasks_dir()), harness_installer().is_file()]))
    """),
    ).stdout
    package, echo, envs, tasks, installer = json.loads(out)
    site = str(wheel_env.venv)
    assert (
        package.startswith(site)
        and echo.startswith(site)
        and envs.startswith(site)
        and tasks.startswith(site)
    )
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
    out = wheel_env.run(
        wheel_env.openenv,
        "run",
        "--harness",
        "pi",
        "--task",
        TASK,
        "--policy",
        "oracle",
        "--json",
        timeout=600,
    ).stdout
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["reward"] == 1.0 and summary["turns"] >= 2 and summary["merge_ratio"] == 1.0
    # the wheel's own builder made the tiny model in the fresh cache
    assert (wheel_env.home / ".cache" / "openenv" / "tiny-model" / "config.json").is_file()


def test_autoenv_from_env_pi_plays_an_oracle_episode(wheel_env: WheelEnv) -> None:
    _require("pi")
    out = wheel_env.run(
        wheel_env.python,
        "-c",
        textwrap.dedent(f"""
        import json
        from openenv import AutoEnv
        from openenv.harness.catalog import get_spec
        from openenv.harness.oracle import OraclePolicy
        from openenv.harness.tasks import builtin_task

        oracle = OraclePolicy(get_spec("pi"), builtin_task("{TASK}"))
        with AutoEnv.from_env("pi").sync() as env:
            obs = env.reset(task="{TASK}", stage_solution=True)
            first = len(obs.pending.prompt_ids)
            while not obs.done:
                obs = env.step({{"kind": "complete", "text": oracle.reply(obs.pending.request)}})
            print(json.dumps({{"first_prompt_ids": first, "reward": obs.reward, "turns": obs.turns,
                              "sequences": len(obs.sequences), "task": env.state().task_id}}))
    """),
        timeout=300,
    ).stdout
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["first_prompt_ids"] > 100 and seen["task"] == TASK
    assert seen["reward"] == 1.0 and seen["turns"] >= 2 and seen["sequences"] == 1


@pytest.fixture
def served_pi(wheel_env: WheelEnv) -> Iterator[tuple[str, str]]:
    port, token = free_port(), secrets.token_urlsafe(16)
    proc = subprocess.Popen(
        [wheel_env.openenv, "serve", "pi", "--port", str(port)],
        cwd=wheel_env.home,
        env={**wheel_env.env(), "OPENENV_TOKEN": token},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
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
    assert sorted(t.name for t in tools.tools) == [
        "get_trajectory",
        "list_harnesses",
        "list_tasks",
        "run_episode",
    ]
    assert {h["name"] for h in harnesses.structured_content["result"]} == set(harness_names())
    assert [t["id"] for t in tasks.structured_content["result"]] == builtin_task_ids()


def _fenced(markdown: str, heading: str, lang: str) -> str:
    """The first ```lang block under `heading` in `markdown`."""
    section = markdown.split(f"\n{heading}\n", 1)[1]
    return section.split(f"```{lang}\n", 1)[1].split("```", 1)[0]


def _pip_sources(wheel: Path) -> dict[str, str]:
    """Where docs/install.md's `pip install` finds things: the wheel stands in for the index entry (not published
    yet); the dependencies come from the offline wheelhouse scripts/build_python_image.sh downloaded (core
    and proxy dependencies: the same index, fetched once), else from pip's index and cache."""
    cache = subprocess.run(
        [sys.executable, "-m", "pip", "cache", "dir"], check=True, capture_output=True, text=True
    ).stdout.strip()
    sources = {"PIP_CACHE_DIR": cache, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    houses = sorted((REPO / ".cache" / "docker").glob("wheels-*/.complete"), key=lambda p: p.stat().st_mtime)
    if houses:
        return {**sources, "PIP_FIND_LINKS": f"{wheel.parent} {houses[-1].parent}", "PIP_NO_INDEX": "1"}
    return {**sources, "PIP_FIND_LINKS": f"{wheel.parent} /opt/wheels"}


def test_the_readme_install_line_and_its_python_snippet_work_in_a_fresh_venv(
    wheel_env: WheelEnv, tmp_path: Path
) -> None:
    readme = (REPO / "docs" / "install.md").read_text()
    line = next(
        line.split("#", 1)[0].strip()
        for line in _fenced(readme, "## Install as a package", "bash").splitlines()
        if line.startswith("pip install")
    )
    assert line == f"pip install {NAME}", line  # our own name: PyPI's `openenv` is another project
    snippet = _fenced(readme, "## Using an environment from Python", "python")
    venv, home = tmp_path / "venv", tmp_path / "home"
    home.mkdir()
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", str(venv)], check=True)
    drop = ("PYTHONPATH", "OPENENV_TINY_MODEL", "OPENENV_ENVS_PATH", "VIRTUAL_ENV")
    env = {
        **{k: v for k, v in os.environ.items() if k not in drop},
        "HOME": str(home),
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        **_pip_sources(wheel_env.wheel),
    }
    installed = subprocess.run(
        ["bash", "-c", line], cwd=home, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    script = home / "snippet.py"
    script.write_text(snippet + "\nprint(repr(obs.echoed_message), obs.reward, openenv_file)\n")
    script.write_text("import openenv\nopenenv_file = openenv.__file__\n" + script.read_text())
    ran = subprocess.run(
        [str(venv / "bin" / "python"), str(script)],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    message, reward, package = ran.stdout.split()
    assert message == "'hi'" and float(reward) > 0 and package.startswith(str(venv))


@pytest.mark.parametrize("order", ["reference-over-ours", "ours-over-reference"])
def test_a_reference_openenv_beside_ours_fails_the_import_with_one_line_then_the_fix_works(
    wheel_env: WheelEnv, tmp_path: Path, order: str
) -> None:
    """Hugging Face's `openenv==0.10.0` writes into the same `site-packages/openenv/`: whichever came last,
    `import openenv` must refuse the mixed folder with one line (the guard .pth covers their
    `__init__.py`, ours covers the other order), and the command it names must repair the venv."""
    venv = tmp_path / "venv"
    subprocess.run(
        [getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", str(venv)],
        check=True,
    )
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}

    def pip(*args: str) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), *args, "-q"],
            capture_output=True,
            text=True,
            env=clean,
            cwd=tmp_path,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]

    ours, reference = str(wheel_env.wheel), "openenv==0.10.0"
    for requirement in [ours, reference] if order == "reference-over-ours" else [reference, ours]:
        pip("install", "--no-deps", requirement)

    def python(code: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(venv / "bin" / "python"), "-c", code],
            capture_output=True,
            text=True,
            env=clean,
            cwd="/",
            check=False,
        )

    for code in ("import openenv", "import openenv.harness"):
        failed = python(code)
        assert failed.returncode == 1 and failed.stdout == "", failed
        lines = failed.stderr.splitlines()
        assert len(lines) == 1, failed.stderr
        assert lines[0].startswith(f"{NAME}: ") and "openenv 0.10.0" in lines[0]
        assert f"pip uninstall -y openenv {NAME} && pip install {NAME}" in lines[0]
    # the fix it names (the wheel standing in for the index entry) leaves ours alone and whole
    pip("uninstall", "-y", "openenv", NAME)
    pip("install", "--no-deps", ours)
    fixed = python("import openenv, openenv.distribution; print(openenv.__version__, openenv.__file__)")
    assert fixed.returncode == 0, fixed.stderr
    version, package = fixed.stdout.split()
    assert version == "0.1.0" and package.startswith(str(venv))
