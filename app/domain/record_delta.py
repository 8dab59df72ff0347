"""A record written as a delta against an earlier one of the same session, and a delta applied
to what the earlier one reads back as: a checkpoint (`app.domain.checkpoint`) is written whole
now and then, and as deltas between, so that what a write costs grows with what changed.

A record's long columns are `Span`s of columns that only grow (`app.domain.growing`): a value
at an index of such a column never changes, so where a record and the one before it hold spans
of the very same column object, the new one's values are the old one's and then those from the
old one's stop on (a `Tail`). Anything else at a key (a column of another epoch, a number, a
view of a new setting) is written whole.

Invariant: for records `new` and `old` (`old` kept as it was encoded, its spans' columns grown
only by appending since), `applied(decoded(encoded(old)), decoded(encoded(delta_of(new,
old))))` reads as `decoded(encoded(new))` (pinned by `tests/unit/test_checkpoint.py`, over
chains of deltas across every public run).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Mapping
from typing import Any

from app.domain.column_codec import Ascends, Delta, Later, Span, Tail

__all__ = ["applied", "delta_of"]


def delta_of(new: Mapping[str, Any], old: Mapping[str, Any]) -> dict[str, Any]:
    """`new` as a delta against `old` (see the module docstring)."""
    return {key: _delta(value, old.get(key)) for key, value in new.items()}


def _delta(new: Any, old: Any) -> Any:
    if isinstance(new, Span):
        if (
            isinstance(old, Span)
            and old.column is new.column
            and old.start == new.start == 0
            and old.stop <= new.stop
            and _same_mapping(old.each, new.each)
        ):
            return Tail(old.stop, Span(new.column, new.stop, each=new.each, start=old.stop))
        return new
    if isinstance(new, Ascends):
        if isinstance(old, Ascends):
            new.extend(old)
        return new
    if isinstance(new, Later) and isinstance(old, Later):
        inner, before = new.value(), old.value()
        if isinstance(inner, dict) and isinstance(before, dict):
            return Later(Delta(delta_of(inner, before)))
        return Later(_delta(inner, before))
    if isinstance(new, dict) and isinstance(old, dict):
        return Delta(delta_of(new, old))
    if (
        isinstance(new, list)
        and isinstance(old, list)
        and len(new) == len(old)
        and new
        and all(isinstance(entry, dict) for entry in new)
    ):
        return Delta([_delta(entry, before) for entry, before in zip(new, old, strict=True)])
    return new


def _same_mapping(a: Callable[[Any], Any] | None, b: Callable[[Any], Any] | None) -> bool:
    """Whether two spans' `each` are the same function (written by the same line of a record;
    over the same column, their closures belong to the column's owner)."""
    if a is None or b is None:
        return a is b
    return getattr(a, "__code__", a) is getattr(b, "__code__", b)


def applied(base: Mapping[str, Any], delta: Mapping[str, Any]) -> dict[str, Any]:
    """`delta` (decoded) applied to `base` (decoded, or itself applied): the record the delta
    was taken of. Raises ValueError where the delta does not fit its base (a chain whose links
    are not what they say)."""
    return {key: _applied(base.get(key), value) for key, value in delta.items()}


def _applied(base: Any, delta: Any) -> Any:
    if isinstance(delta, Tail):
        return _extended(base, delta.start, delta.values)
    if isinstance(delta, Delta):
        parts = delta.parts
        if isinstance(parts, dict) and isinstance(base, dict):
            return applied(base, parts)
        if isinstance(parts, list) and isinstance(base, list) and len(parts) == len(base):
            return [_applied(old, new) for old, new in zip(base, parts, strict=True)]
        raise ValueError("a checkpoint's delta does not fit its base")
    if isinstance(delta, Later):
        if not isinstance(base, Later):
            return delta
        return Later(compute=lambda: _applied(base.value(), _parts(delta.value())))
    return delta


def _parts(delta: Any) -> Any:
    """A `Later` part's delta as parsed from its JSON (`$tail` and `$delta` objects, see
    `app.domain.column_codec`), as the `Tail` and `Delta` the rest of a delta is read as."""
    if isinstance(delta, dict) and len(delta) == 1:
        if "$tail" in delta:
            start, values = delta["$tail"]
            return Tail(start, values)
        if "$delta" in delta and isinstance(delta["$delta"], dict):
            return Delta({key: _parts(value) for key, value in delta["$delta"].items()})
    return delta


def _extended(base: Any, start: int, values: Any) -> Any:
    """`base` (a column, `start` values long) followed by `values`."""
    if not isinstance(base, (list, array)) or len(base) != start:
        raise ValueError("a checkpoint's delta does not start where its base ends")
    if isinstance(base, array):
        try:
            same = isinstance(values, array) and values.typecode == base.typecode
            tail = values if same else array(base.typecode, values)
        except (TypeError, OverflowError):
            return [*base, *values]
        base.extend(tail)
        return base
    base.extend(values)
    return base
