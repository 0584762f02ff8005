"""Harbor task folders load as Harbor loads them: starting files from environment/'s Dockerfile, the
task.toml fields that change a run, and nothing rewritten."""

from __future__ import annotations

from pathlib import Path

import pytest

from openenv.errors import BadRequest
from openenv.harness.tasks import load_harbor_task
from openenv.harness.tasks.dockerfile import parse_dockerfile

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe\x00"


def make_harbor_task(
    root: Path,
    *,
    dockerfile: str = "FROM python:3.11-slim\nWORKDIR /app\nCOPY app/ /app/\n",
    toml: str = 'schema_version = "1.4"\n',
    solution: bool = True,
) -> Path:
    """A Harbor-format task as Harbor writes them: absolute /app, /tests, /logs/verifier paths."""
    task = root / "hello-file"
    (task / "tests").mkdir(parents=True)
    (task / "environment" / "app" / "pkg").mkdir(parents=True)
    (task / "instruction.md").write_text(
        "<!-- harbor-canary GUID 1234 -->\nCreate hello.txt containing hello.\n"
    )
    (task / "task.toml").write_text(toml)
    (task / "environment" / "Dockerfile").write_text(dockerfile)
    (task / "environment" / "app" / "README.md").write_text("empty project\n")
    (task / "environment" / "app" / "pkg" / "logo.png").write_bytes(PNG)
    (task / "tests" / "test.sh").write_text(
        "#!/bin/bash\ncd /app\n"
        "if grep -qx hello hello.txt 2>/dev/null; then echo 1 > /logs/verifier/reward.txt;"
        " else echo 0 > /logs/verifier/reward.txt; fi\n"
    )
    if solution:
        (task / "solution").mkdir()
        (task / "solution" / "solve.sh").write_text("#!/bin/bash\necho hello > hello.txt\n")
    return task


def test_starting_files_come_from_the_dockerfile_copies_bytes_intact(tmp_path):
    task = load_harbor_task(make_harbor_task(tmp_path))
    assert task.id == "hello-file" and task.source == "harbor" and task.workdir == "/app"
    assert task.workspace == {"README.md": "empty project\n", "pkg/logo.png": PNG}
    assert task.base_image == "python:3.11-slim" and not task.needs_build()
    assert task.instruction == "Create hello.txt containing hello."  # canary line stripped
    assert task.tests["test.sh"].count("/logs/verifier/reward.txt") == 2  # scripts are not rewritten
    assert task.test_command == "bash /tests/test.sh" and task.solution_files.keys() == {"solve.sh"}


def test_harbor_defaults_and_task_toml_fields(tmp_path):
    task = load_harbor_task(make_harbor_task(tmp_path))
    assert (task.verifier_timeout_s, task.verifier_mode, task.schema_version) == (600.0, "shared", "1.4")
    toml = (
        'version = "1.0"\n[metadata]\ndifficulty = "easy"\n[agent]\ntimeout_sec = 60.0\n'
        '[verifier]\ntimeout_sec = 30.0\nenvironment_mode = "separate"\n[verifier.env]\nMODE = "strict"\n'
        '[solution.env]\nHINT = "1"\n[environment]\nworkdir = "/workspace"\n'
    )
    (tmp_path / "b").mkdir()
    task = load_harbor_task(
        make_harbor_task(
            tmp_path / "b", toml=toml, dockerfile="FROM ubuntu:24.04\nWORKDIR /app\nCOPY app/ /workspace/\n"
        )
    )
    assert task.schema_version == "1.0" and task.metadata == {"difficulty": "easy"}
    assert (task.timeout_s, task.verifier_timeout_s, task.verifier_mode) == (60.0, 30.0, "separate")
    assert task.verifier_env == {"MODE": "strict"} and task.solution_env == {"HINT": "1"}
    assert task.workdir == "/workspace" and "README.md" in task.workspace


def test_a_task_without_solution_loads_and_has_none(tmp_path):
    task = load_harbor_task(make_harbor_task(tmp_path, solution=False))
    assert task.solution is None and task.solution_files == {}


def test_run_steps_and_files_outside_the_workdir_need_a_build(tmp_path):
    dockerfile = (
        "FROM python:3.11-slim\n# comment\nRUN pip install --no-index \\\n    requests\n"
        'COPY app/README.md /opt/readme\nWORKDIR /app\nCOPY ["app/pkg", "pkg/"]\n'
    )
    task = load_harbor_task(make_harbor_task(tmp_path, dockerfile=dockerfile))
    assert task.build_steps == ["RUN pip install --no-index requests"]
    assert task.outside_files == ["/opt/readme"] and task.needs_build()
    assert task.workspace == {"pkg/logo.png": PNG}


