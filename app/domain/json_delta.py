"""A JSON document stored as its difference from another: what a plan keeps when it is stored
against an earlier plan of its lineage (`app.storage.plans`).

Consecutive plans of one lineage show mostly the same items in the same order, and answer
mostly the same fields, so a plan written as its difference from an earlier one is a fraction
of its size. A delta is a JSON value of one of these forms:

- `{"=": value}`: the value itself;
- `{"{": {key: delta, ...}, "-": [key, ...]}`: an object, the base's keys but those listed under
  `"-"`, each key under `"{"` changed (or added, at the end) by its delta, in the base's order;
- `{"[": [[start, length], ...], "+": [value, ...]}`: an array made of runs, each `length`
  values of the base from `start` on, or with `start` -1 the next `length` values of `"+"`.

Invariant: `patched(base, delta(base, new))` encodes to exactly the bytes `new` encodes to,
for any JSON values `base` and `new`: values are compared by their encoding (`1`, `1.0` and
`true` stay apart, and so do `0.0` and `-0.0`), and an object whose keys would come back in
another order is stored whole. A delta is never much larger than its value: where a form
would be, the value is stored whole.
"""

from __future__ import annotations

from typing import Any

from app.domain.json_encoding import encode_json

__all__ = ["delta", "patched"]

_WHOLE, _OBJECT, _REMOVED, _ARRAY, _ADDED = "=", "{", "-", "[", "+"
_FROM_ADDED = -1


def delta(base: Any, new: Any) -> Any:
    """`new` as its difference from `base` (see the module docstring)."""
    found = _delta(base, new, encode_json(new))
    return {_WHOLE: new} if found is None else found


def patched(base: Any, stored: Any) -> Any:
    """The value `stored` (a `delta` against `base`) stands for."""
    if _WHOLE in stored:
        return stored[_WHOLE]
    if _OBJECT in stored:
        removed = set(stored.get(_REMOVED, ()))
        changes = stored[_OBJECT]
        value = {
            key: patched(inner, changes[key]) if key in changes else inner
            for key, inner in base.items()
            if key not in removed
        }
        value.update(
            (key, patched(None, change)) for key, change in changes.items() if key not in base
        )
        return value
    added = iter(stored[_ADDED])
    values: list[Any] = []
    for start, length in stored[_ARRAY]:
        if start == _FROM_ADDED:
            values.extend(next(added) for _ in range(length))
        else:
            values.extend(base[start : start + length])
    return values


def _delta(base: Any, new: Any, encoded: bytes) -> Any | None:
    """The smallest form for `new` against `base`, or None when `new` is best stored whole.
    `encoded`: `new`'s encoding."""
    if isinstance(base, dict) and isinstance(new, dict):
        found = _object_delta(base, new)
    elif isinstance(base, list) and isinstance(new, list) and base:
        found = _array_delta(base, new)
    else:
        return None
    if found is None or len(encode_json(found)) >= len(encoded):
        return None
    return found


def _object_delta(base: dict[str, Any], new: dict[str, Any]) -> dict[str, Any] | None:
    kept = [key for key in base if key in new]
    if kept + [key for key in new if key not in base] != list(new):
        return None  # the keys would come back in another order
    changes = {}
    for key, value in new.items():
        encoded = encode_json(value)
        if key not in base:
            changes[key] = {_WHOLE: value}
        elif encode_json(base[key]) != encoded:
            inner = _delta(base[key], value, encoded)
            changes[key] = {_WHOLE: value} if inner is None else inner
    found: dict[str, Any] = {_OBJECT: changes}
    if removed := [key for key in base if key not in new]:
        found[_REMOVED] = removed
    return found


def _array_delta(base: list[Any], new: list[Any]) -> dict[str, Any] | None:
    """Runs copied from `base` where `new` repeats it, in one pass: each value continues the
    current run if the base's next value is the same, else starts a run at that value's first
    place in the base, else is added."""
    base_keys = [encode_json(value) for value in base]
    first_at: dict[bytes, int] = {}
    for index, key in enumerate(base_keys):
        first_at.setdefault(key, index)
    runs: list[list[int]] = []
    added: list[Any] = []
    following: int | None = None  # the base index the current run would copy next
    for value in new:
        key = encode_json(value)
        if following is not None and following < len(base) and base_keys[following] == key:
            runs[-1][1] += 1
            following += 1
        elif (at := first_at.get(key)) is not None:
            runs.append([at, 1])
            following = at + 1
        else:
            if runs and runs[-1][0] == _FROM_ADDED:
                runs[-1][1] += 1
            else:
                runs.append([_FROM_ADDED, 1])
            added.append(value)
            following = None
    if not any(start != _FROM_ADDED for start, _ in runs):
        return None
    return {_ARRAY: runs, _ADDED: added}
