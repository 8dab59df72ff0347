"""The packed form of a plan's records: lossless to the byte, and compact where records repeat."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from app.domain.packing import pack_records, unpack_records

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-5, max_value=5),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-2, max_value=2),
    st.sampled_from(["a", "h:1", "h:2", "h:3", "h:01", "x0"]),
)
_VALUES = st.one_of(_SCALARS, st.lists(_SCALARS, max_size=2))
# Records of a few shapes, so that runs of the same keys (what packing folds) are common.
_RECORDS = st.lists(
    st.fixed_dictionaries({"id": _SCALARS, "n": _VALUES}, optional={"v": _SCALARS}), max_size=12
)


@given(_RECORDS)
def test_unpacking_gives_back_the_same_json_bytes(records: list[dict[str, Any]]) -> None:
    packed = json.loads(json.dumps(pack_records(records)))  # as it is stored and read back
    assert json.dumps(unpack_records(packed)) == json.dumps(records)


def test_runs_of_records_are_stored_once_per_key_and_column() -> None:
    entries = [
        {"id": f"history:{n}", "layer": "recent", "position": n + 1, "tokens": 10 + n % 3}
        for n in range(40)
    ]
    entries[7] = {**entries[7], "layer": "pinned"}
    lead = {"id": "elided", "content": "three facts not shown", "position": 0}
    packed = pack_records([lead, *entries])
    assert packed == [
        {
            "keys": ["id", "content", "position"],
            "count": 1,
            "columns": [{"all": "elided"}, {"all": "three facts not shown"}, {"all": 0}],
        },
        {
            "keys": ["id", "layer", "position", "tokens"],
            "count": 40,
            "columns": [
                {"named": ["history:", 0]},
                {"mostly": "recent", "except": [[7, "pinned"]]},
                {"count": [1, 1]},
                {"values": [10 + n % 3 for n in range(40)]},
            ],
        },
    ]
    assert unpack_records(packed) == [lead, *entries]


def test_values_that_compare_equal_but_encode_apart_are_kept_apart() -> None:
    records: list[dict[str, Any]] = [{"v": 1}, {"v": 1.0}, {"v": True}, {"v": 1}]
    assert json.dumps(unpack_records(pack_records(records))) == json.dumps(records)
    nested: list[dict[str, Any]] = [{"v": {"a": 1}}, {"v": {"a": 1.0}}]
    assert json.dumps(unpack_records(pack_records(nested))) == json.dumps(nested)
