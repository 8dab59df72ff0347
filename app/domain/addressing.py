"""Candidate bodies stored by content: a file a runtime offers on every call is kept once.

A stored plan keeps the request it answered. Its candidates' bodies (`content` or `item`) are
most of it, and the same bodies come back call after call, so a plan stores the request with
each body of at least `MIN_ADDRESSED_BYTES` replaced by its digest, beside the places it
replaced; the bodies are stored once per session under their digest (`app.storage.bodies`).

Invariants:
- `restore_bodies(address_bodies(r).stored, bodies)` is `r`, key order included, given the
  bodies `address_bodies` named (`body_digest`): a text's digest is the SHA-256 of its UTF-8
  after a NUL byte, which no JSON document holds, and an item's the SHA-256 of its JSON
  encoding, so two bodies share a digest only when they are the same (plans stored before
  texts were hashed so keep naming the bodies they were stored with);
- a stored request is told from a request as received by `ADDRESSED`, a key no request may
  carry (requests refuse unknown keys).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from app.domain.json_encoding import decode_json, encode_json

__all__ = [
    "ADDRESSED",
    "MIN_ADDRESSED_BYTES",
    "AddressedRequest",
    "EncodedBodies",
    "address_bodies",
    "addressed_digests",
    "body_digest",
    "restore_bodies",
]

ADDRESSED = "addressed_bodies"
"""The key under which a stored request lists where it holds digests: [source index, candidate
index, field] each, beside `request`."""
BODY_FIELDS = ("content", "item")
MIN_ADDRESSED_BYTES = 256
"""Smaller bodies (a text's UTF-8, an item's JSON) stay in the request: a digest and its place
cost about 60 bytes."""
DIGEST_CHARS = 32
_TEXT_TAG = b"\x00"


class EncodedBodies(Mapping[str, bytes]):
    """Bodies by digest, each kept as the request gave it and encoded as JSON (what the store
    keeps) only when read: the store reads only the bodies it does not hold yet, which for a
    runtime offering the same files call after call are none."""

    def __init__(self, values: dict[str, Any]) -> None:
        self._values = values

    def __getitem__(self, digest: str) -> bytes:
        return encode_json(self._values[digest])

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


@dataclass(frozen=True)
class AddressedRequest:
    """A request as a plan stores it, and the bodies it names by digest (their JSON)."""

    stored: dict[str, Any]
    bodies: Mapping[str, bytes]


def digest_of(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()[:DIGEST_CHARS]


def body_digest(body: str | dict[str, Any]) -> str | None:
    """The digest a plan names `body` (a candidate's `content` or `item`) by; None for a body
    under `MIN_ADDRESSED_BYTES`, which stays in the request. A text is hashed as its UTF-8, not
    its JSON: encoding thousands of texts as JSON cost more than hashing them."""
    if isinstance(body, str):
        text = body.encode()
        return None if len(text) < MIN_ADDRESSED_BYTES else digest_of(_TEXT_TAG + text)
    encoded = encode_json(body)
    return None if len(encoded) < MIN_ADDRESSED_BYTES else digest_of(encoded)


def address_bodies(request: dict[str, Any]) -> AddressedRequest:
    """`request` (as received, parsed) with each candidate body of `MIN_ADDRESSED_BYTES` or
    more replaced by its digest. `request` is not changed."""
    values: dict[str, Any] = {}
    places: list[list[Any]] = []
    sources = []
    for source_index, source in enumerate(request.get("sources") or ()):
        specs = []
        for spec_index, spec in enumerate(source["items"]):
            replaced = None
            for field in BODY_FIELDS:
                value = spec.get(field)
                if value is None or (digest := body_digest(value)) is None:
                    continue
                values[digest] = value
                places.append([source_index, spec_index, field])
                replaced = {**(replaced or spec), field: digest}
            specs.append(spec if replaced is None else replaced)
        sources.append({**source, "items": specs})
    if not places:
        return AddressedRequest(stored=request, bodies={})
    return AddressedRequest(
        stored={"request": {**request, "sources": sources}, ADDRESSED: places},
        bodies=EncodedBodies(values),
    )


def addressed_digests(stored: Mapping[str, Any]) -> set[str]:
    """The digests a stored request names (none for a request stored as received)."""
    if ADDRESSED not in stored:
        return set()
    sources = stored["request"]["sources"]
    return {sources[s]["items"][i][field] for s, i, field in stored[ADDRESSED]}


def restore_bodies(stored: dict[str, Any], bodies: Mapping[str, bytes]) -> dict[str, Any]:
    """The request as received: `stored` with every digest replaced by its body. A request
    stored as received is returned as it is. Raises KeyError for a digest `bodies` lacks."""
    if ADDRESSED not in stored:
        return stored
    request = stored["request"]
    sources = [{**source, "items": list(source["items"])} for source in request["sources"]]
    for source_index, spec_index, field in stored[ADDRESSED]:
        specs = sources[source_index]["items"]
        spec = specs[spec_index]
        specs[spec_index] = {**spec, field: decode_json(bodies[spec[field]])}
    return {**request, "sources": sources}
