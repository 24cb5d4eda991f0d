"""Where templates/, rules/, storage/ and policies/ are: inside the installed package, or beside it in a checkout.

The repository keeps them as top-level folders; a wheel ships them as kernelbot/assets/<name> (pyproject's
package-dir mapping). A checkout run with PYTHONPATH=. or an editable install reads the folders directly.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

NAMES = ("templates", "rules", "storage", "policies")


def asset_dir(name: str) -> Path:
    if name not in NAMES:
        raise ValueError(f"unknown asset folder {name!r}; one of {', '.join(NAMES)}")
    package = Path(str(files("kernelbot")))
    inside = package / "assets" / name
    return inside if inside.is_dir() else package.parent / name
