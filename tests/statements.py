"""The SQL a test's engine sends, recorded: what a change to the statements a path runs is
checked by."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

from sqlalchemy import Engine, event


@contextlib.contextmanager
def statements_matching(engine: Engine, pattern: str) -> Iterator[list[str]]:
    """The statements `engine` sends while the block runs whose SQL matches `pattern` (a
    regular expression), in order; the list grows as they are sent."""
    sent: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if re.search(pattern, statement):
            sent.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", record)
