"""An assembly's context rendered for its provider: the selected items, in position order, as
one provider-ready list (a text candidate becomes a developer message, an item stays as it is)
in the output format. An assembly's answer and a stored plan read back render through here,
so the two render alike."""

from __future__ import annotations

from collections.abc import Iterable

from app.domain.formats import Rendering, from_responses
from app.domain.items import Format, Item, developer_message

__all__ = ["render_context"]


def render_context(bodies: Iterable[tuple[Item | None, str | None]], fmt: Format) -> Rendering:
    """`bodies` (each selected item's item, else its text) rendered in `fmt`."""
    context = [
        item if item is not None else developer_message(content or "") for item, content in bodies
    ]
    return from_responses(context, fmt)
