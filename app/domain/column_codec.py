"""A byte form for JSON-ready records that hold long columns: each column is written as a block
after a JSON header, so that reading it back makes one list from one block instead of parsing
a hundred thousand values (a checkpoint holds a few dozen columns of a hundred thousand values
each; `app.domain.checkpoint`), and a part few readers need is parsed only when read.

In the header:

- `{"$ints": [offset, count, "q"]}`: integers, 64 bits each (32, `"i"`, for an `array("i")`),
  read back as an `array` of that code in place (one copy of the block, no list of a hundred
  thousand ints: the columns they restore are appended to and read by index, which an array
  does as a list does); with `"$nulls": [positions]` where nulls were among them, read back as
  a list;
- `{"$bools": [offset, count]}`: booleans, a byte each;
- `{"$codes": [offset, count, code], "$values": [...]}`: strings and nulls of few distinct
  values, each written as its index among `$values`;
- `{"$later": [offset, length]}`: a `Later` value, JSON of its own, parsed when first read;
- `{"$plain": value}`: a `Plain` value (data the record holds for a user, world state say),
  read back as it was written, never looked into;
- `{"$tail": [start, values]}` and `{"$delta": ...}`: the parts of a record written as a delta
  against an earlier one (`app.domain.record_delta`), read back as `Tail` and `Delta`.

A record's long columns are given as `Span`s (a prefix of a column that only grows), written as
the values they stand for when the record is encoded; the same record, kept, is what the next
delta is taken against (`app.domain.record_delta`).

Only values of dicts, and lists of dicts, are looked into, and only lists of `MIN_COLUMN`
values or more are written as columns.

Invariant: `decoded(encoded(record))` equals `record` for any record of JSON values whose
integers fit in 64 bits, once every `Later` is read and every array taken as a list (pinned by
a property test); types stay (`1` and `True` stay apart).
"""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

__all__ = ["MIN_COLUMN", "Ascends", "Delta", "Later", "Plain", "Span", "Tail", "decoded", "encoded"]

MAGIC = b"ctxcols2"
MIN_COLUMN = 32
_HEADER_BYTES = 4
_ALIGN = 8
_CODES = frozenset({"h", "i", "q"})
"""The array codes of blocks: 64-bit integers, 32-bit ones (an array of them written as it
is), and 16-bit indexes of coded strings."""
_MAX_CODES = 256
_SWAPPED = array("q", [1]).tobytes()[0] != 1
"""Blocks are little-endian; a big-endian machine swaps them as it reads and writes."""


class Later:
    """A part of a record written apart and parsed only when first read (`value`): from its
    JSON `data`, or by `compute` (a delta's part applied to its base's)."""

    __slots__ = ("_compute", "_data", "_value")

    def __init__(
        self,
        value: Any = None,
        *,
        data: bytes | None = None,
        compute: Callable[[], Any] | None = None,
    ) -> None:
        self._value, self._data, self._compute = value, data, compute

    def value(self) -> Any:
        if self._data is not None:
            self._value, self._data = orjson.loads(self._data), None
        elif self._compute is not None:
            self._value, self._compute = self._compute(), None
        return self._value


class Span:
    """The first `stop` values of `column` (from `start`), each mapped by `each` when given:
    a column that only grows (`app.domain.growing`), so that the values a span stands for never
    change, and a later span of the same column extends them."""

    __slots__ = ("column", "each", "start", "stop")

    def __init__(
        self,
        column: Sequence[Any],
        stop: int,
        *,
        each: Callable[[Any], Any] | None = None,
        start: int = 0,
    ) -> None:
        self.column, self.stop, self.each, self.start = column, stop, each, start

    def values(self) -> list[Any] | array[Any]:
        part = self.column[self.start : self.stop]
        if self.each is not None:
            return [self.each(value) for value in part]
        return part if isinstance(part, (list, array)) else list(part)


class Ascends:
    """Whether the first `stop` keys of `column` (a column that only grows) strictly ascend,
    none of them None; told by an earlier `Ascends` of the same column (`known`), the
    keys it did not read are all that is read."""

    __slots__ = ("column", "known", "stop")

    def __init__(self, column: Sequence[int | None], stop: int) -> None:
        self.column, self.stop = column, stop
        self.known: bool | None = None

    def value(self) -> bool:
        if self.known is None:
            self.known = _ascends(self.column[: self.stop])
        return self.known

    def extend(self, earlier: Ascends) -> None:
        """Learns the value from `earlier`, an `Ascends` of a prefix of the same keys."""
        if earlier.column is self.column and earlier.stop <= self.stop and earlier.stop:
            tail = self.column[earlier.stop - 1 : self.stop]
            self.known = earlier.value() and _ascends(tail)


class Plain:
    """A value written as JSON as it is, never looked into: data a record holds for a user,
    whose keys may be anything (even this module's `$` keys)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class Tail:
    """A delta's part: the values of a column from `start` on, its base holding `start`."""

    __slots__ = ("start", "values")

    def __init__(self, start: int, values: Any) -> None:
        self.start, self.values = start, values


class Delta:
    """A delta's part: a dict or list of the base's, each of its entries a delta in turn."""

    __slots__ = ("parts",)

    def __init__(self, parts: dict[str, Any] | list[Any]) -> None:
        self.parts = parts


