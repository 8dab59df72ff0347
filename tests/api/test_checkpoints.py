"""A session's checkpoint on PostgreSQL: written after an assembly's answer as the log grows,
restored by an app that has no fold of the session, and never served when it cannot be trusted
(a corrupt body, another code's derivation, a log that no longer holds its last fact, a body of
the right hash and the wrong shape): each is refused, counted, the log folded instead (the same
answer), and the next write replaces it."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import zstandard
from fastapi.testclient import TestClient
from prometheus_client import REGISTRY
from sqlalchemy import create_engine, delete, select, update
from sqlalchemy.orm import Session

from app.domain.column_codec import encoded
from app.main import create_app
from app.settings import Settings
from app.storage import checkpoints
from app.storage.tables import CheckpointRow, SessionRow
from tests.answers import decisions
from tests.conftest import TRAJECTORIES, load_trajectory

EVERY = 10
"""Facts between two links of a checkpoint, in these tests."""
FROM = 30
"""Model-visible facts a log holds before it is checkpointed, in these tests."""


def _outcome(outcome: str) -> float:
    return REGISTRY.get_sample_value("contextd_checkpoints_total", {"outcome": outcome}) or 0.0


@pytest.fixture
def app_with(postgres_url: str) -> Iterator[Callable[..., TestClient]]:
    """Apps of their own (so caches of their own) on the test database."""
    opened: list[TestClient] = []

    def make(**settings: Any) -> TestClient:
        settings = {"checkpoint_from_facts": FROM, **settings}
        client = TestClient(create_app(Settings(database_url=postgres_url, **settings)))
        opened.append(client.__enter__())
        return client

    yield make
    for client in opened:
        client.__exit__(None, None, None)


def _links(postgres_url: str, session_id: str) -> list[CheckpointRow]:
    """The session's checkpoint links, oldest first."""
    engine = create_engine(postgres_url)
    try:
        with Session(engine) as db:
            return list(
                db.execute(
                    select(CheckpointRow)
                    .join(SessionRow, SessionRow.id == CheckpointRow.session_id)
                    .where(SessionRow.external_id == session_id)
                    .order_by(CheckpointRow.last_seq)
                ).scalars()
            )
    finally:
        engine.dispose()


def _row(postgres_url: str, session_id: str) -> CheckpointRow | None:
    """The session's newest checkpoint link."""
    links = _links(postgres_url, session_id)
    return links[-1] if links else None


def _change(postgres_url: str, row: CheckpointRow, **values: Any) -> None:
    engine = create_engine(postgres_url)
    try:
        with Session(engine) as db:
            db.execute(
                update(CheckpointRow)
                .where(
                    CheckpointRow.session_id == row.session_id,
                    CheckpointRow.last_seq == row.last_seq,
                )
                .values(**values)
            )
            db.commit()
    finally:
        engine.dispose()


def _grown(client: TestClient, session_id: str, items: list[dict[str, Any]]) -> None:
    client.post("/sessions", json={"session_id": session_id, "context_window": 8_000})
    for start in range(0, len(items), 25):
        appended = client.post(
            f"/sessions/{session_id}/items", json={"items": items[start : start + 25]}
        )
        assert appended.status_code == 201, appended.text
        assert client.post("/assemble", json={"session_id": session_id}).status_code == 201


def test_a_checkpoint_is_written_as_the_log_grows_and_restored_by_a_new_app(
    app_with: Callable[..., TestClient], postgres_url: str, session_id: str
) -> None:
    items = load_trajectory(TRAJECTORIES[3])[:100]
    writer = app_with(checkpoint_every_facts=EVERY)
    _grown(writer, session_id, items)
    row = _row(postgres_url, session_id)
    assert row is not None
    assert 100 - EVERY < row.last_seq <= 100
    assert row.derivation == checkpoints.DERIVATION
    assert row.body_digest == hashlib.sha256(row.body).hexdigest()
    body = {"session_id": session_id}
    expected = decisions(writer.post("/assemble", json=body).json())
    restored = _outcome("restored")
    assert (
        decisions(app_with(checkpoint_every_facts=EVERY).post("/assemble", json=body).json())
        == expected
    )
    assert _outcome("restored") == restored + 1
    # With checkpoints off, an app folds the log, and reads no checkpoint.
    assert (
        decisions(app_with(checkpoint_every_facts=0).post("/assemble", json=body).json())
        == expected
    )
    assert _outcome("restored") == restored + 1


