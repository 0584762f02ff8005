"""Build hook only (the project is described in pyproject.toml): the wheel also carries the import guard.

`openenv_harness_guard.pth` runs `_openenv_harness_guard.install_guard()` at interpreter start, a copy
of `openenv/distribution.py` placed at the top of site-packages, so that a folder `openenv/` mixed with
another distribution's files is refused before its `__init__.py` (which may be the other one's) runs.
Editable installs skip it: their `openenv/` is this checkout, and its own `__init__.py` checks.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

GUARD_MODULE = "_openenv_harness_guard"
GUARD_PTH = "openenv_harness_guard.pth"


class BuildPyWithGuard(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        out = Path(self.build_lib)
        source = Path(__file__).parent / "openenv" / "distribution.py"
        (out / f"{GUARD_MODULE}.py").write_text(source.read_text())
        (out / GUARD_PTH).write_text(f"import {GUARD_MODULE}; {GUARD_MODULE}.install_guard()\n")

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        extra = (
            []
            if getattr(self, "editable_mode", False)
            else [str(Path(self.build_lib) / f"{GUARD_MODULE}.py"), str(Path(self.build_lib) / GUARD_PTH)]
        )
        return [*super().get_outputs(include_bytecode), *extra]


setup(cmdclass={"build_py": BuildPyWithGuard})
