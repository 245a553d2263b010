"""Folders of a source checkout: the clone's root and its shipped instances.

In an installed copy (``pip install .``) ``SOURCE_ROOT`` is the folder that
holds the installed ``rlplan`` package, where no ``instances/`` folder
exists; commands that default to a shipped file then say which one is missing.
"""

from __future__ import annotations

from pathlib import Path

#: The folder holding the ``rlplan`` package: the clone's root in a checkout.
SOURCE_ROOT = Path(__file__).resolve().parent.parent

#: The shipped instances of a checkout.
INSTANCES = SOURCE_ROOT / "instances"
