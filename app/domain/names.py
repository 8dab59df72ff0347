"""Names callers choose (session ids, labels such as `unit` and `phase`, idempotency keys,
manifest names, models): each becomes a database column, so each obeys that column's rules.

Invariants: a name is 1 to `MAX_LENGTH` characters (the columns' size) and holds no NUL
character (PostgreSQL text cannot); a session id is also made of URL-safe characters and is
neither `.` nor `..`, the path segments URL clients remove before sending. The wire models
refuse other names with a 422; a lookup by such a name finds nothing (404) without asking the
database, which would refuse the value.
"""

from __future__ import annotations

import re

MAX_LENGTH = 200
LABEL_PATTERN = r"^[^\x00]*$"
MANIFEST_NAME_PATTERN = r"^[^\x00/]*$"
"""A manifest name is a path segment (`/manifests/{name}`): a `/` would make it unreachable."""
SESSION_ID_PATTERN = r"^(?:\.*[A-Za-z0-9_:\-][A-Za-z0-9._:\-]*|\.{3,})$"
"""Letters, digits and `._:-`, not only one or two dots (no lookaround: the schema's regex
engine has none)."""

_SESSION_ID = re.compile(SESSION_ID_PATTERN)


def is_label(text: str) -> bool:
    return 0 < len(text) <= MAX_LENGTH and "\x00" not in text


def is_session_id(text: str) -> bool:
    return len(text) <= MAX_LENGTH and _SESSION_ID.fullmatch(text) is not None
