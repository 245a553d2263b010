"""A CSV file of results appended row by row, repaired when a crash cut its last row.

Each finished point is appended and flushed at once, so an interrupted run
loses nothing already finished; opening the file again drops a torn last row
(a line without its newline, or with the wrong number of fields) and rewrites
the file atomically without it.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Iterable, Sequence
from typing import Any

from rlplan.outputs.files import write_text
from rlplan.rpeg.errors import InputError


def format_value(value: Any) -> str:
    """A cell's text: empty for None or NaN, ``repr`` for floats (exact round trip)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def csv_text(columns: Sequence[str], rows: Iterable[dict[str, Any]]) -> str:
    """Rows as CSV text with a header (cells by :func:`format_value`)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({key: format_value(row.get(key)) for key in columns})
    return buffer.getvalue()


class CsvLog:
    """Rows of fixed ``columns`` in ``path``.

    Parameters
    ----------
    path
        The CSV file (created with its header on the first append).
    columns
        Column names, in order.

    Raises
    ------
    InputError
        If the file exists with another header.
    """

    def __init__(self, path: str, columns: Sequence[str]) -> None:
        self.path = path
        self.columns = tuple(columns)
        self.repaired = 0
        self._rows = self._read()

    def _read(self) -> list[dict[str, str]]:
        if not os.path.exists(self.path):
            return []
        with open(self.path, encoding="utf-8", newline="") as handle:
            text = handle.read()
        if not text:
            return []
        kept = text if text.endswith("\n") else text[: text.rfind("\n") + 1]
        reader = csv.reader(io.StringIO(kept, newline=""))
        header = next(reader, None)
        if header is None:
            return []
        if tuple(header) != self.columns:
            raise InputError(self.path, "exists with other columns; choose another --out folder")
        rows = []
        torn = kept != text
        for fields in reader:
            if len(fields) != len(self.columns):
                torn = True
                continue
            rows.append(dict(zip(self.columns, fields, strict=True)))
        if torn:
            self.repaired = 1
            self.rewrite(rows)
        return rows

    def rows(self) -> list[dict[str, str]]:
        """The complete rows in the file, as text."""
        return list(self._rows)

    def append(self, row: dict[str, Any]) -> None:
        """Append one row and flush it to disk (with the header if the file is new)."""
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        new = not os.path.exists(self.path) or os.path.getsize(self.path) == 0
        text = {key: format_value(row.get(key)) for key in self.columns}
        with open(self.path, "a", encoding="utf-8", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=self.columns, lineterminator="\n")
            if new:
                writer.writeheader()
            writer.writerow(text)
            handle.flush()
            os.fsync(handle.fileno())
        self._rows.append(text)

    def rewrite(self, rows: Iterable[dict[str, Any]]) -> None:
        """Replace the file's rows atomically."""
        texts = [{key: format_value(row.get(key)) for key in self.columns} for row in rows]
        write_text(self.path, csv_text(self.columns, texts))
        self._rows = texts
