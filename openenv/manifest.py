"""`openenv.yaml`: the manifest of an env folder, ours or the reference OpenEnv's.

Ours names the environment class (served in this process) and a typed client:

    spec_version: 1
    name: echo
    version: 0.1.0
    description: Echoes each message back.
    environment: echo_env.environment:EchoEnvironment   # module:attribute, importable from the folder
    client: echo_env.client:EchoClient                  # optional

The reference's (`openenv init` of `openenv==0.10.0`) names an ASGI app instead, which its own server
code builds; such a folder is served by running that app in an interpreter that has the reference
installed (`openenv.app_runner`), never imported here:

    spec_version: 1
    name: my_env
    version: 0.1.0
    type: space            # what the folder deploys as (the reference writes `space`)
    runtime: fastapi
    app: server.app:app    # module:attribute of the ASGI app, importable from the folder
    port: 8000             # the port the app listens on in its container
    validation: {...}      # the reference validator's block; kept, not interpreted here

The folder itself goes on `sys.path` when its objects are loaded, so an env folder needs no install.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

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
    environment: str | None = Field(
        default=None, pattern=_REF, description="`module:Class` of the Environment subclass (ours)."
    )
    client: str | None = Field(
        default=None, pattern=_REF, description="`module:Class` of the typed EnvClient."
    )
    app: str | None = Field(
        default=None,
        pattern=_REF,
        description="`module:attr` of an ASGI app serving the env (the reference's), run by its own interpreter.",
    )
    type: str | None = Field(default=None, description="The reference's deployment kind, e.g. `space`.")
    runtime: str | None = Field(default=None, description="The reference's app runtime, e.g. `fastapi`.")
    port: int = Field(default=8000, ge=1, le=65535, description="The port the app listens on when deployed.")
    validation: dict[str, Any] | None = Field(
        default=None,
        description="The reference validator's block (reward range, resources...); not read here.",
    )

    @model_validator(mode="after")
    def _serves_something(self) -> Manifest:
        if self.environment is None and self.app is None:
            raise ValueError(
                "name the env to serve: `environment: module:Class` (ours) or `app: module:attr` "
                "(an ASGI app, as the reference's `openenv init` writes)"
            )
        return self

    @property
    def is_app(self) -> bool:
        """True for a folder served by running its ASGI `app` (a reference env), not by our server."""
        return self.environment is None

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
        """Import the environment class named by `environment`, with `folder` importable.

        Raises:
            BadRequest: the manifest names an ASGI `app`, which runs in its own interpreter instead.
        """
        if self.environment is None:
            raise BadRequest(
                f"{self.name} names an ASGI app ({self.app}), not an environment class; it is served by "
                "running the app (`openenv serve FOLDER`), not imported",
                app=self.app,
            )
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
