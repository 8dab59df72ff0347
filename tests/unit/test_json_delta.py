"""A document stored as its difference from another: lossless to the byte, and small where the
two share most of their content."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from app.domain.json_delta import delta, patched
from app.domain.json_encoding import decode_json, encode_json

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=3),
    st.sampled_from([0.0, -0.0, 1.0, 2.5]),
    st.sampled_from(["a", "b", "history:1", ""]),
)
_KEYS = st.sampled_from(["a", "b", "c", "items", "{", "=", "-", "[", "+"])
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=6), st.dictionaries(_KEYS, inner, max_size=4)),
    max_leaves=24,
)


def _round_trip(base: Any, new: Any) -> bytes:
    stored = decode_json(encode_json(delta(base, new)))  # as it is stored and read back
    return encode_json(patched(base, stored))


@given(_JSON, _JSON)
def test_any_document_comes_back_byte_for_byte_from_any_base(base: Any, new: Any) -> None:
    assert _round_trip(base, new) == encode_json(new)


@given(_JSON, st.lists(st.tuples(st.sampled_from(["keep", "drop", "add"]), _JSON)))
def test_an_edited_document_comes_back_byte_for_byte(base: Any, edits: list[Any]) -> None:
    """Documents that share most of their content with the base, as consecutive plans do."""
    new = base
    for kind, value in edits:
        if isinstance(new, list):
            new = new[1:] if kind == "drop" else [*new, value] if kind == "add" else new
        elif isinstance(new, dict):
            new = {**new, "items": value} if kind == "add" else new
    assert _round_trip(base, new) == encode_json(new)


def test_a_plan_that_grew_by_two_items_is_stored_as_those_items() -> None:
    fingerprints = [[f"{n:016x}", 10 + n] for n in range(60)]
    base = {
        "plan_hash": "a" * 64,
        "budget": {"max_tokens": 184_000, "max_items": 12},
        "fingerprints": fingerprints,
    }
    new = {
        "plan_hash": "b" * 64,
        "budget": base["budget"],
        "fingerprints": [*fingerprints[1:], ["f" * 16, 7], ["e" * 16, 9]],
    }
    assert delta(base, new) == {
        "{": {
            "plan_hash": {"=": "b" * 64},
            "fingerprints": {"[": [[1, 59], [-1, 2]], "+": [["f" * 16, 7], ["e" * 16, 9]]},
        }
    }


def test_values_equal_in_python_but_not_in_json_are_kept_apart() -> None:
    base = [0.0, 1, True, {"a": 1, "b": 2}]
    new = [-0.0, True, 1, {"b": 2, "a": 1}]
    assert encode_json(patched(base, delta(base, new))) == encode_json(new)
    assert delta({"a": 1, "b": 2}, {"b": 2, "a": 1}) == {"=": {"b": 2, "a": 1}}


def test_a_document_unlike_its_base_is_stored_whole() -> None:
    assert delta([1, 2, 3], ["x", "y"]) == {"=": ["x", "y"]}
    assert delta({"a": 1}, [1]) == {"=": [1]}
    assert delta("a", "b") == {"=": "b"}
