"""The package version, from the installed distribution's metadata (pyproject.toml)."""

from __future__ import annotations

import importlib.metadata
import os
import tomllib


def _version() -> str:
    """The ``rlplan`` distribution's version; read from pyproject.toml when not installed."""
    try:
        return importlib.metadata.version("rlplan")
    except importlib.metadata.PackageNotFoundError:
        pyproject = os.path.join(os.path.dirname(os.path.dirname(__file__)), "pyproject.toml")
        try:
            with open(pyproject, "rb") as stream:
                return str(tomllib.load(stream)["project"]["version"])
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "0+unknown"


#: Version of the installed ``rlplan`` (``rlplan --version`` prints it).
__version__ = _version()
