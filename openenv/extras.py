"""The optional parts of the distribution, and the one line that installs the part a command lacks.

Every "pip install ..." openenv prints comes from `install_hint`, so the distribution's name and its
extras are written once (`DISTRIBUTION`, `EXTRAS` mirror pyproject.toml's `[project.optional-dependencies]`).
"""

from __future__ import annotations

from openenv.distribution import NAME

__all__ = ["DISTRIBUTION", "EXTRAS", "extra_for_module", "install_hint"]

DISTRIBUTION = NAME  # `openenv-harness`; the import package is `openenv`

# extra -> the top-level modules it brings (what an ImportError names).
EXTRAS: dict[str, tuple[str, ...]] = {
    "capture": ("transformers", "tokenizers", "torch", "safetensors", "msgspec", "xxhash", "regex", "jinja2"),
    "docker": ("docker",),
    "ray": ("ray",),
    "train": ("trl", "datasets", "matplotlib"),
    "ecosystem": ("huggingface_hub", "datasets", "matplotlib", "pathspec"),
    "gym": ("gymnasium",),
}


def extra_for_module(module: str) -> str | None:
    """The extra that provides top-level module `module` (`msgspec.json` -> `capture`), or None."""
    top = module.split(".", 1)[0]
    return next((extra for extra, modules in EXTRAS.items() if top in modules), None)


def install_hint(*extras: str) -> str:
    """`pip install 'openenv-harness[capture,docker]'`: the command that adds `extras` (none: the core)."""
    return f"pip install '{DISTRIBUTION}[{','.join(extras)}]'" if extras else f"pip install {DISTRIBUTION}"
