"""Retraction: hiding an item of the active history, and whatever it is paired with.

Invariants:

- A retraction never breaks pairing: retracting a call retracts its outputs, retracting an
  output retracts its call (and the call's other outputs), so the history stays one a provider
  accepts.
- The fact lists every seq it hides, in order; the fold hides exactly those
  (`app.domain.facts.fold`), so what the caller is told was hidden is what disappears.
- Every refusal is a conflict with the session's state, never a malformed request: the session
  itself was found.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.domain.errors import AlreadyRetracted, NothingToRetract, NotInActiveHistory
from app.domain.facts.fold import ActiveHistory
from app.domain.facts.kinds import HARNESS, RETRACTION_FACT, NewFact
from app.domain.items import Item
from app.domain.normalize import answer_key, call_key


@dataclass(frozen=True)
class Retraction:
    """A retraction to append, and the items it hides as the log holds them."""

    fact: NewFact
    hidden: tuple[tuple[int, Item], ...]
    """(seq, item) of every hidden item, in seq order."""


def plan_retraction(active: ActiveHistory, seq: int | None) -> Retraction:
    """Hides item `seq` of the active history (the newest one it shows when `seq` is None, as a
    framework's `pop_item` asks), with what it is paired with: retracting a call retracts its
    outputs, retracting an output retracts its call (and the call's other outputs), so the
    history stays one a provider accepts. The fact lists every seq it hides.

    Every refusal is a conflict with the session's state (the session itself was found): no
    seq in an active history that shows no logged item (`NothingToRetract`), a seq already
    retracted, or one the active history does not show, past the log included.
    """
    position = {s: i for i, s in enumerate(active.seqs) if s is not None}
    if seq is None:
        if not position:
            raise NothingToRetract("the active history shows no logged item to retract")
        seq = max(position)
    if not 1 <= seq <= active.last_seq:
        raise NotInActiveHistory(f"session has no seq {seq} (its last is {active.last_seq})")
    if seq in active.retracted:
        raise AlreadyRetracted(f"seq {seq} is already retracted", details={"seq": seq})
    if seq not in position:
        raise NotInActiveHistory(
            f"seq {seq} is not in the active history (compacted away, reset, or not an item "
            "the model sees)",
            details={"seq": seq},
        )
    item = active.items[position[seq]]
    hidden = {seq}
    # Paired as normalization pairs them (`call_key`, `answer_key`): a call with its outputs.
    if (key := call_key(item) or answer_key(item)) is not None:
        hidden |= {
            s
            for s, other in zip(active.seqs, active.items, strict=True)
            if s is not None and key in (call_key(other), answer_key(other))
        }
    record = {"type": RETRACTION_FACT, "seqs": sorted(hidden), "requested": seq}
    return Retraction(
        fact=NewFact(RETRACTION_FACT, record, 0, dict(HARNESS)),
        hidden=tuple((s, active.items[position[s]]) for s in sorted(hidden)),
    )