def _malformed_body() -> dict[str, Any]:
    body = zstandard.ZstdCompressor().compress(encoded({"format": 1, "last_seq": 3}))
    return {"body": body, "body_digest": hashlib.sha256(body).hexdigest()}


@pytest.mark.parametrize(
    ("damage", "outcome"),
    [
        (lambda row: {"body": row.body[:-9] + b"123456789"}, "refused_corrupt"),
        (lambda row: {"derivation": "0" * 64}, "refused_derived_by_other_code"),
        (lambda row: {"log_digest": "0" * 64}, "refused_log_changed"),
        (lambda row: _malformed_body(), "refused_malformed"),
    ],
    ids=["corrupt", "other_code", "log_changed", "malformed"],
)
def test_a_checkpoint_that_cannot_be_trusted_is_refused_and_replaced(
    app_with: Callable[..., TestClient],
    postgres_url: str,
    session_id: str,
    damage: Callable[[CheckpointRow], dict[str, Any]],
    outcome: str,
) -> None:
    items = load_trajectory(TRAJECTORIES[3])[:70]
    writer = app_with(checkpoint_every_facts=EVERY)
    _grown(writer, session_id, items)
    links = _links(postgres_url, session_id)
    assert [link.previous_seq is None for link in links] == [True, False]
    body = {"session_id": session_id}
    expected = decisions(writer.post("/assemble", json=body).json())
    for link in links:  # every link: an older one whose chain is whole would be restored
        _change(postgres_url, link, **damage(link))
    damaged = _row(postgres_url, session_id)
    assert damaged is not None
    refused, restored = _outcome(outcome), _outcome("restored")
    reader = app_with(checkpoint_every_facts=EVERY)
    # Refused, counted, and the log folded instead: the same answer.
    assert decisions(reader.post("/assemble", json=body).json()) == expected
    assert _outcome(outcome) == refused + 1
    assert _outcome("restored") == restored
    reader.get("/healthz")  # the work after that answer: the refused checkpoint is replaced
    replaced = _row(postgres_url, session_id)
    assert replaced is not None
    assert replaced.derivation == checkpoints.DERIVATION
    assert replaced.body_digest == hashlib.sha256(replaced.body).hexdigest()
    columns = ("body", "derivation", "log_digest", "body_digest")
    assert [getattr(replaced, c) for c in columns] != [getattr(damaged, c) for c in columns]
    assert (
        decisions(app_with(checkpoint_every_facts=EVERY).post("/assemble", json=body).json())
        == expected
    )
    assert _outcome("restored") == restored + 1


def test_a_checkpoint_past_the_seq_asked_for_is_not_used(
    app_with: Callable[..., TestClient], postgres_url: str, session_id: str
) -> None:
    writer = app_with(checkpoint_every_facts=EVERY)
    _grown(writer, session_id, load_trajectory(TRAJECTORIES[3])[:70])
    first, newest = _links(postgres_url, session_id)
    engine = create_engine(postgres_url)
    try:
        with Session(engine) as db:

            def restored_seq(up_to_seq: int) -> int | None:
                found = checkpoints.restore(db, session_pk=newest.session_id, up_to_seq=up_to_seq)
                assert found.refused is None
                return None if found.fold is None else found.fold.last_seq

            assert restored_seq(first.last_seq - 1) is None
            assert restored_seq(newest.last_seq - 1) == first.last_seq
            assert restored_seq(newest.last_seq) == newest.last_seq
    finally:
        engine.dispose()


