"""clear_tool_results: old tool outputs replaced by a placeholder naming the fact that holds
them whole.

Invariants: every call and message stays, and so do the newest `keep_recent` outputs and the
outputs of `exclude_tools`; a cleared output keeps its call_id, so pairing holds; an output is
cleared at most once (a placeholder is never cleared again) and only when it has a fact seq to
point at; outputs are cleared oldest first and only until the target is reached.
"""

from __future__ import annotations

from app.domain.compaction.context import Context, over_target
from app.domain.compaction.extraction import seq_range
from app.domain.compaction.model import DECLARATIONS, CompactionResult
from app.domain.history import HistoryEntry
from app.domain.items import CALL_TYPES, OUTPUT_TYPES, Item, item_type, visible_text

_CLEARED_PREFIX = "[tool output cleared by contextd"
_CLEARING_KEEPS = (
    "clear_tool_results keeps every call and message and the newest keep_recent outputs (summary"
    " or truncate go further)"
)


def cleared_output(entry: HistoryEntry, *, size: int, call_seq: int | None) -> HistoryEntry:
    """`entry`'s output replaced by a placeholder saying where it (and its call) is whole."""
    where = f"fact seq {entry.seq}" if entry.seq is not None else "the session log"
    call = f"; its call is fact seq {call_seq}" if call_seq is not None else ""
    text = f"{_CLEARED_PREFIX} to save context ({size} tokens); the full output is {where}{call}]"
    return HistoryEntry(entry.seq, {**entry.item, "output": text}, verbatim=False)


def is_cleared_output(item: Item) -> bool:
    """Whether `item` is a tool output clear_tool_results already replaced by a placeholder."""
    output = item.get("output")
    return isinstance(output, str) and output.startswith(_CLEARED_PREFIX)


def is_clearable(entry: HistoryEntry) -> bool:
    """Whether `entry` is a tool output not cleared yet with a fact seq that holds it whole."""
    return (
        item_type(entry.item) in OUTPUT_TYPES
        and entry.seq is not None
        and not is_cleared_output(entry.item)
    )


def clear(ctx: Context) -> CompactionResult:
    """clear_tool_results over `ctx`; a no-op when it fits or frees too little."""
    params = ctx.inp.params
    names: dict[str, tuple[str, int, int | None]] = {}
    for position, entry in enumerate(ctx.body):
        if item_type(entry.item) in CALL_TYPES:
            names[str(entry.item.get("call_id"))] = (
                str(entry.item.get("name", "local_shell")),
                position,
                entry.seq,
            )
    outputs = [p for p, e in enumerate(ctx.body) if item_type(e.item) in OUTPUT_TYPES]
    kept = set(outputs[-params.keep_recent :]) if params.keep_recent > 0 else set()
    body = list(ctx.body)
    freed = 0
    cleared: list[int] = []
    # Oldest first, and only as many as it takes to reach the target: what stays is read as is,
    # and the bytes before the first cleared output stay a reusable prefix.
    target = params.target_tokens
    unmasked = ctx.total((*ctx.invariants, *ctx.products, *body)) if target is not None else 0
    for position in outputs:
        if target is not None and unmasked - freed <= target:
            break
        entry = body[position]
        name, call_position, call_seq = names.get(str(entry.item.get("call_id")), ("", -1, None))
        if position in kept or name in params.exclude_tools or not is_clearable(entry):
            continue
        call = body[call_position] if call_position >= 0 else None
        new_call = None
        if params.clear_tool_inputs and call is not None:
            match call.item.get("type"):
                case "function_call":
                    new_call = HistoryEntry(call.seq, {**call.item, "arguments": "{}"}, False)
                case "custom_tool_call":
                    text = (
                        f"[tool input cleared by contextd; the full input is fact seq {call.seq}]"
                    )
                    new_call = HistoryEntry(call.seq, {**call.item, "input": text}, False)
                case _:
                    pass  # a shell action is the call itself: it is never blanked
        size = ctx.size(visible_text(entry.item))
        masked = cleared_output(
            entry, size=size, call_seq=call_seq if new_call is not None else None
        )
        gain = size - ctx.size(visible_text(masked.item))
        if call is not None and new_call is not None:
            gain += ctx.size(visible_text(call.item)) - ctx.size(visible_text(new_call.item))
        if gain > 0:
            body[position] = masked
            if new_call is not None:
                body[call_position] = new_call
            freed += gain
            cleared.append(position)
    if not cleared and target is not None and unmasked <= target:
        return ctx.noop(f"it already fits the target of {target} tokens")
    if not cleared:
        return ctx.noop(
            f"no tool output outside the newest {params.keep_recent} and the excluded tools "
            "has a body to clear"
        )
    if freed < params.clear_at_least_tokens:
        return ctx.noop(
            f"clearing would free {freed} tokens, fewer than clear_at_least_tokens "
            f"({params.clear_at_least_tokens})"
        )
    history = (*ctx.invariants, *ctx.products, *body)
    return CompactionResult(
        strategy="clear_tool_results",
        declares={key: list(value) for key, value in DECLARATIONS["clear_tool_results"].items()},
        tokens_before=ctx.tokens_before,
        tokens_after=ctx.total(history),
        history=history,
        summary=None,
        notes=None,
        working_set=(),
        loss_missing=(),
        fell_back=False,
        covered=seq_range([ctx.body[p] for p in cleared]),
        is_noop=False,
        over_target=over_target(
            ctx,
            target=target,
            parts=(
                ("the invariants", ctx.invariants),
                ("the earlier record", ctx.products),
                ("the calls, messages and kept outputs", body),
            ),
            keeps=_CLEARING_KEEPS,
        ),
    )