def test_docker_image_without_environment_folder(tmp_path):
    folder = make_harbor_task(tmp_path)
    (folder / "environment" / "Dockerfile").unlink()
    with pytest.raises(BadRequest, match="environment/Dockerfile is missing"):
        load_harbor_task(folder)
    (folder / "task.toml").write_text('[environment]\ndocker_image = "ghcr.io/x/y:1"\nworkdir = "/srv"\n')
    task = load_harbor_task(folder)
    assert task.image == "ghcr.io/x/y:1" and task.workdir == "/srv" and task.workspace == {}


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("COPY app/README.md /app/", {"/app/README.md"}),
        ("COPY app/README.md /app/notes.md", {"/app/notes.md"}),
        ("COPY app /srv", {"/srv/README.md", "/srv/pkg/logo.png"}),
        ("COPY --chown=1000:1000 app/ .", {"/app/README.md", "/app/pkg/logo.png"}),
        ("ADD app/*.md /app/", {"/app/README.md"}),
    ],
)
def test_copy_forms(tmp_path, line, expected):
    folder = make_harbor_task(tmp_path, dockerfile=f"FROM x\nWORKDIR /app\n{line}\n")
    plan = parse_dockerfile(folder / "environment" / "Dockerfile")
    assert set(plan.files) == expected


def test_env_lines_and_dockerignore(tmp_path, monkeypatch):
    monkeypatch.setenv("FIXTURE_MODE", "strict")
    dockerfile = (
        "FROM x\nENV APP_HOME=/app\nENV PYTHONPATH=${APP_HOME}/src:$PYTHONPATH PATH=/opt/bin:$PATH\n"
        "ENV LEGACY form with spaces\nWORKDIR /app\nCOPY . .\n"
    )
    folder = make_harbor_task(
        tmp_path,
        dockerfile=dockerfile,
        toml='[environment.env]\nMODE = "${FIXTURE_MODE}"\nLEVEL = "${FIXTURE_LEVEL:-3}"\n',
    )
    (folder / "environment" / ".dockerignore").write_text("# comment\napp/pkg\n*.md\n")
    (folder / "environment" / "NOTES.md").write_text("ignored at the top level only\n")
    task = load_harbor_task(folder)
    assert task.env == {
        "APP_HOME": "/app",
        "PYTHONPATH": "/app/src:",
        "LEGACY": "form with spaces",
        "MODE": "strict",
        "LEVEL": "3",
    }  # PATH is the sandbox's, never the task's
    assert set(task.workspace) == {"Dockerfile", ".dockerignore", "app/README.md"}  # `*` stops at `/`


def test_copy_of_a_missing_source_is_named(tmp_path):
    folder = make_harbor_task(tmp_path, dockerfile="FROM x\nCOPY nothing/ /app/\n")
    with pytest.raises(BadRequest, match="'nothing/' does not exist"):
        load_harbor_task(folder)


def test_missing_file_is_named(tmp_path):
    task_dir = make_harbor_task(tmp_path)
    (task_dir / "tests" / "test.sh").unlink()
    with pytest.raises(BadRequest, match="tests/test.sh is missing"):
        load_harbor_task(task_dir)


def test_a_non_shell_shebang_picks_the_interpreter(tmp_path):
    folder = make_harbor_task(tmp_path)
    (folder / "tests" / "test.sh").write_text("#!/usr/bin/env python3\nprint(1)\n")
    assert load_harbor_task(folder).test_command == "/usr/bin/env python3 /tests/test.sh"


def test_a_link_leaving_the_task_folder_is_refused(tmp_path):
    folder = make_harbor_task(tmp_path)
    (folder / "tests" / "secret.txt").symlink_to("/etc/hostname")
    with pytest.raises(BadRequest, match="links outside the task folder"):
        load_harbor_task(folder)


def test_unsupported_shapes_are_refused_by_name(tmp_path):
    folder = make_harbor_task(tmp_path)
    (folder / "environment" / "Dockerfile").unlink()
    (folder / "environment" / "docker-compose.yaml").write_text("services: {}\n")
    with pytest.raises(BadRequest, match="docker-compose environments are not supported"):
        load_harbor_task(folder)
    (folder / "task.toml").write_text('[[steps]]\nname = "one"\n')
    with pytest.raises(BadRequest, match="multi-step"):
        load_harbor_task(folder)
