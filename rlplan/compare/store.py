"""The results file: one CSV row per finished cell, appended as it finishes.

A crash or Ctrl-C loses nothing already written, and a rerun skips the cells
the file already holds. Incumbent histories go to ``histories.jsonl`` beside
it. ``gap_to_best_bound`` is filled in when the summary is written.
"""

from __future__ import annotations

import csv
import json
import math
import os

from rlplan.compare.csvlog import CsvLog
from rlplan.outputs.files import finite_json

COLUMNS = (
    "instance",
    "solver",
    "repeat",
    "seed",
    "status",
    "step_time_s",
    "makespan_s",
    "bound_makespan_s",
    "gap",
    "gap_to_best_bound",
    "wall_time_s",
    "time_to_first_plan_s",
    "time_to_1pct_s",
    "message",
)


class ResultStore:
    """Append-only results of a benchmark folder."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.csv_path = os.path.join(folder, "results.csv")
        self.history_path = os.path.join(folder, "histories.jsonl")
        os.makedirs(folder, exist_ok=True)
        # Drops a row a crash cut short (a last line without its newline, or
        # with the wrong number of fields) so that appended rows start on a
        # line of their own; raises for a file with another header.
        self.repaired = CsvLog(self.csv_path, COLUMNS).repaired
        _drop_torn_line(self.history_path)

    def records(self) -> list[dict]:
        """Every finished cell, with numbers parsed and its incumbent history attached."""
        if not os.path.exists(self.csv_path):
            return []
        histories = {}
        if os.path.exists(self.history_path):
            with open(self.history_path, encoding="utf-8") as handle:
                for line in handle:
                    try:
                        item = json.loads(line)
                    except json.JSONDecodeError:
                        continue  # a line cut by a crash
                    histories[(item["instance"], item["solver"], item["repeat"])] = item["history"]
        rows = []
        with open(self.csv_path, newline="", encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                if None in row or None in row.values() or row.get("status") in (None, ""):
                    continue  # a row cut by a crash
                try:
                    parsed = {key: _parse(key, value) for key, value in row.items()}
                except ValueError:
                    continue  # a row garbled by a crash: the cell is solved again
                parsed["history"] = histories.get(
                    (parsed["instance"], parsed["solver"], parsed["repeat"]), []
                )
                rows.append(parsed)
        return rows

    def finished(self) -> set[tuple[str, str, int]]:
        """Keys (instance, solver, repeat) already in the file."""
        return {(r["instance"], r["solver"], r["repeat"]) for r in self.records()}

    def append(self, record: dict) -> None:
        """Append one finished cell and flush it to disk."""
        new = not os.path.exists(self.csv_path) or os.path.getsize(self.csv_path) == 0
        with open(self.csv_path, "a", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=COLUMNS, extrasaction="ignore")
            if new:
                writer.writeheader()
            writer.writerow({key: _format(record.get(key)) for key in COLUMNS})
            handle.flush()
            os.fsync(handle.fileno())
        with open(self.history_path, "a", encoding="utf-8") as handle:
            item = {key: record[key] for key in ("instance", "solver", "repeat")}
            item["history"] = record.get("history", [])
            handle.write(json.dumps(finite_json(item), allow_nan=False) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def rewrite(self, records: list[dict]) -> None:
        """Rewrite the file atomically (to fill in computed columns)."""
        temporary = self.csv_path + ".tmp"
        with open(temporary, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=COLUMNS, extrasaction="ignore")
            writer.writeheader()
            for record in records:
                writer.writerow({key: _format(record.get(key)) for key in COLUMNS})
        os.replace(temporary, self.csv_path)


def _drop_torn_line(path: str) -> None:
    """Cut a text file after its last newline (a line a crash left unfinished)."""
    if not os.path.exists(path):
        return
    with open(path, "rb+") as handle:
        data = handle.read()
        if data and not data.endswith(b"\n"):
            handle.truncate(data.rfind(b"\n") + 1)


_INTS = {"repeat", "seed"}
_FLOATS = {
    "step_time_s",
    "makespan_s",
    "bound_makespan_s",
    "gap",
    "gap_to_best_bound",
    "wall_time_s",
    "time_to_first_plan_s",
    "time_to_1pct_s",
}


def _parse(key: str, value: str):
    if key in _INTS:
        return int(value)
    if key in _FLOATS:
        return None if value == "" else float(value)
    return value


def _format(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)
