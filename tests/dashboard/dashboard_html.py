"""Reading a served page back as data: the text of every table cell, per section id."""

from __future__ import annotations

from html.parser import HTMLParser


class _Tables(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: dict[str, list[list[list[str]]]] = {}
        self.section = ""
        self.row: list[str] | None = None
        self.cell: list[str] | None = None
        self.elements: list[str] = []  # every start tag, to look for injected ones

    def handle_starttag(self, tag, attrs):
        self.elements.append(tag)
        if tag == "section":
            self.section = dict(attrs).get("id") or ""
        elif tag == "table":
            self.sections.setdefault(self.section, []).append([])
        elif tag == "tr":
            self.row = []
        elif tag in ("td", "th") and self.row is not None:
            self.cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None and self.row is not None:
            self.row.append(" ".join("".join(self.cell).split()))
            self.cell = None
        elif tag == "tr" and self.row is not None:
            self.sections[self.section][-1].append(self.row)
            self.row = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def parse(html: str) -> _Tables:
    parser = _Tables()
    parser.feed(html)
    parser.close()
    return parser


def table(html: str, section: str, index: int = 0) -> list[list[str]]:
    """Rows (header first) of the `index`-th table in `<section id=section>`."""
    return parse(html).sections[section][index]
