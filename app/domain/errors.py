"""Errors the core and the shells raise; the HTTP shell maps each to one status code."""

from __future__ import annotations

from typing import Any


class ContextdError(Exception):
    """Base of every error that reaches a client with a stable `code`."""

    code = "error"

    def __init__(self, message: str, *, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class NotFound(ContextdError):
    code = "not_found"


def session_not_found(external_id: str) -> NotFound:
    """The 404 for a session the tenant has not created (or another tenant's): it says how to
    create one."""
    return NotFound(f"session {external_id!r} not found; create it with POST /sessions")


class Conflict(ContextdError):
    code = "conflict"


class SequenceConflict(Conflict):
    """`expected_last_seq` did not match the session's last sequence number."""

    code = "sequence_conflict"

    def __init__(self, *, expected: int, actual: int) -> None:
        super().__init__(
            f"expected last_seq {expected} but the session is at {actual}; nothing was written",
            details={"expected": expected, "actual": actual},
        )


class SessionKeyCollision(Conflict):
    """A new session's name derives the key (row id) another session of any tenant holds: the
    name is refused, never merged with the other session; another name will do."""

    code = "session_key_collision"


class AlreadyRetracted(Conflict):
    code = "already_retracted"


class NotInActiveHistory(Conflict):
    """The seq names a fact the active history does not show (compacted away, reset, not a
    model-visible item, or past the log)."""

    code = "not_in_active_history"


class NothingToRetract(Conflict):
    """A retraction of "the newest item" found an active history that shows none. The session
    is there, so this is its state, not a missing resource: a 404 would say it was gone."""

    code = "nothing_to_retract"


class NotAChildSession(Conflict):
    """A conclusion (merge, or an end with one) from a session that has no parent."""

    code = "not_a_child_session"


class AssemblyOfAnotherSession(Conflict):
    """A usage report names an assembly the tenant can read, made for another session (or
    for none): the id is right, the session it is reported against is not."""

    code = "assembly_of_another_session"


class SectionNotInParent(Conflict):
    """A child asked to inherit a world-state section its parent does not hold."""

    code = "section_not_in_parent"


class RoleNotInManifest(Conflict):
    """An assembly asks a stored manifest for a role it has no view for."""

    code = "role_not_in_manifest"


class SeqPastLog(Conflict):
    """A read names a seq the session's log has not reached yet: the session is there."""

    code = "seq_past_log"


class WindowPastText(Conflict):
    """A recall window starts past the end of the fact's text (`from_line`, `from_char`)."""

    code = "window_past_text"


class StoredPlanMismatch(Conflict):
    """A stored plan's items, derived again from the log, do not hash to the fingerprints the
    plan stored (the service's normalization changed since it was stored, say): reported,
    never papered over."""

    code = "stored_plan_mismatch"


class InvalidInput(ContextdError):
    """Well-formed JSON that breaks a rule; `details` is a list of {loc, msg}."""

    code = "validation_error"


RULES: dict[str, str] = {
    "variant_names": "Each evaluation variant has a name of its own, and none is `current`, "
    "the name of the session's own settings.",
    "watermarks_out_of_order": "`low_watermark` is below `high_watermark`, a watermark left "
    "out taking the service's setting.",
    "duplicate_candidate_ids": "Candidate ids are distinct within one source.",
    "seq_range_reversed": "`from_seq` is not after `to_seq`.",
    "invalid_pattern": "`pattern` is a regular expression RE2 compiles (no backreferences, no "
    "lookaround).",
    "manifest_inconsistent": "Entry ids are unique; `links`, role views and `priorities` name "
    "entries of the manifest; links form no cycle.",
    "blank_goal": "The goal's `text` holds a character that is not white space.",
    "too_many_items": "At most the service's `CTX_MAX_ITEMS_PER_REQUEST` items in one request.",
    "reserved_item_type": "Item types starting with `contextd.` are written by the service only.",
    "unstorable_value": "Text holds no NUL character, and an item's `type` is at most 64 "
    "characters.",
    "invalid_world_state": "A world-state section is not null (leave it out to remove it).",
    "conclusion_not_one_item": "A conclusion converts to exactly one item.",
    "hook_address_refused": "A hook URL names an address hooks may reach (no private network "
    "unless the service allows it).",
    "idempotency_mismatch": "An idempotency key names one batch: a retry repeats it exactly.",
    "malformed_item": "With `malformed: refuse`, every item of a known type has the fields a "
    "provider reads in the shape every format needs (a message's `role` and `content`, a call's "
    "`name` and `arguments`, an output's `output`).",
}
"""Rules a request can break although its schema holds, because the schema language cannot
state them (they relate two fields, or need the service's settings or a parser): each is
answered 422 with its own code, and each operation lists in the contract the ones it checks."""


class RuleBroken(InvalidInput):
    """Schema-valid input that breaks one of `RULES`; its `code` is the rule's."""

    def __init__(self, rule: str, message: str, *, details: Any = None) -> None:
        if rule not in RULES:
            raise ValueError(f"unknown rule {rule!r}")
        super().__init__(message, details=details)
        self.code = rule


class IdempotencyMismatch(InvalidInput):
    """An idempotency key already names a batch with other content: nothing was written."""

    code = "idempotency_mismatch"

    def __init__(self, *, key: str, first_seq: int, last_seq: int) -> None:
        super().__init__(
            f"idempotency key {key!r} was used for a different batch (seqs {first_seq}-"
            f"{last_seq}); nothing was written: a retry must repeat the batch, new items need "
            "a new key",
            details=[
                {
                    "loc": ["body", "idempotency_key"],
                    "msg": f"key {key!r} names seqs {first_seq}-{last_seq}, another batch",
                }
            ],
        )


class PayloadTooLarge(ContextdError):
    code = "payload_too_large"


class Unauthorized(ContextdError):
    """No usable credentials. `error` is RFC 6750's code for the `WWW-Authenticate` challenge
    the answer carries: None when none were sent (or in another scheme), `invalid_request` for
    a malformed header, `invalid_token` for a key the service does not know."""

    code = "unauthorized"

    def __init__(self, message: str, *, error: str | None = None) -> None:
        super().__init__(message)
        self.error = error


BEARER_REALM = "contextd"


def bearer_challenge(error: str | None = None) -> str:
    """The `WWW-Authenticate` value of a 401 (RFC 7235, RFC 6750 section 3)."""
    challenge = f'Bearer realm="{BEARER_REALM}"'
    return challenge if error is None else f'{challenge}, error="{error}"'


class TenantBusy(ContextdError):
    """The tenant has as many of some costly operation under way as it may: a 429 with
    `Retry-After`, so that one tenant's load cannot take every worker from the others."""

    code = "tenant_busy"


class DatabaseUnavailable(ContextdError):
    code = "database_unavailable"
