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


class InvalidInput(ContextdError):
    """Well-formed JSON that breaks a rule; `details` is a list of {loc, msg}."""

    code = "validation_error"


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


class DatabaseUnavailable(ContextdError):
    code = "database_unavailable"
