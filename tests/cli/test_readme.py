"""The install lines are true: docs/install.md's wheel section's commands run here, with only the extras it
installs, to a scored episode; every `pip install` line it prints names real extras; the README's harness
table lists every harness under its dialect.

The `pip`/`sudo` lines are not run (they install packages; this machine has them): the test instead makes
every package of the extras the section does *not* install unimportable (tests/cli/test_errors.py's
import hook), then runs each `openenv` line of the block as written.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest

from openenv.extras import DISTRIBUTION, EXTRAS, install_hint
from openenv.harness.catalog import get_spec, harness_names
from openenv.harness.install import install_status
from tests.cli.test_errors import _openenv

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()
INSTALL = (REPO / "docs" / "install.md").read_text()


def _section(title: str) -> str:
    start = INSTALL.index(f"## {title}\n")
    end = INSTALL.find("\n## ", start + 1)
    return INSTALL[start : end if end != -1 else None]


def _bash_blocks(text: str) -> list[list[str]]:
    return [
        [line.split("  #")[0].strip() for line in block.strip().splitlines()]
        for block in re.findall(r"```bash\n(.*?)```", text, re.S)
    ]


def test_every_pip_line_names_extras_the_distribution_has() -> None:
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(EXTRAS) <= set(declared), "openenv/extras.py names an extra pyproject.toml does not declare"
    named = re.findall(rf"pip install '?{re.escape(DISTRIBUTION)}\[([a-z,]+)\]", README + INSTALL)
    assert named, "docs/install.md names no extra"
    for extras in named:
        assert set(extras.split(",")) <= set(declared), extras


DIALECTS = {
    "Anthropic Messages": "anthropic",
    "OpenAI Responses": "openai_responses",
    "Gemini": "gemini",
    "OpenAI Chat": "openai_chat",
}


def test_the_readme_lists_every_harness_under_its_dialect() -> None:
    """Its first lines once named 10 harnesses while 19 ran."""
    table = re.findall(r"^\| ([A-Za-z ]+) \| ([a-z0-9, -]+) \|$", README, re.M)
    listed = {
        name: DIALECTS[dialect]
        for dialect, names in table
        if dialect in DIALECTS
        for name in names.split(", ")
    }
    assert listed == {name: get_spec(name).dialect for name in harness_names()}
    counted = re.search(r"Claude Code, Codex, Pi and (\d+) more", " ".join(README.split()))
    assert counted and int(counted.group(1)) == len(harness_names()) - 3


def test_every_name_the_readme_imports_exists() -> None:
    """A renamed class or module breaks the README's snippets before anyone runs them."""
    import ast
    import importlib

    imported = [
        (node.module, alias.name)
        for block in re.findall(r"```python\n(.*?)```", README, re.S)
        for node in ast.walk(ast.parse(block))
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    ]
    assert len(imported) >= 5, imported
    missing = [
        f"{module}.{name}" for module, name in imported if not hasattr(importlib.import_module(module), name)
    ]
    assert missing == []


@pytest.mark.slow
def test_the_wheel_sections_commands_run_to_a_scored_episode(tmp_path: Path) -> None:
    [block] = _bash_blocks(_section("Installing from a wheel"))
    installs, commands = (
        [c for c in block if c.startswith(("pip ", "sudo "))],
        [c for c in block if c.startswith("openenv ")],
    )
    assert installs[0] == install_hint("capture") and len(installs) + len(commands) == len(block), block
    if not install_status(get_spec("pi")).ready:
        pytest.skip("pi is not installed; run scripts/install_harnesses.sh pi")
    # huggingface_hub is in `ecosystem`, and also a dependency of transformers: a capture install has it.
    absent = tuple(
        sorted(
            {m for extra, mods in EXTRAS.items() if extra != "capture" for m in mods}
            - set(EXTRAS["capture"])
            - {"huggingface_hub"}
        )
    )
    for command in commands:
        args = shlex.split(command)[1:]
        if args[0] == "run":
            args += ["--out", str(tmp_path / "episode.jsonl")]
        proc = _openenv(*args, without=absent, timeout=900)
        assert proc.returncode == 0, f"{command}\n{proc.stderr[-3000:]}"
    assert "reward: 1" in proc.stdout and "status: exited" in proc.stdout, proc.stdout


@pytest.mark.slow
@pytest.mark.extended  # 30 s to 2 min; every commit imports its names (test_every_name_the_readme_imports_exists)
def test_the_readme_python_loop_runs_an_episode_and_prints_its_rows(tmp_path: Path) -> None:
    """The README's first Python block, as a newcomer pastes it: one pi episode, its reward, and rows whose
    completion, logprobs and env_mask line up token for token."""
    import subprocess
    import sys

    if not install_status(get_spec("pi")).ready:
        pytest.skip("pi is not installed; run scripts/install_harnesses.sh pi")
    [loop, _trl] = re.findall(r"```python\n(.*?)```", README, re.S)
    done = subprocess.run(
        [sys.executable, "-c", loop], cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("reward ") and len(lines) >= 2, done.stdout
    for row in lines[1:]:
        prompt, completion, logprobs, trained = map(int, row.split())
        assert prompt > 0 and completion == logprobs >= trained > 0, row
