"""How to get the offline base image, said so that it works from a source checkout and from a wheel.

`scripts/build_base_image.sh` builds it (debootstrap, no registry), but only a source checkout has the
script: a message that names it to a wheel user names a file they do not have.
"""

from __future__ import annotations

__all__ = ["base_image_hint"]


def base_image_hint() -> str:
    """The next step for a missing base image. Product code never walks up to a checkout (a wheel has none:
    tests/test_resources.py), so the script is named as a source checkout holds it, saying so."""
    return (
        "build it with scripts/build_base_image.sh (offline) from a source checkout of openenv-harness "
        "(a wheel does not ship the script); or use --sandbox local"
    )
