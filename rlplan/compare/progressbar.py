"""A terminal progress bar (done / total, elapsed, ETA) shared by the benchmark commands."""

from __future__ import annotations

import sys
from typing import Any


def progress_bar(label: str, total: int, quiet: bool) -> Any:
    """A started rich progress bar on stderr with one task, or None off a terminal.

    Advance it with ``bar.advance(bar.task_ids[0])`` and ``bar.stop()`` it at the end.
    """
    if quiet or not sys.stderr.isatty() or total == 0:
        return None
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    progress = Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=Console(file=sys.stderr),
        transient=True,
    )
    progress.start()
    progress.add_task(label, total=total)
    return progress
