"""History normalization: repair a Responses item list so that a provider accepts it.

After `normalize_history`:

- every call that carries a call_id (`function_call`, `custom_tool_call`, `local_shell_call`) has
  exactly one output of its own family, placed after it, with only calls and outputs of the same
  call batch in between (a batch is a run of adjacent calls, interleaved with their outputs);
- every output that names a call_id (and is not server-executed) answers such a call;
- no system message, unknown or control item, non-object, or call without a call_id is left, and
  a `configuration_update` only when its metadata says the harness wrote it;
- no media part the model cannot read is left (each is replaced by a text placeholder in place);
- every tool output fits its truncation budget (see `truncation`);
- normalizing the result again returns the same items and an empty report (idempotence);
- the input is never mutated: a changed item is a new object, an unchanged item is returned as
  it came (shared, not copied, so callers treat items as immutable);
- every change is listed in the report, so an empty report means the items came back unchanged.

Families: `function_call` and `local_shell_call` are answered by `function_call_output`,
`custom_tool_call` by `custom_tool_call_output`; an output never answers a call of another family.
Server-executed outputs (`"execution": "server"`) stand alone: pairing neither moves, removes
nor counts them. A `local_shell_call` without a call_id stands alone too; a `function_call` or
`custom_tool_call` without a (string) call_id cannot be answered, and an output without one
answers nothing: both are excluded.

Steps, in order: admission → reorder and deduplicate outputs → synthesize missing outputs →
remove orphan outputs → strip unsupported media → truncate tool outputs.

Report indices: `excluded`, `removed_orphans` and `deduplicated_outputs` give `index` in the
input list, `reordered_outputs` gives `from_index` in the input list and `to_index` in the output
list, `synthesized_outputs` and `stripped_media` give `index` in the output list.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Container, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

from app.domain.items import (
    CALL_TYPES,
    OUTPUT_TYPES,
    CountTokens,
    Item,
    Refusal,
    admission_reason,
    item_tokens,
    item_type,
    malformation,
)
from app.domain.truncation import TruncationMode, TruncationPolicy, truncate_tool_output

__all__ = [
    "DEFAULT_MODALITIES",
    "DEFAULT_TRUNCATION_POLICY",
    "MEDIA_PLACEHOLDERS",
    "SYNTHETIC_OUTPUT_NAMESPACE",
    "SYNTHETIC_OUTPUT_TEXT",
    "CallKey",
    "DeduplicatedOutput",
    "ExcludedItem",
    "Modality",
    "NormalizeReport",
    "NormalizeResult",
    "NormalizedPart",
    "RemovedOrphan",
    "ReorderedOutput",
    "StrippedMedia",
    "SynthesizedOutput",
    "TruncatedOutput",
    "TruncationPolicy",
    "answer_key",
    "call_key",
    "find_pairing_violations",
    "normalize_history",
    "normalize_part",
    "synthetic_output_id",
]

Family = Literal["function", "custom"]
CallKey = tuple[Family, str]
MediaKind = Literal["image", "audio"]
Modality = Literal["text", "image", "audio"]
"""What a model reads; media of any other kind is replaced by its placeholder."""
ExclusionReason = (
    Refusal | Literal["call_without_call_id", "output_without_call_id", "duplicate_call_id"]
)

SYNTHETIC_OUTPUT_NAMESPACE = uuid.UUID("8a9fb583-5174-477f-82ff-9ad9c778f6c9")
"""UUIDv5 namespace of synthesized output ids. Changing it changes model-visible ids and so
invalidates every provider prompt cache that holds a synthesized output: never change it."""

DEFAULT_TRUNCATION_POLICY = TruncationPolicy()
DEFAULT_MODALITIES: frozenset[Modality] = frozenset({"text", "image"})
SYNTHETIC_OUTPUT_TEXT = "[no output recorded: the call was interrupted before it returned]"
MEDIA_PLACEHOLDERS: dict[MediaKind, str] = {
    "image": "[image omitted: this model does not accept image input]",
    "audio": "[audio omitted: this model does not accept audio input]",
}

_MEDIA_PART_TYPES: dict[MediaKind, str] = {"image": "input_image", "audio": "input_audio"}
_OUTPUT_TYPE_OF: dict[Family, str] = {
    "function": "function_call_output",
    "custom": "custom_tool_call_output",
}
_ID_PREFIX_OF: dict[Family, str] = {"function": "fco", "custom": "ctco"}
_JSON_KINDS: dict[type, str] = {
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


@dataclass(frozen=True)
class SynthesizedOutput:
    call_id: str
    id: str
    index: int


@dataclass(frozen=True)
class RemovedOrphan:
    call_id: str
    index: int


@dataclass(frozen=True)
class ReorderedOutput:
    call_id: str
    from_index: int
    to_index: int


@dataclass(frozen=True)
class DeduplicatedOutput:
    call_id: str
    index: int


@dataclass(frozen=True)
class StrippedMedia:
    index: int
    kind: MediaKind


@dataclass(frozen=True)
class TruncatedOutput:
    call_id: str | None
    original_tokens: int
    kept_tokens: int


@dataclass(frozen=True)
class ExcludedItem:
    index: int
    type: str
    reason: ExclusionReason
    detail: str | None = None
    """For a `malformed` item, what is wrong with it (`items.malformation`)."""

    @property
    def explained(self) -> str:
        """The reason, with its detail when there is one: `malformed (message without role)`."""
        return self.reason if self.detail is None else f"{self.reason} ({self.detail})"


@dataclass(frozen=True)
class NormalizeReport:
    """Every repair `normalize_history` made; see the module docstring for what indices mean."""

    synthesized_outputs: tuple[SynthesizedOutput, ...] = ()
    removed_orphans: tuple[RemovedOrphan, ...] = ()
    reordered_outputs: tuple[ReorderedOutput, ...] = ()
    deduplicated_outputs: tuple[DeduplicatedOutput, ...] = ()
    stripped_media: tuple[StrippedMedia, ...] = ()
    truncated_outputs: tuple[TruncatedOutput, ...] = ()
    excluded: tuple[ExcludedItem, ...] = ()

    def is_empty(self) -> bool:
        return not any(getattr(self, field.name) for field in fields(self))

    def as_dict(self) -> dict[str, list[dict[str, Any]]]:
        """JSON-ready, with all seven lists present even when empty."""
        return {
            field.name: [asdict(entry) for entry in getattr(self, field.name)]
            for field in fields(self)
        }


@dataclass(frozen=True)
class NormalizeResult:
    items: tuple[Item, ...]
    report: NormalizeReport


def synthetic_output_id(family: Family, *, call_item_id: str | None, call_id: str) -> str:
    """The id of the output synthesized for a call, the same on every run.

    Normalization runs on every request without storing what it synthesizes, so the id must be
    deterministic or each request would change the prompt and miss the provider's cache. It is
    derived from the call's item id; a call without one derives it from its call_id, under a
    distinct name (`call_id:` prefix) so that the two sources can never collide.
    """
    prefix = _ID_PREFIX_OF[family]
    name = f"{prefix}:{call_item_id}" if call_item_id else f"{prefix}:call_id:{call_id}"
    return f"{prefix}_{uuid.uuid5(SYNTHETIC_OUTPUT_NAMESPACE, name)}"


def call_key(item: Item) -> CallKey | None:
    """The pairing key of a call that can be answered, else None."""
    call_id = item.get("call_id")
    if not isinstance(call_id, str) or not call_id:
        return None
    match item_type(item):
        case "function_call" | "local_shell_call":
            return ("function", call_id)
        case "custom_tool_call":
            return ("custom", call_id)
        case _:
            return None


def answer_key(item: Item) -> CallKey | None:
    """The pairing key of an output that must answer a call, else None (it stands alone)."""
    call_id = item.get("call_id")
    if not isinstance(call_id, str) or not call_id or item.get("execution") == "server":
        return None
    match item_type(item):
        case "function_call_output":
            return ("function", call_id)
        case "custom_tool_call_output":
            return ("custom", call_id)
        case _:
            return None


def _metadata_at(
    item_metadata: Sequence[Mapping[str, Any] | None] | None, index: int | None
) -> Mapping[str, Any]:
    if item_metadata is None or index is None or index >= len(item_metadata):
        return {}
    metadata = item_metadata[index]
    return metadata if isinstance(metadata, Mapping) else {}


def normalize_history(
    items: Sequence[Item],
    *,
    count_tokens: CountTokens,
    input_modalities: frozenset[str] = DEFAULT_MODALITIES,
    truncation: TruncationPolicy = DEFAULT_TRUNCATION_POLICY,
    item_metadata: Sequence[Mapping[str, Any] | None] | None = None,
    seqs: Sequence[int | None] | None = None,
) -> NormalizeResult:
    """Repair `items` so that the module invariants hold, and report every repair.

    `item_metadata[i]` describes `items[i]`: `harness_authored` (admits a configuration update)
    and `truncation_token_limit` (the tokens of text kept of that tool output, replacing the
    policy and its margin; the marker comes on top, as for the policy's limit). `seqs[i]` is
    the fact `items[i]` is in a session's log: a truncated output names it, so that the model
    knows where to read the whole output. Bad input never raises: it is excluded or passed
    through, and reported.
    """
    part = normalize_part(
        list(enumerate(items)),
        count_tokens=count_tokens,
        input_modalities=input_modalities,
        truncation=truncation,
        item_metadata=item_metadata,
        seqs=seqs,
    )
    return NormalizeResult(items=part.items, report=part.report)


@dataclass(frozen=True)
class NormalizedPart:
    """Part of a history normalized (`normalize_part`), with what an incremental normalizer
    needs to know where the part can be cut.

    `sources[k]` is the input index `items[k]` came from (None: synthesized);
    `truncated_at[n]` the position in `items` of the output `report.truncated_outputs[n]` cut.
    `answered[i]`, for the input index `i` of each call that owns its key, is the input index of
    its answer (None: synthesized). `displaced` lists, for each answer moved to its call batch's
    end, the input index of that call and of the item that closed the batch (None: the batch
    reached the end of the part, so items appended later could still join it).
    """

    items: tuple[Item, ...]
    sources: tuple[int | None, ...]
    report: NormalizeReport
    truncated_at: tuple[int, ...]
    owners: Mapping[CallKey, int]
    answered: Mapping[int, int | None]
    displaced: tuple[tuple[int, int | None], ...]


def normalize_part(
    entries: Sequence[tuple[int, Any]],
    *,
    count_tokens: CountTokens,
    input_modalities: frozenset[str] = DEFAULT_MODALITIES,
    truncation: TruncationPolicy = DEFAULT_TRUNCATION_POLICY,
    item_metadata: Sequence[Mapping[str, Any] | None] | None = None,
    seqs: Sequence[int | None] | None = None,
    settled_keys: Container[CallKey] = frozenset(),
    output_offset: int = 0,
) -> NormalizedPart:
    """`normalize_history` of the items of `entries`, each given with its index in the whole
    history (what the report, `item_metadata` and `seqs` go by), after a settled part that
    owns and answered every key of `settled_keys` and whose normalized items number
    `output_offset` (what the report's output indices start from).

    A call under a settled key is a second call under it, and an output for one a second
    output: both are reported as they would be in the whole history.
    """
    # Sizes of the same text are asked for more than once (a cut output is measured by the
    # truncation, then again for the report); each text is counted once.
    count = functools.cache(count_tokens)

    # Admission.
    excluded: list[ExcludedItem] = []
    admitted: list[tuple[int, Item]] = []
    for index, item in entries:
        if not isinstance(item, dict):
            kind = _JSON_KINDS.get(type(item), type(item).__name__)
            excluded.append(ExcludedItem(index=index, type=kind, reason="not_an_object"))
            continue
        kind = item_type(item)
        # Only a configuration update asks who wrote it.
        harness_authored = (
            kind == "configuration_update"
            and _metadata_at(item_metadata, index).get("harness_authored") is True
        )
        reason: ExclusionReason | None = admission_reason(item, harness_authored=harness_authored)
        if (
            reason is None
            and kind in ("function_call", "custom_tool_call")
            and call_key(item) is None
        ):
            # No output could ever answer it. It stays in the log; only this projection drops it.
            reason = "call_without_call_id"
        if (
            reason is None
            and kind in OUTPUT_TYPES
            and item.get("execution") != "server"
            and answer_key(item) is None
        ):
            # It answers nothing a provider could name: sent alone it is refused.
            reason = "output_without_call_id"
        if reason is None:
            admitted.append((index, item))
        else:
            detail = malformation(item, kind) if reason == "malformed" else None
            excluded.append(ExcludedItem(index=index, type=kind, reason=reason, detail=detail))

    # Owners and answers: the first call and the first output per key win. Orphans and repeats
    # are set aside before batches are formed, so that removing them never reads as a move.
    call_keys = [call_key(item) for _, item in admitted]
    answer_keys = [answer_key(item) for _, item in admitted]
    owners: dict[CallKey, int] = {}
    answered: dict[CallKey, int] = {}
    dropped: set[int] = set()
    orphans: list[RemovedOrphan] = []
    duplicates: list[DeduplicatedOutput] = []
    for position, (index, item) in enumerate(admitted):
        if (key := call_keys[position]) is not None:
            if key in owners or key in settled_keys:
                # Two calls under one key would make every answer ambiguous.
                dropped.add(position)
                excluded.append(
                    ExcludedItem(index=index, type=item_type(item), reason="duplicate_call_id")
                )
            else:
                owners[key] = index
    for position, (index, _) in enumerate(admitted):
        if (key := answer_keys[position]) is None:
            continue
        if key in settled_keys or key in answered:
            dropped.add(position)
            duplicates.append(DeduplicatedOutput(call_id=key[1], index=index))
        elif key not in owners:
            dropped.add(position)
            orphans.append(RemovedOrphan(call_id=key[1], index=index))
        else:
            answered[key] = index

    # Batches: a run of calls, each followed by its outputs or by more calls. An answer inside
    # its call's batch stays where it is; any other answer is displaced to the batch's end.
    survivors = [position for position in range(len(admitted)) if position not in dropped]
    in_place: set[int] = set()
    batch_end_of: dict[CallKey, int] = {}
    closer_of: dict[CallKey, int | None] = {}
    start = 0
    while start < len(survivors):
        if call_keys[survivors[start]] is None:
            start += 1
            continue
        # A set: an agent that runs one call after another without a message between them
        # makes its whole session one batch.
        members: set[CallKey] = set()
        end = start
        while end < len(survivors):
            position = survivors[end]
            if (key := call_keys[position]) is not None:
                members.add(key)
            elif answer_keys[position] in members:
                in_place.add(position)
            else:
                break
            end += 1
        closer = admitted[survivors[end]][0] if end < len(survivors) else None
        for key in members:
            batch_end_of[key] = survivors[end - 1]
            closer_of[key] = closer
        start = end
    displaced: dict[int, list[int]] = {}
    moved_calls: list[tuple[int, int | None]] = []
    for position in survivors:
        if (key := answer_keys[position]) is not None and position not in in_place:
            displaced.setdefault(batch_end_of[key], []).append(position)
            moved_calls.append((owners[key], closer_of[key]))

    # Emit in order, synthesizing missing answers and placing displaced ones.
    emitted: list[tuple[int | None, Item]] = []
    synthesized: list[SynthesizedOutput] = []
    reordered: list[ReorderedOutput] = []
    for position in survivors:
        index, item = admitted[position]
        if answer_keys[position] is not None and position not in in_place:
            continue
        emitted.append((index, item))
        if (key := call_keys[position]) is not None and key not in answered:
            family, call_id = key
            raw_id = item.get("id")
            output_id = synthetic_output_id(
                family, call_item_id=raw_id if isinstance(raw_id, str) else None, call_id=call_id
            )
            synthesized.append(
                SynthesizedOutput(call_id=call_id, id=output_id, index=output_offset + len(emitted))
            )
            emitted.append(
                (
                    None,
                    {
                        "type": _OUTPUT_TYPE_OF[family],
                        "id": output_id,
                        "call_id": call_id,
                        "output": SYNTHETIC_OUTPUT_TEXT,
                    },
                )
            )
        for moved in displaced.get(position, ()):
            moved_index, moved_item = admitted[moved]
            reordered.append(
                ReorderedOutput(
                    call_id=moved_item["call_id"],
                    from_index=moved_index,
                    to_index=output_offset + len(emitted),
                )
            )
            emitted.append((moved_index, moved_item))

    # Media and truncation, item by item; positions no longer change.
    unsupported: dict[Any, MediaKind] = {
        part_type: kind
        for kind, part_type in _MEDIA_PART_TYPES.items()
        if kind not in input_modalities
    }
    stripped: list[StrippedMedia] = []
    truncated: list[TruncatedOutput] = []
    truncated_at: list[int] = []
    policy_mode: TruncationMode = truncation.mode
    policy_budget = truncation.budget
    normalized: list[Item] = []
    for output_index, (source, item) in enumerate(emitted):
        kind = item_type(item)
        new_item = item
        field = "content" if kind == "message" else "output" if kind in OUTPUT_TYPES else None
        if unsupported and field is not None and isinstance(item.get(field), list):
            parts: list[Any] = []
            already_stripped = len(stripped)
            for part in item[field]:
                media = unsupported.get(part.get("type")) if isinstance(part, dict) else None
                if media is None:
                    parts.append(part)
                else:
                    # In place, so the text around an image keeps its meaning.
                    parts.append({"type": "input_text", "text": MEDIA_PLACEHOLDERS[media]})
                    stripped.append(StrippedMedia(index=output_offset + output_index, kind=media))
            if len(stripped) > already_stripped:
                new_item = {**item, field: parts}
        elif (
            kind == "image_generation_call"
            and "input_image" in unsupported
            and item.get("result") not in (None, "")
        ):
            new_item = {**item, "result": ""}
            stripped.append(StrippedMedia(index=output_offset + output_index, kind="image"))
        if kind in OUTPUT_TYPES and isinstance(output := new_item.get("output"), str | list):
            limit = _metadata_at(item_metadata, source).get("truncation_token_limit")
            mode, budget = policy_mode, policy_budget
            if isinstance(limit, int) and not isinstance(limit, bool) and limit >= 0:
                # A per-item limit already includes the serialization margin.
                mode, budget = "tokens", limit
            seq = None
            if seqs is not None and source is not None and source < len(seqs):
                seq = seqs[source]
            cut = truncate_tool_output(
                output,
                budget=budget,
                mode=mode,
                count_tokens=count,
                reference=None if seq is None else f"fact seq {seq}",
                marks_on_top=True,
            )
            if cut is not output:
                cut_item = {**new_item, "output": cut}
                named_call = item.get("call_id")
                truncated.append(
                    TruncatedOutput(
                        call_id=named_call if isinstance(named_call, str) else None,
                        original_tokens=item_tokens(new_item, count),
                        kept_tokens=item_tokens(cut_item, count),
                    )
                )
                truncated_at.append(output_index)
                new_item = cut_item
        normalized.append(new_item)

    return NormalizedPart(
        items=tuple(normalized),
        sources=tuple(source for source, _ in emitted),
        report=NormalizeReport(
            synthesized_outputs=tuple(synthesized),
            removed_orphans=tuple(orphans),
            reordered_outputs=tuple(reordered),
            deduplicated_outputs=tuple(duplicates),
            stripped_media=tuple(stripped),
            truncated_outputs=tuple(truncated),
            excluded=tuple(sorted(excluded, key=lambda entry: entry.index)),
        ),
        truncated_at=tuple(truncated_at),
        owners=owners,
        answered={owners[key]: answered.get(key) for key in owners},
        displaced=tuple(moved_calls),
    )


def find_pairing_violations(items: Sequence[Item]) -> list[str]:
    """Every way `items` breaks the pairing invariant, in words; empty when it holds.

    The invariant (see the module docstring): each call with a call_id has exactly one output of
    its family after it, with only calls and outputs in between; each output naming a call_id
    answers a call placed before it; no call lacks a call_id; no two calls share a key.
    """
    violations: list[str] = []
    waiting: dict[CallKey, int] = {}
    seen_calls: set[CallKey] = set()
    answered: set[CallKey] = set()
    for position, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        kind = item_type(item)
        if (key := call_key(item)) is not None:
            if key in seen_calls:
                violations.append(f"item {position}: second {kind} with call_id {key[1]!r}")
            seen_calls.add(key)
            waiting[key] = position
        elif (key := answer_key(item)) is not None:
            if key in waiting:
                del waiting[key]
                answered.add(key)
            elif key in answered:
                violations.append(f"item {position}: second {kind} for call_id {key[1]!r}")
            else:
                violations.append(
                    f"item {position}: {kind} for call_id {key[1]!r} answers no earlier call"
                )
        elif kind in ("function_call", "custom_tool_call"):
            violations.append(f"item {position}: {kind} without a call_id")
        elif waiting and kind not in CALL_TYPES | OUTPUT_TYPES:
            pending = ", ".join(repr(call_id) for _, call_id in waiting)
            violations.append(
                f"item {position}: {kind} separates calls {pending} from their outputs"
            )
    violations.extend(
        f"item {position}: call_id {call_id!r} has no {_OUTPUT_TYPE_OF[family]} after it"
        for (family, call_id), position in waiting.items()
    )
    return violations
