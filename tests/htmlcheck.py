"""Parse a report.html and count what it holds (figures, tables, external references)."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser


@dataclass
class HtmlContents:
    """What :func:`parse_report` found."""

    images: list[str] = field(default_factory=list)
    tables: list[list[list[str]]] = field(default_factory=list)
    headings: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    text: str = ""


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.contents = HtmlContents()
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._heading: list[str] | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "img":
            self.contents.images.append(attributes.get("src") or "")
        for name in ("href", "src"):
            if attributes.get(name):
                self.contents.links.append(attributes[name])
        if tag == "table":
            self.contents.tables.append([])
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []
        elif tag in ("h1", "h2", "h3"):
            self._heading = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.contents.tables[-1].append(self._row)
            self._row = None
        elif tag in ("h1", "h2", "h3") and self._heading is not None:
            self.contents.headings.append("".join(self._heading).strip())
            self._heading = None

    def handle_data(self, data):
        self._text.append(data)
        if self._cell is not None:
            self._cell.append(data)
        if self._heading is not None:
            self._heading.append(data)


def parse_report(text: str) -> HtmlContents:
    """Parse ``text`` (an HTML document) with :mod:`html.parser`."""
    parser = _Parser()
    parser.feed(text)
    parser.close()
    parser.contents.text = "".join(parser._text)
    return parser.contents


def assert_self_contained(text: str, figures: int, tables: int) -> HtmlContents:
    """Assert the report parses, embeds ``figures`` PNGs as data URIs, holds at least
    ``tables`` tables and references nothing over the network."""
    contents = parse_report(text)
    assert text.lstrip().startswith("<!DOCTYPE html>")
    assert len(contents.images) == figures, contents.images
    assert all(src.startswith("data:image/png;base64,") for src in contents.images)
    assert all(len(src) > 200 for src in contents.images)
    assert len(contents.tables) >= tables
    assert all(not link.startswith(("http:", "https:", "//")) for link in contents.links)
    assert "http://" not in text and "https://" not in text
    return contents
