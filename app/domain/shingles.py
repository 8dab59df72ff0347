"""Near-duplicate detection for retrieval candidates: Jaccard similarity of word shingles.

A text's shingles are its runs of `SHINGLE_WORDS` consecutive words, case-folded by `lower`; a
text shorter than one shingle is one shingle of all its words, and a text without words has
none (it is never a near-duplicate of anything).
"""

from __future__ import annotations

import re

__all__ = ["SHINGLE_WORDS", "ShingleIndex", "Shingles", "word_shingles"]

SHINGLE_WORDS = 5
Shingles = frozenset[tuple[str, ...]]

_WORD = re.compile(r"\w+")
_ASCII_NON_WORD = str.maketrans(
    {code: " " for code in range(128) if not (chr(code).isalnum() or chr(code) == "_")}
)
"""Every ASCII character `\\w` does not match, as a space: in ASCII text `\\w` is
[0-9A-Za-z_], so splitting the translated text gives the words `_WORD` finds, in a third of
its time (most retrieved text is ASCII)."""


def words_of(text: str) -> list[str]:
    """The words of `text` case-folded by `lower`: its runs of `\\w`."""
    lowered = text.lower()
    if lowered.isascii():
        return lowered.translate(_ASCII_NON_WORD).split()
    return _WORD.findall(lowered)


def word_shingles(text: str) -> Shingles:
    words = words_of(text)
    if len(words) < SHINGLE_WORDS:
        return frozenset([tuple(words)] if words else [])
    shifted = (words[offset:] for offset in range(SHINGLE_WORDS))
    return frozenset(zip(*shifted, strict=False))


class ShingleIndex:
    """Selected retrieval texts, searchable by Jaccard similarity of their word shingles.

    For a probe A, every member B and the union U of all members, J(A, B) ≤ |A ∩ B| / |A| ≤
    |A ∩ U| / |A|: a probe that shares too little with U is rejected after one set
    intersection. Otherwise each member is compared by set intersection. Both run in C: no
    Python loop ever walks the shingles (a text has hundreds).
    """

    def __init__(self, threshold: float) -> None:
        self._threshold = threshold
        self._members: list[Shingles] = []
        self._union: set[tuple[str, ...]] = set()

    def add(self, shingles: Shingles) -> None:
        self._members.append(shingles)
        self._union |= shingles

    def has_near_duplicate(self, shingles: Shingles) -> bool:
        if not shingles:
            return False
        # The bound is computed as the similarity is, so it never rejects a near-duplicate.
        if len(shingles & self._union) / len(shingles) < self._threshold:
            return False
        for member in self._members:
            common = len(shingles & member)
            if common and common / (len(shingles) + len(member) - common) >= self._threshold:
                return True
        return False
