"""The OpenAI Responses format, the service's canonical form.

- Reading is the identity: every item is kept, in order, each its own source.
- Writing keeps every item but reasoning another provider produced (`foreign_reasoning`): opaque
  reasoning only goes back to the provider that made it. OpenAI reasoning stays as it came: with
  its `id`, or without one as the Codex CLI sends it back in stateless use.
- Provider fields recorded by a read from another format are removed and reported dropped.
"""

from __future__ import annotations

from app.domain.formats.common import (
    Losses,
    Parsed,
    Rendering,
    foreign_fields,
    origin_of,
    without_origin,
)
from app.domain.items import Item, item_type


def read_responses(items: list[Item]) -> Parsed:
    return Parsed(list(items), [], list(range(len(items))))


def render_responses(items: list[Item]) -> Rendering:
    out: list[Item] = []
    losses = Losses()
    for index, item in enumerate(items):
        origin = origin_of(item)
        if item_type(item) == "reasoning" and origin:
            losses.exclude(index, item=item, reason="foreign_reasoning")
            continue
        if origin:
            losses.drop_fields(index, foreign_fields(origin))
        out.append(without_origin(item))
    return Rendering(out, None, losses.excluded, losses.dropped_fields, losses.placeholders)
