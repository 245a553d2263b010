"""Self-contained HTML reports: one file, inline CSS, figures as base64 data URIs.

A report opens offline: it references nothing outside itself (no scripts,
fonts, style sheets or images by address). Every text is escaped.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Iterable, Sequence
from typing import Any

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif;
       margin: 2em auto; max-width: 72em; padding: 0 1em; color: #1b1b1b; line-height: 1.45; }
h1 { font-size: 1.5em; border-bottom: 2px solid #3465a4; padding-bottom: .2em; }
h2 { font-size: 1.2em; margin-top: 1.6em; color: #204a87; }
table { border-collapse: collapse; margin: .6em 0 1em; font-size: .9em; }
th, td { border: 1px solid #c8c8c8; padding: .25em .6em; text-align: left; vertical-align: top; }
th { background: #eef2f7; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.muted td { color: #777; }
figure { margin: 1em 0; }
figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { font-size: .85em; color: #555; }
p.note { font-size: .9em; color: #444; }
code { font-size: .92em; background: #f3f4f6; padding: 0 .2em; border-radius: 2px; }
ul { margin: .3em 0 1em; }
"""

#: A span of text in backticks, shown as code when asked.
_CODE = re.compile(r"`([^`]+)`")


def png_data_uri(png: bytes) -> str:
    """A ``data:image/png;base64,...`` URI of PNG bytes."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _text(text: str, code: bool) -> str:
    """``text`` escaped; with ``code``, its spans in backticks as ``<code>``."""
    escaped = html.escape(text)
    return _CODE.sub(r"<code>\1</code>", escaped) if code else escaped


def _cell(value: Any, code: bool = False) -> tuple[str, bool]:
    """A cell's escaped text and whether it is a number (right-aligned)."""
    if value is None:
        return "—", False
    if isinstance(value, bool):
        return ("yes" if value else "no"), False
    if isinstance(value, int | float):
        return html.escape(f"{value:.6g}" if isinstance(value, float) else str(value)), True
    return _text(str(value), code), False


class HtmlReport:
    """A report built section by section and rendered as one HTML document.

    Parameters
    ----------
    title
        The page title and first heading.
    """

    def __init__(self, title: str) -> None:
        self.title = title
        self._parts: list[str] = [f"<h1>{html.escape(title)}</h1>"]

    def heading(self, text: str, level: int = 2) -> None:
        """A section heading (``<h2>`` by default)."""
        self._parts.append(f"<h{level}>{html.escape(text)}</h{level}>")

    def paragraph(self, text: str, note: bool = False) -> None:
        """A paragraph of plain text (``note``: smaller, for explanations)."""
        css = ' class="note"' if note else ""
        self._parts.append(f"<p{css}>{html.escape(text)}</p>")

    def table(
        self,
        columns: Sequence[str],
        rows: Iterable[Sequence[Any]],
        muted: Iterable[bool] | None = None,
        code: bool = False,
    ) -> None:
        """A table with a header row.

        Parameters
        ----------
        columns
            Header cells.
        rows
            Cells per row: text, numbers (right-aligned, 6 significant digits
            for floats), booleans (yes/no) or None (shown as a dash).
        muted
            Per row, whether to grey it out (e.g. dominated points).
        code
            Show the spans of text cells in backticks as code (setting names).
        """
        rows = [list(row) for row in rows]
        flags = list(muted) if muted is not None else [False] * len(rows)
        lines = ["<table>", "<thead><tr>"]
        lines += [f"<th>{html.escape(str(c))}</th>" for c in columns]
        lines += ["</tr></thead>", "<tbody>"]
        for row, flag in zip(rows, flags, strict=True):
            cells = []
            for value in row:
                text, number = _cell(value, code)
                cells.append(f'<td class="num">{text}</td>' if number else f"<td>{text}</td>")
            css = ' class="muted"' if flag else ""
            lines.append(f"<tr{css}>{''.join(cells)}</tr>")
        lines += ["</tbody>", "</table>"]
        self._parts.append("\n".join(lines))

    def items(self, texts: Iterable[str], code: bool = False) -> None:
        """A bulleted list of plain texts (``code``: spans in backticks as code)."""
        entries = "".join(f"<li>{_text(text, code)}</li>" for text in texts)
        self._parts.append(f"<ul>{entries}</ul>")

    def pairs(self, items: Iterable[tuple[str, Any]]) -> None:
        """A two-column table of labelled values."""
        self.table(("", ""), [[label, value] for label, value in items])

    def figure(self, png: bytes, caption: str) -> None:
        """A PNG figure embedded as a data URI, with its caption as alt text too."""
        alt = html.escape(caption, quote=True)
        self._parts.append(
            f'<figure><img src="{png_data_uri(png)}" alt="{alt}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>"
        )

    def figure_svg(self, svg: str, caption: str) -> None:
        """An inline SVG figure; ``svg`` is markup its caller built and escaped."""
        self._parts.append(f"<figure>{svg}<figcaption>{html.escape(caption)}</figcaption></figure>")

    def figure_file(self, path: str, caption: str) -> None:
        """A PNG file embedded with :meth:`figure`."""
        with open(path, "rb") as handle:
            self.figure(handle.read(), caption)

    def render(self) -> str:
        """The whole document."""
        return (
            "<!DOCTYPE html>\n"
            '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{html.escape(self.title)}</title>\n"
            f"<style>{_STYLE}</style>\n</head>\n<body>\n"
            + "\n".join(self._parts)
            + "\n</body>\n</html>\n"
        )
