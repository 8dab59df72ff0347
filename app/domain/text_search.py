"""Many strings searched for at once in a text (Aho-Corasick): one pass over the text finds
every occurrence of every one of them, overlapping occurrences included, however many there
are. The compaction's name trail and the next-action grader search this way, never once per
string."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import ahocorasick  # type: ignore[import-not-found]  # a compiled module without stubs

__all__ = ["Strings"]


class Strings:
    """A set of non-empty strings, searched for all at once."""

    def __init__(self, strings: Iterable[str]) -> None:
        self._automaton = ahocorasick.Automaton()
        for string in strings:
            self._automaton.add_word(string, string)
        self._empty = len(self._automaton) == 0
        if not self._empty:
            self._automaton.make_automaton()

    def within(self, text: str) -> set[str]:
        """Every one of the strings that occurs in `text`."""
        return {string for _, string in self.occurrences(text)}

    def occurrences(self, text: str) -> Iterator[tuple[int, str]]:
        """Each occurrence in `text`, as (index of its last character, the string)."""
        if self._empty:
            return iter(())
        found: Iterator[tuple[int, str]] = self._automaton.iter(text)
        return found
