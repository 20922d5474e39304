"""A page's elements as Python sees them: tag, attributes and text (children's text included), for tests
that read the DOM a browser built."""

from __future__ import annotations

from html.parser import HTMLParser

VOID = ("meta", "br", "img", "link", "input")


class Elements(HTMLParser):
    """Every element with its attributes and its text (children's text included)."""

    def __init__(self, html: str = "") -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, dict[str, str], list[str]]] = []
        self.open: list[tuple[str, dict[str, str], list[str]]] = []
        if html:
            self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element: tuple[str, dict[str, str], list[str]] = (tag, {k: v or "" for k, v in attrs}, [])
        for outer in self.open:  # a cell boundary separates words
            outer[2].append(" ")
        self.found.append(element)
        if tag not in VOID:
            self.open.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, {k: v or "" for k, v in attrs}, []))

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        while self.open:
            if self.open.pop()[0] == tag:
                break

    def handle_data(self, data: str) -> None:
        for element in self.open:
            element[2].append(data)

    def select(self, tag: str, cls: str | None = None) -> list[tuple[dict[str, str], str]]:
        """Elements of ``tag`` (with the class ``cls`` among theirs): attributes and whitespace-folded text."""
        return [(found, " ".join("".join(text).split())) for name, found, text in self.found
                if name == tag and (cls is None or cls in found.get("class", "").split())]

    def by_id(self, ident: str) -> tuple[str, dict[str, str], str]:
        """The element with id ``ident``: tag, attributes and folded text (KeyError when none)."""
        for name, found, text in self.found:
            if found.get("id") == ident:
                return name, found, " ".join("".join(text).split())
        raise KeyError(ident)
