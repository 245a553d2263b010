"""Atomic output writing: a run's files appear together or not at all.

Every JSON document is strict JSON (no ``NaN`` or ``Infinity``): a
non-finite number is written as ``null``. Output paths are checked before
any work (:func:`check_output_folder`, :func:`check_output_file`), and a
run's folder is staged and swapped in whole (:class:`OutputBundle` with
``replace=True``), so it never mixes the files of two runs.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

from rlplan.rpeg.errors import InputError

#: Every file a run folder (``solve``, ``baseline``) may hold beside the copy of its
#: instance (:func:`recorded_copy`); a folder holding anything else is not replaced.
RUN_FILES = frozenset(
    {
        "plan.json",
        "trace.json",
        "trace.perfetto.json",
        "result.json",
        "report.md",
        "report.html",
        "gantt.png",
    }
)


#: The files of a run folder that record its instance copy, in the order they are read.
RECORDING_FILES = ("plan.json", "result.json")


def recorded_copy(folder: str) -> str | None:
    """The instance copy a run folder's plan.json or result.json records, or None.

    A run writes its instance beside its other files as ``<instance name>.yaml``
    and its plan.json and result.json name that file under ``"instance"``,
    ``"file"``.

    Parameters
    ----------
    folder
        A run folder (or any folder).

    Returns
    -------
    str or None
        The file's name in ``folder``; None when neither file records one
        (or records anything but a plain ``.yaml`` file name).
    """
    for name in RECORDING_FILES:
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as handle:
                document = json.load(handle)
        except (OSError, ValueError, RecursionError):
            continue
        entry = document.get("instance") if isinstance(document, dict) else None
        copy = entry.get("file") if isinstance(entry, dict) else None
        if isinstance(copy, str) and copy.endswith(".yaml") and copy == os.path.basename(copy):
            return copy
    return None


def finite_json(document: Any) -> Any:
    """``document`` with every non-finite float (NaN, +-Infinity) replaced by ``None``.

    Parameters
    ----------
    document
        JSON-ready data (dicts, lists, tuples, numbers, strings).

    Returns
    -------
    Any
        The same data, strict-JSON ready: ``json.dumps(..., allow_nan=False)``
        accepts it.
    """
    if isinstance(document, float):
        return document if math.isfinite(document) else None
    if isinstance(document, dict):
        return {key: finite_json(value) for key, value in document.items()}
    if isinstance(document, list | tuple):
        return [finite_json(value) for value in document]
    if hasattr(document, "dtype") and hasattr(document, "item"):  # a numpy scalar
        return finite_json(document.item())
    return document


def dumps(document: Any) -> str:
    """Strict JSON text of ``document`` (indented, non-finite numbers as ``null``)."""
    return json.dumps(finite_json(document), indent=2, allow_nan=False) + "\n"


def write_json(path: str, document: Any) -> None:
    """Write strict JSON atomically (temporary file in the same folder, then rename)."""
    write_text(path, dumps(document))


def _existing_ancestor(path: str) -> str:
    """The nearest existing folder or file at or above ``path``."""
    current = os.path.abspath(path)
    while not os.path.lexists(current):
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    return current


def _probe_folder(folder: str, option: str, target: str) -> None:
    """Refuse ``target`` when nothing can be created in ``folder`` (its existing ancestor)."""
    if not os.path.isdir(folder):
        raise InputError(option, f"cannot write {target}: {folder} is not a folder")
    try:
        probe = tempfile.mkdtemp(dir=folder, prefix=".probe-")
    except OSError as exc:
        raise InputError(
            option, f"cannot write {target}: nothing can be created in {folder} ({exc.strerror})"
        ) from None
    os.rmdir(probe)


def check_output_folder(path: str, option: str = "--out", *, run: bool = False) -> None:
    """Refuse, before any work, an output folder that cannot be written.

    Parameters
    ----------
    path
        The folder (it or some of its parents may not exist yet).
    option
        The option that named it, for the error line.
    run
        A run folder replaced as a whole: refuse one that holds files a run
        does not write (they would be lost), naming one of them. The
        instance copy its plan.json or result.json records is a run's file.

    Raises
    ------
    InputError
        If ``path`` is a file, lies below a file, is in a folder where
        nothing can be created, or (``run``) holds foreign files.
    """
    if not path:
        raise InputError(option, "an empty path is not a folder")
    if os.path.lexists(path) and not os.path.isdir(path):
        raise InputError(option, f"{path} exists and is not a folder")
    if os.path.isdir(path):
        if run:
            foreign = sorted(set(os.listdir(path)) - RUN_FILES - {recorded_copy(path)})
            if foreign:
                raise InputError(
                    option,
                    f"{path} holds {foreign[0]!r}, which is not a run's output; "
                    "a run replaces its folder whole, so choose a new or empty folder",
                )
        parent = os.path.dirname(os.path.abspath(path))
        _probe_folder(parent if run else path, option, path)
        return
    _probe_folder(_existing_ancestor(path), option, path)


def check_output_file(path: str | None, option: str) -> None:
    """Refuse, before any work, an output file path that cannot be written.

    Raises
    ------
    InputError
        If ``path`` is a folder or a special file (a device, ``/proc``), lies
        below a file, or is in a folder where nothing can be created.
    """
    if not path:
        return
    if os.path.isdir(path):
        raise InputError(option, f"{path} is a folder, not a file")
    if os.path.lexists(path) and not os.path.isfile(path):
        raise InputError(option, f"{path} is not a regular file")
    _probe_folder(_existing_ancestor(os.path.dirname(os.path.abspath(path))), option, path)


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


def new_folder_mode() -> int:
    """The mode :func:`os.makedirs` gives a new folder: ``0o777`` less the umask (``0o755``)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o777 & ~mask


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

    Parameters
    ----------
    destination
        The output folder.
    replace
        Swap the staged folder in for the destination as a whole (a run's
        folder: no file of an earlier run survives beside the new ones);
        otherwise the staged files are moved into the destination, next to
        what it holds (the reports of ``pareto`` and ``sweep``, beside their
        resumable CSV).
    """

    def __init__(self, destination: str, replace: bool = False) -> None:
        self.destination = destination
        self.replace = replace
        parent = os.path.dirname(os.path.abspath(destination)) or "."
        os.makedirs(parent, exist_ok=True)
        self.staging = tempfile.mkdtemp(dir=parent, prefix=".staging-")

    def path(self, name: str) -> str:
        """Where to write ``name`` before the commit."""
        return os.path.join(self.staging, name)

    def write_json(self, name: str, document: Any) -> None:
        """Stage a strict JSON file."""
        self.write_text(name, dumps(document))

    def write_text(self, name: str, text: str) -> None:
        """Stage a text file."""
        with open(self.path(name), "w", encoding="utf-8") as stream:
            stream.write(text)

    def write_with(self, name: str, writer: Callable[[str], None]) -> None:
        """Stage a file written by ``writer(path)`` (e.g. a plot)."""
        writer(self.path(name))

    def commit(self) -> list[str]:
        """Move the staged files into the destination; returns their final paths."""
        names = sorted(os.listdir(self.staging))
        if self.replace:
            self._swap()
        else:
            os.makedirs(self.destination, exist_ok=True)
            for name in names:
                os.replace(os.path.join(self.staging, name), os.path.join(self.destination, name))
            shutil.rmtree(self.staging, ignore_errors=True)
        return [os.path.join(self.destination, name) for name in names]

    def _swap(self) -> None:
        """Put the staging folder in the destination's place (the old one goes away)."""
        # mkdtemp makes the folder 0o700; give it a new folder's mode (0o755 under umask 022).
        os.chmod(self.staging, new_folder_mode())
        old = None
        if os.path.isdir(self.destination):
            parent = os.path.dirname(os.path.abspath(self.destination))
            old = tempfile.mkdtemp(dir=parent, prefix=".replaced-")
            os.rmdir(old)
            os.rename(self.destination, old)
        try:
            os.rename(self.staging, self.destination)
        except BaseException:
            if old is not None:
                os.rename(old, self.destination)
            raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)

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
