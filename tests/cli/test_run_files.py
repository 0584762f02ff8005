"""`openenv run` trajectory files: two runs in the same second keep two files (one overwrote the other)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from openenv.export.log import read_episode
from openenv.harness.summary import EpisodeSummary

FIXTURE = Path(__file__).resolve().parents[1] / "export" / "fixtures" / "pi-oracle.jsonl"


def test_two_runs_in_the_same_second_write_two_trajectory_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import openenv.export.log as log_module
    import openenv.harness.environment as environment
    import openenv.harness.rollout as rollout
    from openenv.cli.harness import _run_one

    recorded = read_episode(FIXTURE)

    class StandInEnv:  # the harness episode itself is not what this tests: its file name and write are
        def __init__(self, *args: Any, **kwargs: Any) -> None: ...

        def trajectory(self) -> list[Any]:
            return recorded.turns

        def close(self) -> None: ...

    def episode(env: Any, task: Any, **kwargs: Any) -> tuple[Any, EpisodeSummary]:
        assert recorded.summary is not None
        fields = {k: v for k, v in recorded.summary.model_dump().items() if k in EpisodeSummary.model_fields}
        return SimpleNamespace(sequences=recorded.sequences), EpisodeSummary.model_validate(fields)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(environment, "HarnessEnvironment", StandInEnv)
    monkeypatch.setattr(rollout, "run_episode", episode)
    monkeypatch.setattr(log_module.time, "strftime", lambda fmt, *a: "20261201-120000")  # the same second
    paths = [
        Path(
            _run_one(
                "pi",
                "fix-temperature-conversion",
                "builtin",
                "local",
                None,
                None,
                "oracle",
                "host",
                "local",
                None,
                None,
            ).trajectory
        )
        for _ in range(2)
    ]
    assert paths[0] != paths[1]
    assert sorted(p.name for p in (tmp_path / "artifacts" / "runs").iterdir()) == sorted(
        p.name for p in paths
    )
    for path in paths:
        assert path.name.startswith("pi-fix-temperature-conversion-20261201-120000-")
        assert read_episode(path).sequences == recorded.sequences
