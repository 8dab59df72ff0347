"""A scratch store: an empty, migrated SQLite database of its own, for work that must write
nothing to the service's store (an evaluation's replay, `app.usecases.evaluate`).

Each store is a copy of one template this process migrates on first use (in a directory of its
own, removed at exit), so that a store costs a file copy, not the migrations; the copy lives in
a temporary directory removed when the block ends, whatever happens in it. It holds one tenant,
under the id it has in the service's store, so that every id the service derives from a
tenant and a session name (sessions, compactions, assemblies) is the one it derived there.
"""

from __future__ import annotations

import atexit
import contextlib
import shutil
import tempfile
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import insert
from sqlalchemy.orm import Session, sessionmaker

from app.settings import Settings
from app.storage.database import create_db_engine, create_session_factory, migrate
from app.storage.tables import Tenant

__all__ = ["scratch_store"]

_template_lock = threading.Lock()
_templates: list[Path] = []


def _template() -> Path:
    """The migrated, empty template of this process's scratch stores."""
    with _template_lock:
        if not _templates:
            directory = Path(tempfile.mkdtemp(prefix="contextd-scratch-template-"))
            atexit.register(shutil.rmtree, directory, ignore_errors=True)
            path = directory / "template.db"
            migrate(f"sqlite:///{path}")
            _templates.append(path)
        return _templates[0]


@contextlib.contextmanager
def scratch_store(
    settings: Settings, *, tenant_id: int
) -> Iterator[tuple[Settings, sessionmaker[Session]]]:
    """`settings` pointed at a new scratch store holding the tenant `tenant_id`, and the
    sessions that open it."""
    template = _template()
    with tempfile.TemporaryDirectory(prefix="contextd-scratch-") as directory:
        path = Path(directory) / "scratch.db"
        shutil.copyfile(template, path)
        scratch = settings.model_copy(update={"database_url": f"sqlite:///{path}"})
        engine = create_db_engine(scratch)
        try:
            sessions = create_session_factory(engine)
            with sessions() as db:
                db.execute(
                    insert(Tenant).values(
                        id=tenant_id, name=f"tenant-{tenant_id}", created_at=datetime.now(UTC)
                    )
                )
                db.commit()
            yield scratch, sessions
        finally:
            engine.dispose()
