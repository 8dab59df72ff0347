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
so the records encode to the same JSON bytes. Only scalars are ever folded, and compared with
their types (`1`, `1.0` and `True` stay apart); containers are kept as they are.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any

__all__ = ["pack_records", "unpack_records"]

_Scalar = str | int | float | bool | None
_SCALARS = (str, int, float, bool, type(None))


def _scalar_key(value: Any) -> tuple[type, _Scalar] | None:
    """A key equal for two values exactly when they encode to the same JSON; None for
    containers (never folded)."""
    return (type(value), value) if type(value) in _SCALARS else None


def _column(values: Sequence[Any]) -> dict[str, Any]:
    keys = [_scalar_key(value) for value in values]
    if keys[0] is not None and all(key == keys[0] for key in keys):
        return {"all": values[0]}
    if len(values) > 1 and all(type(value) is int for value in values):
        step = values[1] - values[0]
        if all(b - a == step for a, b in pairwise(values)):
            return {"count": [values[0], step]}
    named = _named(values)
    if named is not None:
        return {"named": named}
    counted = Counter(key for key in keys if key is not None)
    if counted:
        (kind, common), times = counted.most_common(1)[0]
        if times * 2 > len(values):
            usual = (kind, common)
            exceptions = [
                [index, value]
                for index, (value, key) in enumerate(zip(values, keys, strict=True))
                if key != usual
            ]
            return {"mostly": common, "except": exceptions}
    return {"values": list(values)}


def _named(values: Sequence[Any]) -> list[Any] | None:
    """[prefix, first] when the values are `prefix + str(first + i)`, else None."""
    first = values[0]
    if type(first) is not str:
        return None
    digits = len(first) - len(first.rstrip("0123456789"))
    if digits == 0:
        return None
    prefix, number = first[:-digits], int(first[-digits:])
    for offset, value in enumerate(values):
        if value != f"{prefix}{number + offset}" or type(value) is not str:
            return None
    return [prefix, number]


def _values(column: Mapping[str, Any], count: int) -> list[Any]:
    if "all" in column:
        return [column["all"]] * count
    if "count" in column:
        first, step = column["count"]
        return [first + step * i for i in range(count)]
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
        keys = list(records[start])
        end = start + 1
        while end < len(records) and list(records[end]) == keys:
            end += 1
        run = records[start:end]
        runs.append(
            {
                "keys": keys,
                "count": end - start,
                "columns": [_column([record[key] for record in run]) for key in keys],
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
