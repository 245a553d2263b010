"""Atomic output writing: a run's files appear together or not at all."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any


def write_json(path: str, document: Any) -> None:
    """Write JSON atomically (temporary file in the same folder, then rename)."""
    write_text(path, json.dumps(document, indent=2) + "\n")


def new_file_mode() -> int:
    """The mode :func:`open` gives a new file: ``0o666`` less the process umask.

    Returns
    -------
    int
        ``0o644`` under the usual umask ``022``.
    """
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def write_text(path: str, text: str) -> None:
    """Write text atomically, with the mode a plain :func:`open` would give it.

    ``tempfile.mkstemp`` creates its file with mode ``0o600``; the file is
    given :func:`new_file_mode` before it is renamed into place, so outputs
    are readable like any other file the user writes (``0o644``).
    """
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=os.path.basename(path))
    try:
        os.fchmod(handle, new_file_mode())
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


class OutputBundle:
    """Files staged in a hidden folder and moved into place together on :meth:`commit`.

    Use as a context manager: if the block raises (or is interrupted) the
    staging folder is removed and the destination is left untouched.
    """

    def __init__(self, destination: str) -> None:
        self.destination = destination
        parent = os.path.dirname(os.path.abspath(destination)) or "."
        os.makedirs(parent, exist_ok=True)
        self.staging = tempfile.mkdtemp(dir=parent, prefix=".staging-")

    def path(self, name: str) -> str:
        """Where to write ``name`` before the commit."""
        return os.path.join(self.staging, name)

    def write_json(self, name: str, document: Any) -> None:
        """Stage a JSON file."""
        with open(self.path(name), "w", encoding="utf-8") as stream:
            json.dump(document, stream, indent=2)
            stream.write("\n")

    def write_text(self, name: str, text: str) -> None:
        """Stage a text file."""
        with open(self.path(name), "w", encoding="utf-8") as stream:
            stream.write(text)

    def write_with(self, name: str, writer: Callable[[str], None]) -> None:
        """Stage a file written by ``writer(path)`` (e.g. a plot)."""
        writer(self.path(name))

    def commit(self) -> list[str]:
        """Move every staged file into the destination; returns their final paths."""
        os.makedirs(self.destination, exist_ok=True)
        written = []
        for name in sorted(os.listdir(self.staging)):
            target = os.path.join(self.destination, name)
            os.replace(os.path.join(self.staging, name), target)
            written.append(target)
        shutil.rmtree(self.staging, ignore_errors=True)
        return written

    def discard(self) -> None:
        """Drop everything staged."""
        shutil.rmtree(self.staging, ignore_errors=True)

    def __enter__(self) -> OutputBundle:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.discard()
        elif os.path.isdir(self.staging):
            self.commit()
