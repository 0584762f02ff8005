"""`openenv.yaml`: the manifest that names an env folder's environment class and typed client.

    spec_version: 1
    name: echo
    version: 0.1.0
    description: Echoes each message back.
    environment: echo_env.environment:EchoEnvironment   # module:attribute, importable from the folder
    client: echo_env.client:EchoClient                  # optional

The folder itself goes on `sys.path` when its objects are loaded, so an env folder needs no install.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from openenv.core.validation import validation_message
from openenv.errors import BadRequest, NotFound

__all__ = ["MANIFEST_FILE", "Manifest", "import_object"]

MANIFEST_FILE = "openenv.yaml"
_REF = r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$"


class Manifest(BaseModel):
    """The parsed `openenv.yaml` of one env folder."""

    model_config = ConfigDict(extra="forbid")

    spec_version: Literal[1] = 1
    name: str = Field(
        pattern=r"^[a-z][a-z0-9_-]*$", description="Lowercase env name used by AutoEnv and the CLI."
    )
    version: str = "0.1.0"
    description: str = ""
    environment: str = Field(pattern=_REF, description="`module:Class` of the Environment subclass.")
    client: str | None = Field(
        default=None, pattern=_REF, description="`module:Class` of the typed EnvClient."
    )

    @classmethod
    def load(cls, path: str | Path) -> tuple[Manifest, Path]:
        """Read `path` (an env folder or its `openenv.yaml`); returns the manifest and the folder.

        Raises:
            NotFound: there is no manifest at `path`.
            BadRequest: the file is not YAML, or a field is missing or invalid (each one is named).
        """
        file = Path(path)
        if file.is_dir():
            file = file / MANIFEST_FILE
        if not file.is_file():
            raise NotFound(
                f"no {MANIFEST_FILE} at {file}; run `openenv init NAME` to scaffold one", path=str(file)
            )
        try:
            raw = yaml.safe_load(file.read_text())
        except yaml.YAMLError as exc:
            raise BadRequest(f"{file} is not valid YAML: {exc}", path=str(file)) from None
        try:
            return cls.model_validate(raw or {}), file.parent.resolve()
        except ValidationError as exc:
            raise BadRequest(f"{file}: {validation_message(exc, 'manifest')}", path=str(file)) from None

    def load_environment(self, folder: Path) -> Any:
        """Import the environment class named by `environment`, with `folder` importable."""
        return import_object(self.environment, folder)

    def load_client(self, folder: Path) -> Any | None:
        return import_object(self.client, folder) if self.client else None


def import_object(ref: str, root: Path | None = None) -> Any:
    """Import `module:attr` (attr may be dotted), with `root` prepended to `sys.path` if given.

    Raises:
        NotFound: the module or the attribute does not exist.
    """
    module_name, _, attr = ref.partition(":")
    if root is not None and str(root) not in sys.path:
        sys.path.insert(0, str(root))
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        where = f" (searched {root} and sys.path)" if root else ""
        raise NotFound(f"cannot import {module_name!r} for {ref!r}: {exc}{where}", ref=ref) from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise NotFound(
                f"module {module_name!r} has no attribute {attr!r} (from {ref!r})", ref=ref
            ) from None
    return obj
