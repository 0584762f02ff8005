"""Which distribution this is (`openenv-harness`), and the guard against a second one in `openenv/`.

Our import package is `openenv`, and so is Hugging Face's reference OpenEnv's (distributions `openenv` and
`openenv-core` on PyPI). pip keeps no record of who owns a folder: installing one over the other writes
its files into the same `site-packages/openenv/`, so the folder becomes half ours and half theirs, and
whichever `__init__.py` came last decides what `import openenv` runs. A mixed package must never run.

`check_no_clash(package_dir)` reads the RECORD of every distribution installed beside the package and
raises `PackageClash` (an `ImportError`, one line: who clashes and what to do) when another one owns files
under `openenv/`. It runs twice over:
  - from our `openenv/__init__.py` (ours installed last: our `__init__.py` is the one that runs);
  - from a meta-path finder that the wheel's `openenv_harness_guard.pth` installs at interpreter start
    (theirs installed last: their `__init__.py` runs, so the check has to come before it). The wheel
    carries this very file as the top-level module `_openenv_harness_guard` (see setup.py): it must stay
    stdlib only and import nothing of openenv.

A scan is one `scandir` and the RECORD files of the folder's distributions: about 10 ms in a virtualenv
of 200 distributions (torch and vLLM included), once per process.
"""

from __future__ import annotations

import os
import sys
from importlib.machinery import ModuleSpec, PathFinder
from typing import Any

__all__ = [
    "NAME",
    "PACKAGE",
    "PackageClash",
    "check_no_clash",
    "install_guard",
    "installed",
    "owners",
    "requirements",
]

NAME = "openenv-harness"  # the distribution; the import package stays `openenv`
PACKAGE = "openenv"
_OURS = NAME.replace("-", "_")
_CHECKED: set[str] = set()  # package folders already found clean in this process


class PackageClash(ImportError):
    """Another distribution owns files in our package folder; the message is one line that says what to do."""


def owners(site_dir: str, package: str = PACKAGE) -> dict[str, str]:
    """`{distribution name: version}` of every distribution in `site_dir` whose RECORD lists files
    under `package/` (an editable install lists none: it maps the folder from elsewhere)."""
    prefix = f"{package}/".encode()
    found: dict[str, str] = {}
    try:
        entries = list(os.scandir(site_dir))
    except OSError:
        return found
    for entry in entries:
        if not entry.name.endswith(".dist-info"):
            continue
        try:
            with open(os.path.join(entry.path, "RECORD"), "rb") as fh:
                record = fh.read()
        except OSError:
            continue
        if record.startswith(prefix) or b"\n" + prefix in record:
            name, _, version = entry.name[: -len(".dist-info")].partition("-")
            found[name] = version
    return found


def _normal(name: str) -> str:
    return name.replace("-", "_").replace(".", "_").lower()


def check_no_clash(package_dir: str) -> None:
    """Raise `PackageClash` when a distribution other than ours owns files in `package_dir`.

    Raises:
        PackageClash: one line naming the other distribution(s), the folder, and the commands that fix it.
    """
    package_dir = os.path.normpath(str(package_dir))
    if package_dir in _CHECKED:
        return
    site, package = os.path.split(package_dir)
    others = {name: version for name, version in owners(site, package).items() if _normal(name) != _OURS}
    if others:
        named = ", ".join(f"{name} {version}" for name, version in sorted(others.items()))
        uninstall = " ".join(sorted({*others, NAME}))
        _one_line_excepthook()
        raise PackageClash(
            f"{NAME}: {package_dir} also holds files of {named} (Hugging Face's OpenEnv uses the same import "
            f"name `openenv`), so it mixes two projects and is not imported; fix: pip uninstall -y {uninstall} "
            f"&& pip install {NAME} (the reference OpenEnv needs a virtualenv of its own)"
        )
    _CHECKED.add(package_dir)


def _one_line_excepthook() -> None:
    """An uncaught `PackageClash` prints its one line, not a traceback through the import machinery."""
    previous = sys.excepthook
    if getattr(previous, "_openenv_clash_hook", False):
        return

    def hook(kind: type[BaseException], exc: BaseException, tb: Any) -> None:
        if kind.__name__ == "PackageClash" and isinstance(exc, ImportError):
            print(exc, file=sys.stderr)
        else:
            previous(kind, exc, tb)

    hook._openenv_clash_hook = True  # type: ignore[attr-defined]  # a marker attribute on the hook function, found again by the next import
    sys.excepthook = hook


class _ClashGuard:
    """A meta-path finder that checks the `openenv` folder before anything in it runs, then steps aside."""

    @classmethod
    def find_spec(cls, fullname: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if fullname != PACKAGE:
            return None
        spec = PathFinder.find_spec(fullname, path)
        if spec is not None and spec.submodule_search_locations:
            for location in spec.submodule_search_locations:
                check_no_clash(location)
        return None  # the usual finders import it

    @classmethod
    def invalidate_caches(cls) -> None:
        _CHECKED.clear()


def install_guard() -> None:
    """Put the guard first on `sys.meta_path` (from the wheel's .pth; idempotent)."""
    if not any(getattr(f, "__name__", "") == "_ClashGuard" for f in sys.meta_path):
        sys.meta_path.insert(0, _ClashGuard)


def installed() -> Any:
    """Our installed `importlib.metadata.Distribution` (imported here, not at `import openenv`).

    A virtualenv installed before the rename holds us as `openenv` (an editable install of this
    checkout): that one is accepted when its console script is ours, never the reference's.

    Raises:
        importlib.metadata.PackageNotFoundError: openenv-harness is not installed (a bare source tree).
    """
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        return distribution(NAME)
    except PackageNotFoundError:
        try:
            legacy = distribution(PACKAGE)
        except PackageNotFoundError:
            legacy = None
        if legacy is not None and any(ep.value == "openenv.cli.main:main" for ep in legacy.entry_points):
            return legacy
        raise PackageNotFoundError(NAME) from None


def requirements() -> list[str]:
    """The installed distribution's core requirements (no extras)."""
    return [req for req in installed().requires or [] if "extra ==" not in req]
