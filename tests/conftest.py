"""Session-wide fixtures: one tiny-model build, one real vLLM CPU server, one renderer and one in-process
backend per test session (each takes seconds; capture and reliability tests share them)."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

# setuptools first, so `distutils` is setuptools' copy for the whole session. In the full suite's order
# something run before tests/train imports the interpreter's own `distutils` (Python 3.11 still ships
# it); TRL's GRPO trainer then imports torch.utils.cpp_extension -> setuptools, whose distutils hack
# asserts on the stdlib copy and every trainer test errored ("Failed to import trl.trainer.grpo_trainer").
# Each test folder run alone is clean (an import audit hook saw no stdlib `distutils` import in capture/,
# eval/, executor/, export/, cli/, core/ or harness/e2e/), so the culprit is an ordering effect not yet
# pinned down; importing setuptools here makes that order harmless.
import setuptools  # noqa: F401  (before anything imports distutils)

from openenv.harness.spec import SessionContext
from openenv.models import tiny_model_path
from openenv.testing.leftovers import pytest_sessionfinish  # noqa: F401  (no child outlives the session)
from openenv.testing.skips import pytest_terminal_summary  # noqa: F401  (the one-line skip summary)

# The suite runs on the repo's own build (`.ci/run` makes it with scripts/build_tiny_model.py); the
# product's default is the user cache. Set here so every subprocess a test starts uses the same model.
os.environ.setdefault(
    "OPENENV_TINY_MODEL", str(Path(__file__).resolve().parents[1] / ".cache" / "tiny-model")
)

# No pull leaves this machine: a task naming an image the engine lacks would make the daemon resolve a
# registry host through the machine's resolver (a private address). Tests of pulling clear this and
# pull from a registry on 127.0.0.1 (`loopback_registry`); every other test sees `never`, so a missing
# image is the error that names the ways out, at once.
os.environ.setdefault("OPENENV_PULL", "never")

if TYPE_CHECKING:
    from openenv.capture.backends.local import LocalBackend
    from openenv.capture.renderer import Renderer


# Task fixtures carry their own tests (Harbor's tests/test_outputs.py, ...): data run inside a sandbox by
# the verifier, never collected by our suite.
collect_ignore_glob = ["fixtures/*", "*/fixtures/*"]


@pytest.fixture
def session_context(tmp_path: Path) -> SessionContext:
    """One harness session's values as a spec renders them: a proxy URL on loopback, its token, the tiny model,
    a workspace and a home under `tmp_path`, and an instruction with a `$` and a quote (to be taken literally)."""
    return SessionContext(
        base_url="http://127.0.0.1:4321/s/tok",
        api_key="tok",
        model="tiny",
        workspace=tmp_path / "ws",
        home=tmp_path / "home",
        instruction="Fix $HOME's bug",
    )


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    """Path to the deterministic tiny chat model (built once, cached under the repo's .cache/)."""
    return tiny_model_path()


@pytest.fixture(scope="session")
def vllm_url(tiny_model: Path) -> Iterator[str]:
    """Base URL (no /v1) of a real vLLM CPU server serving the tiny model as `tiny`.

    `OPENENV_VLLM_URL` reuses a server that is already running (handy while developing).
    `OPENENV_TEST_VLLM_URL_FILE` names the file where scripts/test.sh's server writes its URL once it is up
    (it starts one for both of its pytest runs, and this run's first tests while it starts).
    """
    existing = os.environ.get("OPENENV_VLLM_URL")
    if existing:
        yield existing.rstrip("/")
        return
    url_file = os.environ.get("OPENENV_TEST_VLLM_URL_FILE")
    if url_file:
        yield _announced_url(Path(url_file))
        return
    from openenv.soak.vllm_server import VLLMServer

    server = VLLMServer(tiny_model).start()
    try:
        yield server.base_url
    finally:
        server.stop()


def _announced_url(url_file: Path, timeout_s: float = 360.0) -> str:
    """The URL `python -m openenv.soak.vllm_server --url-file` writes once its server is healthy."""
    deadline = time.monotonic() + timeout_s
    while not (said := url_file.read_text().strip() if url_file.exists() else ""):
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"no vLLM URL in {url_file} after {timeout_s:.0f} s (scripts/test.sh starts it)"
            )
        time.sleep(0.5)
    if said.startswith("error:"):
        raise RuntimeError(f"scripts/test.sh's vLLM server did not start: {said}")
    return said.rstrip("/")


@pytest.fixture(scope="session")
def renderer(tiny_model: Path) -> Renderer:
    """The tiny model's renderer (chat template + tokenizer), loaded once."""
    from openenv.capture.renderer import Renderer

    return Renderer.from_pretrained(tiny_model)


@pytest.fixture(scope="session")
def local_backend(tiny_model: Path) -> LocalBackend:
    """The tiny model in-process: samples and scores without the vLLM server (loaded once)."""
    from openenv.capture.backends.local import LocalBackend

    return LocalBackend(tiny_model)


CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
)


@pytest.fixture(scope="session")
def capture_server(tiny_model: Path) -> Iterator[object]:
    """A real capture proxy on 127.0.0.1 whose backend is the tiny model in-process (it samples and scores
    the oracle's replies); the harness and reward-hack suites share it."""
    from openenv.capture.backends.local import LocalBackend
    from openenv.capture.server import CaptureServer

    server = CaptureServer(backend=LocalBackend(tiny_model), model=tiny_model).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def teacher(tiny_model: Path) -> Any:
    """The tiny model in float32 transformers: an independent teacher-forced scorer for sampled logprobs."""
    from openenv.testing.teacher import load_teacher

    return load_teacher(tiny_model)


@pytest.fixture(scope="session")
def loopback_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real image registry (Debian's docker-registry) on 127.0.0.1, one per session: push to it with
    `.push(local_image, "repo:tag")`, pull `f"{registry.host}/repo:tag"`; skipped with the install hint
    when the package is missing."""
    from openenv.testing.registry import LoopbackRegistry, registry_available

    reason = registry_available()
    if reason is not None:
        pytest.skip(reason)
    with LoopbackRegistry(tmp_path_factory.mktemp("loopback-registry")) as registry:
        yield registry


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real headless Chromium (selenium), one per session; skipped with the install hint when missing."""
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver):
        pytest.skip("chromium/chromedriver not installed; run scripts/install_browser.sh")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (
        *CHROMIUM_FLAGS,
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
        "--window-size=1400,1000",
    ):
        options.add_argument(flag)
    session = webdriver.Chrome(options=options, service=Service(driver))
    session.set_page_load_timeout(60)
    yield session
    session.quit()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """With OPENENV_REQUIRE_ALL=1 (CI), a test skipped for a missing prerequisite fails instead.

    Locally a missing harness CLI, engine or browser is a skip with the command that installs it; in CI
    `.ci/run` installs all of them, so a skip there would hide a broken install step.
    """
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("OPENENV_REQUIRE_ALL") == "1" and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped, but CI requires every prerequisite (OPENENV_REQUIRE_ALL=1): {reason}"
