"""`openenv init NAME`: write a new env folder from the templates beside this module.

The result is a complete, installable env (manifest, models, environment, typed client, tests) that
passes `openenv validate` and its own tests as generated, so authors start from green.
"""

from __future__ import annotations

import re
from pathlib import Path
from string import Template

from openenv.errors import BadRequest

__all__ = ["TEMPLATE_DIR", "scaffold"]

TEMPLATE_DIR = Path(__file__).parent / "template"
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def scaffold(name: str, dest: str | Path) -> Path:
    """Write env `name` into `dest/name` and return that folder.

    Args:
        name: Lowercase identifier (`[a-z][a-z0-9_]*`); the package is `<name>_env`.
        dest: Parent folder; `dest/name` must not exist yet.

    Raises:
        BadRequest: the name is not a valid identifier, or the target folder exists.
    """
    if not _NAME.match(name):
        raise BadRequest(f"env name {name!r} must match [a-z][a-z0-9_]* (it becomes the package {name}_env)")
    root = Path(dest) / name
    if root.exists():
        raise BadRequest(f"{root} already exists; choose another name or remove it", path=str(root))
    values = {
        "name": name,
        "package": f"{name}_env",
        "class_prefix": "".join(part.capitalize() for part in name.split("_")),
    }
    for template in sorted(TEMPLATE_DIR.rglob("*.tmpl")):
        rel = template.relative_to(TEMPLATE_DIR).with_suffix("")
        target = root / str(rel).replace("__pkg__", values["package"]).replace("__name__", name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(Template(template.read_text()).substitute(values))
    return root