def test_at_shutdown_the_sessions_grown_since_their_checkpoint_are_checkpointed(
    postgres_url: str, session_id: str
) -> None:
    items = load_trajectory(TRAJECTORIES[3])[:100]
    settings = Settings(
        database_url=postgres_url, checkpoint_every_facts=EVERY, checkpoint_from_facts=FROM
    )
    with TestClient(create_app(settings)) as client:
        _grown(client, session_id, items)
        client.post(f"/sessions/{session_id}/items", json={"items": items[:5]})
        answer = client.post("/assemble", json={"session_id": session_id})
        expected = decisions(answer.json())
        row = _row(postgres_url, session_id)
        assert row is not None
        assert row.last_seq == 100  # 5 facts since: not due
    row = _row(postgres_url, session_id)
    assert row is not None
    assert row.last_seq == 105  # written as the app shut down
    restored = _outcome("restored")
    with TestClient(create_app(settings)) as client:
        assert decisions(client.post("/assemble", json={"session_id": session_id}).json()) == (
            expected
        )
    assert _outcome("restored") == restored + 1


def test_a_forks_checkpoint_holds_the_history_it_inherited(
    app_with: Callable[..., TestClient], postgres_url: str, session_id: str
) -> None:
    """A fork's inherited items are no fact of its log: its checkpoint holds them whole."""
    items = load_trajectory(TRAJECTORIES[3])
    writer = app_with(checkpoint_every_facts=EVERY)
    _grown(writer, session_id, items[:40])
    fork_id = f"{session_id}-fork"
    forked = writer.post(f"/sessions/{session_id}/fork", json={"session_id": fork_id})
    assert forked.status_code == 201, forked.text
    for start in range(40, 110, 25):
        appended = writer.post(
            f"/sessions/{fork_id}/items", json={"items": items[start : start + 25]}
        )
        assert appended.status_code == 201, appended.text
        assert writer.post("/assemble", json={"session_id": fork_id}).status_code == 201
    row = _row(postgres_url, fork_id)
    assert row is not None
    body = {"session_id": fork_id}
    expected = decisions(writer.post("/assemble", json=body).json())
    restored = _outcome("restored")
    assert decisions(
        app_with(checkpoint_every_facts=EVERY).post("/assemble", json=body).json()
    ) == (expected)
    assert _outcome("restored") == restored + 1
    assert decisions(app_with(checkpoint_every_facts=0).post("/assemble", json=body).json()) == (
        expected
    )


