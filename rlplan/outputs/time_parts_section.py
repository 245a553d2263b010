"""The "Where the time goes" section of report.md and report.html.

Per vertex of the plan, one run's time by part (``CostModel.time_parts``,
docs/cost-model.md#where-the-time-goes): a table of seconds and shares of the
run, a one-line summary in words, and in the HTML a horizontal stacked bar
per vertex drawn as inline SVG. Only parts that are non-zero in some vertex
get a column.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rlplan.outputs.html_page import HtmlReport
    from rlplan.rpeg.evaluation.problem import Problem

#: Every part the cost model names, in column order, with its label: compute,
#: then the rollout's phases, then communication (the experts' all-to-all
#: first), then colocation.
PART_LABELS = {
    "attention": "attention",
    "dense_ffn": "dense FFN",
    "experts": "experts",
    "head": "head",
    "non_gemm": "non-GEMM",
    "prefill": "prefill",
    "decode_compute_bound": "decode (compute-bound)",
    "decode_memory_bound": "decode (memory-bound)",
    "decode_overhead": "decode overhead",
    "all_to_all": "all-to-all",
    "tp_comm": "TP comm",
    "pp_comm": "PP comm",
    "dp_comm": "DP comm",
    "cp_comm": "CP comm",
    "colocation": "colocation",
}
#: The summary names the largest parts down to this share of the run, at most _NAMED.
_NAMED_SHARE, _NAMED = 0.01, 6
#: One colour per column: matplotlib's tab10 (the Gantt chart's palette), then
#: the light shades of tab20.
_PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
    "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5",
    "#c49c94", "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5",
)  # fmt: skip


@dataclass(frozen=True)
class VertexParts:
    """One vertex's run by part.

    Attributes
    ----------
    vertex
        The vertex name, e.g. ``actor.train``.
    run
        Seconds of one run (the placement table's run time).
    parts
        Seconds by part key, in the cost model's order.
    """

    vertex: str
    run: float
    parts: dict[str, float]

    def share(self, key: str) -> float:
        """Part ``key`` as a fraction of the run (0 for a part the vertex has not)."""
        return self.parts.get(key, 0.0) / self.run if self.run > 0 else 0.0


@dataclass(frozen=True)
class TimePartsSection:
    """The section's content, shared by report.md and report.html.

    Attributes
    ----------
    columns
        Part keys non-zero in some vertex, in :data:`PART_LABELS` order
        (keys the cost model adds beyond it last, in their order).
    rows
        One entry per vertex of the plan, in template order.
    """

    columns: tuple[str, ...]
    rows: tuple[VertexParts, ...]


def time_parts_section(problem: Problem, plan) -> TimePartsSection:
    """Every vertex of ``plan`` with its run time by part (:class:`TimePartsSection`)."""
    directory = problem.directory.for_plan(plan)
    rows = []
    for index, (vertex, placement) in enumerate(
        zip(directory.template.vertices, plan.placements, strict=True)
    ):
        shape, strategy = placement.block.extent, placement.strategy
        run = directory.candidate(index, shape, strategy).time
        parts = dict(directory.cost_of(shape).time_parts(vertex, shape, strategy))
        rows.append(VertexParts(vertex.name, run, parts))
    return TimePartsSection(_columns(rows), tuple(rows))


def _columns(rows: list[VertexParts]) -> tuple[str, ...]:
    """The part keys non-zero in some row: known ones in label order, then the others."""
    used = [key for row in rows for key, value in row.parts.items() if value != 0]
    known = [key for key in PART_LABELS if key in used]
    return (*known, *dict.fromkeys(key for key in used if key not in PART_LABELS))


def part_label(key: str) -> str:
    """The words of a part key (``dense_ffn`` -> ``dense FFN``)."""
    return PART_LABELS.get(key, key.replace("_", " "))


def part_cell(row: VertexParts, key: str) -> str:
    """A table cell: ``1.2345 s (62.0 %)``, or ``—`` for a part the vertex has not.

    Below a millisecond three significant digits (``3.21e-05 s``); a share
    below 0.05 % shows as ``< 0.1 %``.
    """
    value = row.parts.get(key, 0.0)
    if value == 0:
        return "—"
    shown = f"{value:.4f}" if abs(value) >= 1e-3 else f"{value:.3g}"
    percent = 100 * row.share(key)
    share = f"{percent:.1f} %" if abs(percent) >= 0.05 else "< 0.1 %"
    return f"{shown} s ({share})"


def summary_words(row: VertexParts) -> str:
    """``actor.train: 62 % experts, 18 % all-to-all, 9 % attention``.

    The largest parts, down to 1 % of the run and at most six of them.
    """
    named = sorted(
        (key for key in row.parts if row.share(key) >= _NAMED_SHARE),
        key=lambda key: -row.parts[key],
    )[:_NAMED]
    words = ", ".join(f"{100 * row.share(key):.0f} % {part_label(key)}" for key in named)
    return f"{row.vertex}: {words or 'no part above 1 %'}"


def table_rows(section: TimePartsSection) -> tuple[list[str], list[list[str]]]:
    """The header and the rows of the section's table (vertex, run time, one cell per part)."""
    header = ["vertex", "run time", *(part_label(key) for key in section.columns)]
    rows = [
        [row.vertex, f"{row.run:.4f} s", *(part_cell(row, key) for key in section.columns)]
        for row in section.rows
    ]
    return header, rows


_INTRO = (
    "Per vertex, one run's time by part (seconds and % of the run), from the cost model; "
    "the parts sum to the run time."
)


def time_parts_markdown(section: TimePartsSection) -> list[str]:
    """The section's lines of report.md: heading, table and the summary in words."""
    header, rows = table_rows(section)
    lines = ["", "## Where the time goes", "", _INTRO, ""]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    lines += [""] + [f"- {summary_words(row)}" for row in section.rows]
    return lines


def time_parts_html(report: HtmlReport, section: TimePartsSection) -> None:
    """The section in report.html: the table, the stacked bars and the summary."""
    header, rows = table_rows(section)
    report.heading("Where the time goes")
    report.paragraph(_INTRO)
    report.table(header, rows)
    report.figure_svg(
        stacked_bars_svg(section),
        "One bar per vertex: its run split by part, as shares of the run (run time at the right).",
    )
    report.items(summary_words(row) for row in section.rows)


def part_colours(section: TimePartsSection) -> dict[str, str]:
    """The colour of each column: fixed per known part (its place in
    :data:`PART_LABELS`), the palette's next ones for other keys."""
    known = list(PART_LABELS)
    extra = [key for key in section.columns if key not in PART_LABELS]
    return {
        key: _PALETTE[(known.index(key) if key in known else len(known) + extra.index(key)) % 20]
        for key in section.columns
    }


#: Bar chart geometry (pixels): label column, bar length, run-time column, rows.
_LABEL_W, _BAR_W, _RUN_W, _ROW_H, _BAR_H, _LEGEND_W = 170, 560, 100, 24, 16, 205


def stacked_bars_svg(section: TimePartsSection) -> str:
    """An inline ``<svg>``: per vertex a bar of its parts' shares, then a legend.

    Each segment's tooltip (``<title>``) gives the part's seconds and share.
    Every text is escaped; the markup references nothing outside itself.
    """
    colours = part_colours(section)
    width = _LABEL_W + _BAR_W + _RUN_W
    per_line = max(width // _LEGEND_W, 1)
    legend_lines = -(-len(section.columns) // per_line)
    height = _ROW_H * (len(section.rows) + legend_lines) + _ROW_H // 2
    shapes = []
    for index, row in enumerate(section.rows):
        y = index * _ROW_H + (_ROW_H - _BAR_H) // 2
        shapes.append(_text(4, y + _BAR_H - 3, row.vertex))
        x = float(_LABEL_W)
        for key in section.columns:
            length = max(row.share(key), 0.0) * _BAR_W
            if length <= 0:
                continue
            tip = f"{row.vertex} — {part_label(key)}: {part_cell(row, key)}"
            shapes.append(
                f'<rect x="{x:.2f}" y="{y}" width="{length:.2f}" height="{_BAR_H}" '
                f'fill="{colours[key]}"><title>{html.escape(tip)}</title></rect>'
            )
            x += length
        shapes.append(_text(_LABEL_W + _BAR_W + 6, y + _BAR_H - 3, f"{row.run:.4f} s"))
    top = len(section.rows) * _ROW_H + _ROW_H // 2
    for index, key in enumerate(section.columns):
        x = (index % per_line) * _LEGEND_W + 4
        y = top + (index // per_line) * _ROW_H
        shapes.append(f'<rect x="{x}" y="{y}" width="12" height="12" fill="{colours[key]}"/>')
        shapes.append(_text(x + 17, y + 11, part_label(key)))
    label = html.escape("Where the time goes, per vertex", quote=True)
    return (
        f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="{label}" font-size="12">' + "".join(shapes) + "</svg>"
    )


def _text(x: float, y: float, text: str) -> str:
    """An SVG ``<text>`` at (x, y), escaped."""
    return f'<text x="{x}" y="{y}">{html.escape(text)}</text>'
