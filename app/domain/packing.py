"""A lossless, compact form for lists of records that repeat their keys and most values.

A plan's entries and items are hundreds of dicts with the same keys, where most columns are
one value (`"layer": "recent"`), a counter (`"position": 7`) or a numbered name
(`"id": "history:7"`). `pack_records` stores each run of records with the same keys (in the
same order) once, column by column, each column in the shortest of these forms:

- `{"all": v}`: every record has the scalar `v`;
- `{"count": [first, step]}`: integers `first, first + step, ...`;
- `{"named": [prefix, first]}`: strings `prefix + str(first), prefix + str(first + 1), ...`;
- `{"mostly": v, "except": [[index, value], ...]}`: the scalar `v` but at the listed indexes;
- `{"values": [...]}`: the values as they are.

Invariant: `unpack_records(pack_records(r)) == r` with every key order, type and value kept,
so the records encode to the same JSON bytes. Only strings, integers, booleans and nulls are
folded, compared with their types (`1` and `True` stay apart); floats and containers are kept
as they are.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["pack_records", "unpack_records"]

_FOLDED = frozenset({str, int, bool, type(None)})
"""The types a column may fold. Floats are kept as they are: `0.0` and `-0.0` compare equal
but encode apart."""


def _column(values: list[Any]) -> dict[str, Any]:
    types = set(map(type, values))
    first = values[0]
    if len(types) == 1 and type(first) in _FOLDED:
        if values.count(first) == len(values):
            return {"all": first}
        if type(first) is int and len(values) > 1:
            step = values[1] - first
            if step and values == list(range(first, first + step * len(values), step)):
                return {"count": [first, step]}
        named = _named(values)
        if named is not None:
            return {"named": named}
    if not {bool, int} <= types:  # True == 1: a count would fold them together
        folded = [value for value in values if type(value) in _FOLDED]
        if folded:
            usual, times = Counter(folded).most_common(1)[0]
            if times * 2 > len(values):
                kind = type(usual)
                exceptions = [
                    [index, value]
                    for index, value in enumerate(values)
                    if type(value) is not kind or value != usual
                ]
                return {"mostly": usual, "except": exceptions}
    return {"values": values}


def _named(values: list[Any]) -> list[Any] | None:
    """[prefix, first] when the values (strings) are `prefix + str(first + i)`, else None."""
    first = values[0]
    if type(first) is not str:
        return None
    digits = len(first) - len(first.rstrip("0123456789"))
    if digits == 0:
        return None
    prefix, number = first[:-digits], int(first[-digits:])
    expected = [f"{prefix}{n}" for n in range(number, number + len(values))]
    return [prefix, number] if values == expected else None


def _values(column: Mapping[str, Any], count: int) -> list[Any]:
    if "all" in column:
        return [column["all"]] * count
    if "count" in column:
        first, step = column["count"]
        return list(range(first, first + step * count, step))
    if "named" in column:
        prefix, first = column["named"]
        return [f"{prefix}{first + i}" for i in range(count)]
    if "mostly" in column:
        values = [column["mostly"]] * count
        for index, value in column["except"]:
            values[index] = value
        return values
    return list(column["values"])


def pack_records(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """`records` as runs of records with the same keys, each stored column by column."""
    runs: list[dict[str, Any]] = []
    start = 0
    while start < len(records):
        keys = tuple(records[start])
        end = start + 1
        while end < len(records) and tuple(records[end]) == keys:
            end += 1
        # A run's records list their values in its keys' order: transposed in C.
        columns = zip(*(record.values() for record in records[start:end]), strict=True)
        runs.append(
            {
                "keys": list(keys),
                "count": end - start,
                "columns": [_column(list(column)) for column in columns],
            }
        )
        start = end
    return runs


def unpack_records(runs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The records `pack_records` packed, key order included."""
    records: list[dict[str, Any]] = []
    for run in runs:
        count = int(run["count"])
        if not run["keys"]:
            records.extend({} for _ in range(count))
            continue
        columns = [_values(column, count) for column in run["columns"]]
        rows = zip(*columns, strict=True)
        records.extend(dict(zip(run["keys"], row, strict=True)) for row in rows)
    return records
