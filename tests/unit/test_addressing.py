"""Candidate bodies by digest: a stored request reads back as received, to the key order."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from app.domain.addressing import (
    ADDRESSED,
    MIN_ADDRESSED_BYTES,
    address_bodies,
    addressed_digests,
    restore_bodies,
)

BIG = "x" * MIN_ADDRESSED_BYTES


def test_large_bodies_are_named_by_digest_and_read_back_in_place() -> None:
    item = {"type": "message", "role": "user", "content": BIG}
    request: dict[str, Any] = {
        "session_id": "s",
        "sources": [
            {
                "source": "files",
                "items": [
                    {"id": "a", "content": BIG, "relevance": 0.5},
                    {"id": "b", "content": "small"},
                    {"item": item, "id": "c"},
                    {"id": "d", "content": BIG},
                ],
            }
        ],
        "budget": {"max_tokens": 100},
    }
    addressed = address_bodies(request)
    stored = json.loads(json.dumps(addressed.stored))  # as the column keeps it
    specs = stored["request"]["sources"][0]["items"]
    assert stored[ADDRESSED] == [[0, 0, "content"], [0, 2, "item"], [0, 3, "content"]]
    assert specs[1] == {"id": "b", "content": "small"}
    assert specs[0]["content"] == specs[3]["content"]  # one body, one digest
    assert len(addressed.bodies) == 2
    assert addressed_digests(stored) == set(addressed.bodies)
    assert json.dumps(restore_bodies(stored, addressed.bodies)) == json.dumps(request)
    assert request["sources"][0]["items"][0]["content"] == BIG  # the request is not changed


def test_a_text_and_an_item_it_spells_are_two_bodies() -> None:
    """A text is hashed as its UTF-8, an item as its JSON: a text spelling an item's JSON is
    still another body, and each reads back as what it was."""
    item = {"type": "message", "text": BIG}
    request = {
        "sources": [
            {
                "source": "s",
                "items": [
                    {"id": "text", "content": json.dumps(item, separators=(",", ":"))},
                    {"id": "item", "item": item},
                ],
            }
        ]
    }
    addressed = address_bodies(request)
    stored = json.loads(json.dumps(addressed.stored))
    assert len(addressed.bodies) == 2
    assert json.dumps(restore_bodies(stored, addressed.bodies)) == json.dumps(request)


def test_a_request_without_large_bodies_is_stored_as_received() -> None:
    request = {"sources": [{"source": "s", "items": [{"id": "a", "content": "hi"}]}]}
    addressed = address_bodies(request)
    assert (addressed.stored, addressed.bodies) == (request, {})
    assert addressed_digests(request) == set()
    assert restore_bodies(request, {}) is request


_BODIES = st.one_of(
    st.text(max_size=2 * MIN_ADDRESSED_BYTES),
    st.fixed_dictionaries({"type": st.just("message"), "text": st.text(max_size=400)}),
)


@given(st.lists(st.lists(_BODIES, max_size=4), max_size=3))
def test_every_request_reads_back_exactly(sources: list[list[Any]]) -> None:
    request = {
        "sources": [
            {
                "source": f"s{n}",
                "items": [
                    {"id": str(i), "item" if isinstance(body, dict) else "content": body}
                    for i, body in enumerate(bodies)
                ],
            }
            for n, bodies in enumerate(sources)
        ]
    }
    addressed = address_bodies(request)
    stored = json.loads(json.dumps(addressed.stored))
    assert json.dumps(restore_bodies(stored, addressed.bodies)) == json.dumps(request)
