"""Heading paths: the titles a paragraph sits under, outermost first ("3 Installazione", "3.2 Requisiti").

Titles nest by their numbers when both are numbered ("3" > "3.2" > "3.2.1", "A.1" under "A"), otherwise by font
size (a larger title encloses a smaller one); at the same size a section heading encloses a minor heading (a bold
label). A new title closes every open title that does not enclose it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# "3", "3.2", "3.2.1", "4.", "A.1" at the start of a title, followed by a space
_SECTION_NUMBER = re.compile(r"^((?:\d{1,3}|[A-Z])(?:\.\d{1,3})+|\d{1,3})\.?(?=\s)")
_SPACES = re.compile(r"\s+")


def section_number(title: str) -> tuple[str, ...] | None:
    """The title's section number as its parts ("3.2 Requisiti" -> ("3", "2")), None when it has none."""
    match = _SECTION_NUMBER.match(title)
    return tuple(match.group(1).split(".")) if match else None


@dataclass(frozen=True)
class Heading:
    """One title as the heading path sees it."""

    text: str  # whitespace collapsed to single spaces
    size: float  # font size (points)
    level: int  # 2 = section heading, 1 = minor heading (bold or upper-case label)
    number: tuple[str, ...] | None

    @classmethod
    def of(cls, text: str, size: float, level: int) -> "Heading":
        text = _SPACES.sub(" ", text).strip()
        return cls(text, round(size * 2) / 2, level, section_number(text))

    def encloses(self, other: "Heading") -> bool:
        """Whether `other` belongs under this heading."""
        if self.number and other.number:
            return len(self.number) < len(other.number) and other.number[:len(self.number)] == self.number
        if self.size != other.size:
            return self.size > other.size
        return self.level > other.level


class HeadingPath:
    """The open titles while a document is read in order."""

    def __init__(self) -> None:
        self._open: list[Heading] = []

    def enter(self, heading: Heading) -> tuple[str, ...]:
        """Open `heading` (closing the titles that do not enclose it); returns the path that ends with it."""
        while self._open and not self._open[-1].encloses(heading):
            self._open.pop()
        self._open.append(heading)
        return self.path

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(heading.text for heading in self._open)