def test_links_are_deltas_against_the_one_before_until_one_is_written_whole(
    app_with: Callable[..., TestClient],
    postgres_url: str,
    session_id: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(checkpoints, "MAX_LINKS", 2)
    monkeypatch.setattr(checkpoints, "MAX_CHAIN_SHARE", 100.0)  # a short log's deltas weigh much
    whole, deltas = _outcome("written_whole"), _outcome("written_delta")
    writer = app_with(checkpoint_every_facts=EVERY)
    items = load_trajectory(TRAJECTORIES[4])[:150]
    assert len(items) == 150
    _grown(writer, session_id, items)
    writer.get("/healthz")
    written_whole = _outcome("written_whole") - whole
    assert written_whole >= 2
    assert _outcome("written_delta") - deltas >= 2
    links = _links(postgres_url, session_id)
    # One chain: its whole link (the older links went when it was written), then its deltas,
    # each naming the link before by seq and body digest.
    assert links[0].previous_seq is None
    assert all(link.base_seq == links[0].last_seq for link in links)
    for before, link in itertools.pairwise(links):
        assert (link.previous_seq, link.previous_digest) == (before.last_seq, before.body_digest)
    assert 1 <= len(links) <= 3
    assert links[-1].last_seq == 150
    body = {"session_id": session_id}
    expected = decisions(writer.post("/assemble", json=body).json())
    restored = _outcome("restored")
    assert decisions(app_with().post("/assemble", json=body).json()) == expected
    assert _outcome("restored") == restored + 1


def _drop(postgres_url: str, row: CheckpointRow) -> None:
    engine = create_engine(postgres_url)
    try:
        with Session(engine) as db:
            db.execute(
                delete(CheckpointRow).where(
                    CheckpointRow.session_id == row.session_id,
                    CheckpointRow.last_seq == row.last_seq,
                )
            )
            db.commit()
    finally:
        engine.dispose()


def test_a_chain_missing_a_link_is_restored_from_its_part_still_whole(
    app_with: Callable[..., TestClient],
    postgres_url: str,
    session_id: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(checkpoints, "MAX_CHAIN_SHARE", 100.0)  # a short log's deltas weigh much
    writer = app_with(checkpoint_every_facts=EVERY)
    _grown(writer, session_id, load_trajectory(TRAJECTORIES[3])[:100])
    first, second, *_, newest = _links(postgres_url, session_id)
    assert first.previous_seq is None
    assert second.previous_seq == first.last_seq
    body = {"session_id": session_id}
    expected = decisions(writer.post("/assemble", json=body).json())
    _drop(postgres_url, second)  # the links after it name a link that is gone
    engine = create_engine(postgres_url)
    try:
        with Session(engine) as db:
            found = checkpoints.restore(db, session_pk=first.session_id, up_to_seq=newest.last_seq)
            assert found.fold is not None
            assert found.fold.last_seq == first.last_seq
    finally:
        engine.dispose()
    restored = _outcome("restored")
    assert decisions(app_with().post("/assemble", json=body).json()) == expected
    assert _outcome("restored") == restored + 1
    # With its whole link gone too, no chain is whole: refused, and the log folded instead.
    _drop(postgres_url, first)
    broken = _outcome("refused_broken_chain")
    reader = app_with()
    assert decisions(reader.post("/assemble", json=body).json()) == expected
    assert _outcome("refused_broken_chain") == broken + 1
    reader.get("/healthz")  # the work after that answer: a whole link replaces them all
    (replaced,) = _links(postgres_url, session_id)
    assert replaced.previous_seq is None
    assert replaced.last_seq == 100


def test_on_sqlite_a_chain_is_written_and_restored_alike(
    sqlite_url: str, session_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The embedded default store keeps checkpoints the same way."""
    monkeypatch.setattr(checkpoints, "MAX_CHAIN_SHARE", 100.0)  # a short log's deltas weigh much
    settings = Settings(
        database_url=sqlite_url, checkpoint_every_facts=EVERY, checkpoint_from_facts=FROM
    )
    body = {"session_id": session_id}
    with TestClient(create_app(settings)) as writer:
        _grown(writer, session_id, load_trajectory(TRAJECTORIES[3])[:100])
        expected = decisions(writer.post("/assemble", json=body).json())
    assert len(_links(sqlite_url, session_id)) >= 3
    restored = _outcome("restored")
    with TestClient(create_app(settings)) as reader:
        assert decisions(reader.post("/assemble", json=body).json()) == expected
    assert _outcome("restored") == restored + 1


def _graded(client: TestClient, session_id: str, items: list[dict[str, Any]]) -> Any:
    """Assembles, appends `items` (the next action), and reads the grade of that assembly."""
    assembly = client.post("/assemble", json={"session_id": session_id}).json()["assembly_id"]
    appended = client.post(f"/sessions/{session_id}/items", json={"items": items})
    assert appended.status_code == 201, appended.text
    client.get("/healthz")  # the grade is work after the append's answer
    return client.get(f"/assemblies/{assembly}").json()["grounding"]


def test_a_new_apps_first_grade_starts_from_the_index_a_whole_link_holds(
    app_with: Callable[..., TestClient], postgres_url: str, session_id: str
) -> None:
    """Two sessions of the same items: a new app grades one from the occurrence index the
    checkpoint holds, another (checkpoints off) the other from the log; the grades agree."""
    items = load_trajectory(TRAJECTORIES[4])
    writer = app_with(checkpoint_every_facts=EVERY)
    twin = f"{session_id}-twin"
    for session in (session_id, twin):
        _grown(writer, session, items[:100])
    whole = _links(postgres_url, session_id)[0]
    assert whole.previous_seq is None
    assert whole.index_body is not None
    assert whole.index_digest == hashlib.sha256(whole.index_body).hexdigest()
    action = next(at for at in range(100, len(items)) if items[at]["type"] == "function_call")
    restored = _outcome("restored_index")
    from_checkpoint = _graded(app_with(checkpoint_every_facts=EVERY), session_id, items[action:])
    assert _outcome("restored_index") == restored + 1
    from_log = _graded(app_with(checkpoint_every_facts=0), twin, items[action:])
    assert _outcome("restored_index") == restored + 1
    assert from_checkpoint is not None
    assert from_checkpoint == from_log
