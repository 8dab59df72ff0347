"""A byte form for JSON-ready records that hold long columns: each column is written as a block
after a JSON header, so that reading it back makes one list from one block instead of parsing
a hundred thousand values (a checkpoint holds a few dozen columns of a hundred thousand values
each; `app.domain.checkpoint`), and a part few readers need is parsed only when read.

In the header:

- `{"$ints": [offset, count, code]}`: integers, in the narrowest of the `array` codes `b`,
  `h`, `i`, `q` that holds them all; with `"$nulls": [positions]` where nulls were among them;
- `{"$bools": [offset, count]}`: booleans, a byte each;
- `{"$codes": [offset, count, code], "$values": [...]}`: strings and nulls of few distinct
  values, each written as its index among `$values`;
- `{"$later": [offset, length]}`: a `Later` value, JSON of its own, parsed when first read.

Only values of dicts, and lists of dicts, are looked into, and only lists of `MIN_COLUMN`
values or more are written as columns.

Invariant: `decoded(encoded(record)) == record` for any record of JSON values whose integers
fit in 64 bits, once every `Later` is read (pinned by a property test); types stay (`1` and
`True` stay apart).
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping
from typing import Any

import orjson

__all__ = ["MIN_COLUMN", "Later", "decoded", "encoded"]

MAGIC = b"ctxcols2"
MIN_COLUMN = 32
_HEADER_BYTES = 4
_ALIGN = 8
_WIDTHS = (("b", 7), ("h", 15), ("i", 31), ("q", 63))
"""Array codes, each with the bits its signed values hold."""
_MAX_CODES = 256
_SWAPPED = array("q", [1]).tobytes()[0] != 1
"""Blocks are little-endian; a big-endian machine swaps them as it reads and writes."""


class Later:
    """A part of a record written apart and parsed only when first read (`value`)."""

    __slots__ = ("_data", "_value")

    def __init__(self, value: Any = None, *, data: bytes | None = None) -> None:
        self._value, self._data = value, data

    def value(self) -> Any:
        if self._data is not None:
            self._value, self._data = orjson.loads(self._data), None
        return self._value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Later) and self.value() == other.value()

    __hash__ = None  # type: ignore[assignment]


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

    def ints(values: list[int]) -> list[Any]:
        code = _width(values)
        assert code is not None  # checked before: every value fits in 64 bits
        return [block(_bytes(array(code, values))), len(values), code]

    def pack(value: Any) -> Any:
        if isinstance(value, Later):
            data = orjson.dumps(value.value())
            return {"$later": [block(data), len(data)]}
        if isinstance(value, dict):
            return {key: pack(item) for key, item in value.items()}
        if not isinstance(value, list):
            return value
        if len(value) >= MIN_COLUMN:
            kinds = set(map(type, value))
            if kinds == {bool}:
                return {"$bools": [block(bytes(value)), len(value)]}
            if kinds <= {int, type(None)} and int in kinds and _width(value) is not None:
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
                    return {"$codes": ints(codes), "$values": distinct}
        if value and isinstance(value[0], dict):
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

    def ints(offset: int, count: int, code: str) -> list[int]:
        column = array(code)
        column.frombytes(raw(offset, column.itemsize * count))
        if _SWAPPED:
            column.byteswap()
        return column.tolist()

    def unpack(value: Any) -> Any:
        if isinstance(value, dict):
            if "$ints" in value:
                column: list[Any] = ints(*value["$ints"])
                for at in value.get("$nulls", ()):
                    column[at] = None
                return column
            if "$bools" in value:
                offset, count = value["$bools"]
                return [byte == 1 for byte in raw(offset, count)]
            if "$codes" in value:
                return list(map(value["$values"].__getitem__, ints(*value["$codes"])))
            if "$later" in value:
                return Later(data=bytes(raw(*value["$later"])))
            return {key: unpack(item) for key, item in value.items()}
        if isinstance(value, list) and value and isinstance(value[0], dict):
            return [unpack(item) for item in value]
        return value

    record = unpack(orjson.loads(data[start : start + length]))
    if not isinstance(record, dict):
        raise ValueError("a column record holds an object")
    return record


def _width(values: list[Any]) -> str | None:
    """The narrowest array code that holds every integer of `values` (None: none does)."""
    if None in values:
        values = [value for value in values if value is not None]
    low, high = min(values, default=0), max(values, default=0)
    for code, bits in _WIDTHS:
        if -(2**bits) <= low and high < 2**bits:
            return code
    return None


def _bytes(column: array[Any]) -> bytes:
    if _SWAPPED:
        column.byteswap()
    return column.tobytes()
