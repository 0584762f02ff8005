"""Harbor datasets by name (`NAME@VERSION`), resolved through a Harbor registry file and git task
repositories on disk (`git init --bare`, `file://` URLs): the real git protocol with the network removed.
A second resolution works with the registry and the repositories gone (from the cache); a dataset whose
task escapes its folder is refused.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from openenv.errors import BadRequest, NotFound
from openenv.harness.tasks import harbor_registry, load_task_set
from openenv.harness.tasks.harbor_registry import REGISTRY_ENV, is_dataset_spec, resolve_dataset

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "harbor"
TASKS = ("schema13-fix-median", "bash-release-notes")


def _git(*args: str, cwd: Path) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


def _repo(tmp: Path, name: str, fill) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """A bare repository `name.git` whose one commit `fill(worktree)` wrote; returns (file:// URL, commit)."""
    bare, work = tmp / f"{name}.git", tmp / f"{name}-work"
    _git("init", "-q", "--bare", "--initial-branch=main", str(bare), cwd=tmp)
    _git("init", "-q", str(work), cwd=tmp)
    fill(work)
    _git("add", "-A", cwd=work)
    _git("commit", "-q", "-m", "tasks", cwd=work)
    _git("push", "-q", str(bare), "HEAD:refs/heads/main", cwd=work)
    commit = _git("rev-parse", "HEAD", cwd=work)
    shutil.rmtree(work)
    return f"file://{bare}", commit


def _registry(path: Path, datasets: list[dict]) -> Path:
    path.write_text(json.dumps(datasets))
    return path


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(harbor_registry, "_RESOLVED", {})
    return tmp_path / "cache" / "openenv" / "harbor"


@pytest.fixture
def dataset(tmp_path: Path, cache: Path) -> tuple[Path, str, Path]:
    """A registry file naming `demo@1.0` (two tasks at a pinned commit) and `demo@2.0` (one, at HEAD)."""

    def fill(work: Path) -> None:
        for name in TASKS:
            shutil.copytree(FIXTURES / name, work / "tasks" / name)

    url, commit = _repo(tmp_path, "tasks", fill)
    registry = _registry(
        tmp_path / "registry.json",
        [
            {
                "name": "demo",
                "version": "1.0",
                "description": "two tasks",
                "tasks": [
                    {"name": n, "git_url": url, "git_commit_id": commit, "path": f"tasks/{n}"} for n in TASKS
                ],
            },
            {
                "name": "demo",
                "version": "2.0",
                "description": "head",
                "tasks": [{"name": TASKS[0], "git_url": url, "path": f"tasks/{TASKS[0]}"}],
            },
        ],
    )
    return registry, commit, tmp_path / "tasks.git"


def test_name_at_version_is_a_dataset_spec_but_paths_and_hub_ids_are_not(tmp_path: Path, monkeypatch) -> None:
    assert is_dataset_spec("terminal-bench@2.0") and is_dataset_spec("org/swe-gym@1.0.1")
    assert not is_dataset_spec("org/name") and not is_dataset_spec("builtin") and not is_dataset_spec("/x@1")
    folder = tmp_path / "odd@1.0"
    folder.mkdir()
    monkeypatch.chdir(tmp_path)
    assert not is_dataset_spec("odd@1.0"), "an existing folder of that name is a folder"


def test_a_dataset_resolves_at_its_pinned_commit_and_loads_as_harbor_tasks(dataset, monkeypatch) -> None:
    registry, commit, _ = dataset
    monkeypatch.setenv(REGISTRY_ENV, str(registry))
    folders = resolve_dataset("demo@1.0")
    assert [f.name for f in folders] == list(TASKS)
    assert all((f.parent / "commit").read_text().strip() == commit for f in folders)
    tasks = load_task_set("demo@1.0")
    assert [t.id for t in tasks] == list(TASKS)
    assert tasks[0].instruction and tasks[0].tests and tasks[0].solution
    assert (folders[0] / "task.toml").read_bytes() == (FIXTURES / TASKS[0] / "task.toml").read_bytes()


def test_a_bare_name_picks_harbors_version_and_unknown_ones_are_named(dataset) -> None:
    registry = str(dataset[0])
    assert [f.name for f in resolve_dataset("demo", registry=registry)] == [TASKS[0]]  # 2.0 > 1.0
    with pytest.raises(NotFound, match=r"no version '9\.9'.*1\.0, 2\.0"):
        resolve_dataset("demo@9.9", registry=registry)
    with pytest.raises(NotFound, match="no dataset 'nope'.*demo"):
        resolve_dataset("nope@1.0", registry=registry)


def test_a_second_resolution_works_offline_from_the_cache(dataset, monkeypatch) -> None:
    registry, _, bare = dataset
    url = f"file://{registry}"  # a registry URL this time, read once
    first = resolve_dataset("demo@1.0", registry=url)
    shutil.rmtree(bare)  # the git server is gone ...
    registry.unlink()  # ... and so is the registry
    monkeypatch.setattr(harbor_registry, "_RESOLVED", {})  # a new process
    again = resolve_dataset("demo@1.0", registry=url)
    assert again == first and all((f / "tests" / "test.sh").is_file() for f in again)
    with pytest.raises(NotFound, match="never cached"):
        resolve_dataset("demo@1.0", registry=f"file://{registry.parent}/other.json")


def test_an_unpinned_task_follows_the_branch_and_falls_back_to_its_last_copy_offline(
    dataset, monkeypatch
) -> None:
    registry, commit, bare = dataset
    first = resolve_dataset("demo@2.0", registry=str(registry))
    assert (first[0].parent / "commit").read_text().strip() == commit
    shutil.rmtree(bare)
    monkeypatch.setattr(harbor_registry, "_RESOLVED", {})
    assert resolve_dataset("demo@2.0", registry=str(registry)) == first


@pytest.mark.parametrize(
    "path, message",
    [
        ("../outside", "leaves its repository"),
        ("tasks/../../outside", "leaves its repository"),
        ("/etc", "is absolute"),
    ],
)
def test_a_task_path_leaving_its_repository_is_refused(
    tmp_path: Path, cache: Path, path: str, message: str
) -> None:
    url, commit = _repo(tmp_path, "evil", lambda w: shutil.copytree(FIXTURES / TASKS[0], w / "t"))
    registry = _registry(
        tmp_path / "r.json",
        [
            {
                "name": "evil",
                "version": "1",
                "description": "",
                "tasks": [{"name": "x", "git_url": url, "git_commit_id": commit, "path": path}],
            }
        ],
    )
    with pytest.raises(BadRequest, match=message):
        resolve_dataset("evil@1", registry=str(registry))


@pytest.mark.parametrize(
    "plant, message",
    [
        (lambda w: (w / "t" / "tests" / "secret").symlink_to("/etc/passwd"), "absolute link"),
        (lambda w: (w / "t" / "tests" / "up").symlink_to("../../outside.txt"), "links outside the task"),
        (lambda w: (w / "t" / "solution" / "all").symlink_to("../.."), "links outside the task"),
    ],
)
def test_a_link_out_of_the_task_is_refused_and_nothing_is_cached(
    tmp_path: Path, cache: Path, plant, message
) -> None:
    def fill(work: Path) -> None:
        shutil.copytree(FIXTURES / TASKS[0], work / "t")
        (work / "outside.txt").write_text("not the task's")
        plant(work)

    url, commit = _repo(tmp_path, "evil", fill)
    registry = _registry(
        tmp_path / "r.json",
        [
            {
                "name": "evil",
                "version": "1",
                "description": "",
                "tasks": [{"name": "t", "git_url": url, "git_commit_id": commit, "path": "t"}],
            }
        ],
    )
    with pytest.raises(BadRequest, match=message):
        resolve_dataset("evil@1", registry=str(registry))
    assert not list((cache / "tasks").glob("*/t")), "a refused task leaves nothing in the cache"


def test_a_task_folder_reached_through_a_link_is_refused(tmp_path: Path, cache: Path) -> None:
    def fill(work: Path) -> None:
        shutil.copytree(FIXTURES / TASKS[0], work / "real")
        (work / "alias").symlink_to("real")

    url, commit = _repo(tmp_path, "evil", fill)
    registry = _registry(
        tmp_path / "r.json",
        [
            {
                "name": "evil",
                "version": "1",
                "description": "",
                "tasks": [{"name": "a", "git_url": url, "git_commit_id": commit, "path": "alias"}],
            }
        ],
    )
    with pytest.raises(BadRequest, match="passes through a link"):
        resolve_dataset("evil@1", registry=str(registry))


def test_a_link_inside_the_task_is_copied_as_a_file(tmp_path: Path, cache: Path) -> None:
    def fill(work: Path) -> None:
        shutil.copytree(FIXTURES / TASKS[0], work / "t")
        (work / "t" / "tests" / "again.sh").symlink_to("test.sh")

    url, commit = _repo(tmp_path, "ok", fill)
    registry = _registry(
        tmp_path / "r.json",
        [
            {
                "name": "ok",
                "version": "1",
                "description": "",
                "tasks": [{"name": "t", "git_url": url, "git_commit_id": commit, "path": "t"}],
            }
        ],
    )
    [folder] = resolve_dataset("ok@1", registry=str(registry))
    copied = folder / "tests" / "again.sh"
    assert not copied.is_symlink() and copied.read_bytes() == (folder / "tests" / "test.sh").read_bytes()


def test_a_remote_registry_may_not_name_a_folder_on_this_machine(tmp_path: Path, cache: Path) -> None:
    registry = _registry(
        tmp_path / "r.json",
        [{"name": "l", "version": "1", "description": "", "tasks": [{"name": "t", "path": "tasks/t"}]}],
    )
    with pytest.raises(BadRequest, match="without a git_url"):
        resolve_dataset("l@1", registry=f"file://{registry}")


def test_a_registry_file_may_name_folders_beside_it(tmp_path: Path, cache: Path) -> None:
    shutil.copytree(FIXTURES / TASKS[0], tmp_path / "local" / TASKS[0])
    registry = _registry(
        tmp_path / "r.json",
        [
            {
                "name": "l",
                "version": "1",
                "description": "",
                "tasks": [{"name": "t", "path": f"local/{TASKS[0]}"}],
            }
        ],
    )
    [folder] = resolve_dataset("l@1", registry=str(registry))
    assert (folder / "instruction.md").read_bytes() == (FIXTURES / TASKS[0] / "instruction.md").read_bytes()


@pytest.mark.slow
def test_openenv_eval_runs_a_dataset_by_name_and_again_offline(dataset, tmp_path: Path, monkeypatch) -> None:
    """The acceptance run: `openenv eval --tasks NAME@VERSION --registry FILE` solves both tasks with the
    oracle in the local sandbox; with the git repository and the registry file gone, it runs again."""
    from typer.testing import CliRunner

    from openenv.cli.main import app as cli
    from openenv.eval.report import Report
    from openenv.harness.catalog import get_spec
    from openenv.harness.install import install_status

    if not install_status(get_spec("pi")).ready:
        pytest.skip("pi is not installed; run scripts/install_harnesses.sh pi")
    registry, _, bare = dataset
    monkeypatch.delenv(REGISTRY_ENV, raising=False)

    def run(out: Path) -> Report:
        result = CliRunner().invoke(
            cli,
            [
                "eval",
                "--harness",
                "pi",
                "--tasks",
                "demo@1.0",
                "--registry",
                str(registry),
                "--policy",
                "oracle",
                "--sandbox",
                "local",
                "--concurrency",
                "2",
                "--out",
                str(out),
                "--json",
            ],
        )
        assert result.exit_code == 0, result.output
        return Report.model_validate(json.loads(result.stdout.strip().splitlines()[-1]))

    first = run(tmp_path / "online")
    assert [(r.harness, r.episodes, r.solved) for r in first.rows] == [("pi", 2, 2)]
    shutil.rmtree(bare)
    registry.unlink()
    monkeypatch.setattr(harbor_registry, "_RESOLVED", {})
    again = run(tmp_path / "offline")
    assert [(r.harness, r.episodes, r.solved) for r in again.rows] == [("pi", 2, 2)]
    assert sorted(again.tasks) == sorted(TASKS)