def encoded(record: Mapping[str, Any]) -> bytes:
    """`record` in byte form (see the module docstring)."""
    blocks: list[bytes] = []
    offset = 0

    def block(data: bytes) -> int:
        nonlocal offset
        start = offset
        blocks.append(data + b"\0" * (-len(data) % _ALIGN))
        offset += len(blocks[-1])
        return start

    def ints(values: list[int] | array[int], code: str = "q") -> list[Any]:
        column = values if isinstance(values, array) else array(code, values)
        return [block(_bytes(column)), len(values), column.typecode]

    def pack(value: Any) -> Any:
        if isinstance(value, Span):
            value = value.values()
        elif isinstance(value, Ascends):
            return value.value()
        elif isinstance(value, Plain):
            return {"$plain": value.value}
        elif isinstance(value, Tail):
            return {"$tail": [value.start, pack(value.values)]}
        elif isinstance(value, Delta):
            return {"$delta": pack(value.parts)}
        if isinstance(value, Later):
            data = orjson.dumps(value.value(), default=_json_part)
            return {"$later": [block(data), len(data)]}
        if isinstance(value, dict):
            return {key: pack(item) for key, item in value.items()}
        if isinstance(value, array):
            return {"$ints": ints(value)} if len(value) >= MIN_COLUMN else value.tolist()
        if not isinstance(value, list):
            return value
        if len(value) >= MIN_COLUMN:
            kinds = set(map(type, value))
            if kinds == {bool}:
                return {"$bools": [block(bytes(value)), len(value)]}
            if kinds <= {int, type(None)} and int in kinds and _fits(value):
                if type(None) not in kinds:
                    return {"$ints": ints(value)}
                nulls = [at for at, item in enumerate(value) if item is None]
                return {
                    "$ints": ints([0 if item is None else item for item in value]),
                    "$nulls": nulls,
                }
            if kinds <= {str, type(None)}:
                distinct = list(dict.fromkeys(value))
                if len(distinct) <= _MAX_CODES:
                    index = {item: at for at, item in enumerate(distinct)}
                    codes = list(map(index.__getitem__, value))
                    return {"$codes": ints(codes, "h"), "$values": distinct}
        if value and isinstance(value[0], (dict, Delta)):
            return [pack(item) for item in value]
        return value

    header = orjson.dumps(pack(dict(record)))
    size = len(header).to_bytes(_HEADER_BYTES, "little")
    return MAGIC + size + header + b"".join(blocks)


def decoded(data: bytes) -> dict[str, Any]:
    """The record `data` holds (`encoded`), each `Later` part still to be parsed. Raises
    ValueError when `data` is not one."""
    if not data.startswith(MAGIC):
        raise ValueError("not a column record")
    start = len(MAGIC) + _HEADER_BYTES
    length = int.from_bytes(data[len(MAGIC) : start], "little")
    body = memoryview(data)[start + length :]

    def raw(offset: int, size: int) -> memoryview:
        if offset < 0 or size < 0 or offset + size > len(body):
            raise ValueError("a column runs past the end of the record")
        return body[offset : offset + size]

    def ints(offset: int, count: int, code: str) -> array[int]:
        if code not in _CODES:
            raise ValueError(f"a column of array code {code!r}")
        column = array(code)
        column.frombytes(raw(offset, column.itemsize * count))
        if _SWAPPED:
            column.byteswap()
        return column

    def unpack(value: Any) -> Any:
        if isinstance(value, dict):
            if "$ints" in value:
                if "$nulls" not in value:
                    return ints(*value["$ints"])
                column: list[Any] = ints(*value["$ints"]).tolist()
                for at in value["$nulls"]:
                    column[at] = None
                return column
            if "$bools" in value:
                offset, count = value["$bools"]
                return list(map(bool, raw(offset, count)))
            if "$codes" in value:
                return list(map(value["$values"].__getitem__, ints(*value["$codes"])))
            if "$later" in value:
                return Later(data=bytes(raw(*value["$later"])))
            if "$plain" in value:
                return value["$plain"]
            if "$tail" in value:
                start, values = value["$tail"]
                return Tail(start, unpack(values))
            if "$delta" in value:
                return Delta(unpack(value["$delta"]))
            return {key: unpack(item) for key, item in value.items()}
        if isinstance(value, list) and value and isinstance(value[0], dict):
            return [unpack(item) for item in value]
        return value

    record = unpack(orjson.loads(data[start : start + length]))
    if not isinstance(record, dict):
        raise ValueError("a column record holds an object")
    return record


def _json_part(value: Any) -> Any:
    """A record's own value inside a `Later` part, as JSON: a span as its values, a delta's
    parts as `$tail` and `$delta` objects (which the part's reader applies: a `Later` part
    holds no user data but the items of a `Span`, which are never looked into)."""
    if isinstance(value, Span):
        values = value.values()
        return values.tolist() if isinstance(values, array) else values
    if isinstance(value, array):
        return value.tolist()
    if isinstance(value, Tail):
        return {"$tail": [value.start, value.values]}
    if isinstance(value, Delta):
        return {"$delta": value.parts}
    raise TypeError(f"a record holds a {type(value).__name__}")


def _ascends(keys: Sequence[int | None]) -> bool:
    return None not in keys and all(a < b for a, b in itertools.pairwise(keys))  # type: ignore[operator]


def _fits(values: list[Any]) -> bool:
    """Whether every integer of `values` fits in 64 bits."""
    if None in values:
        values = [value for value in values if value is not None]
    return min(values, default=0) >= -(2**63) and max(values, default=0) < 2**63


def _bytes(column: array[Any]) -> bytes:
    if _SWAPPED:
        column.byteswap()
    return column.tobytes()
