"""A plan stored as its difference from an earlier plan of its lineage reads back as it was sent,
predicts the next call's reused prefix as a plan stored whole does, and keeps its base for as
long as it is kept; a plan whose base is gone says so, and the lineage goes on."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.domain.items import is_model_output
from app.main import create_app
from app.settings import Settings
from app.storage import retention
from app.storage.database import create_db_engine, create_session_factory
from app.storage.tables import AssemblyRow
from tests.conftest import TRAJECTORIES, _admin_conninfo, load_trajectory

RUN = next(path for path in TRAJECTORIES if "django-11133" in path.name)


@pytest.fixture
def service(database_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(database_url=database_url))) as client:
        yield client


def _play(client: TestClient, session_id: str) -> list[dict[str, Any]]:
    """A real run, as its runtime plays it: before each model call, the items since the last
    one are appended and a session-mode assembly answers. The answers, in order."""
    client.post("/sessions", json={"session_id": session_id}).raise_for_status()
    answers: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    for item in load_trajectory(RUN):
        if is_model_output(item) and pending:
            appended = client.post(f"/sessions/{session_id}/items", json={"items": pending})
            appended.raise_for_status()
            pending = []
            made = client.post("/assemble", json={"session_id": session_id})
            assert made.status_code == 201, made.text
            answers.append(made.json())
        pending.append(item)
    return answers


def _shown(answer: dict[str, Any]) -> list[str]:
    """What a provider's cache sees of each item, with its tokens."""
    return [
        json.dumps([item[key] for key in ("id", "source", "form", "content", "item", "tokens")])
        for item in answer["items"]
    ]


def _reused_tokens(previous: dict[str, Any], answer: dict[str, Any]) -> int:
    reused = 0
    for before, now, item in zip(_shown(previous), _shown(answer), answer["items"], strict=False):
        if before != now:
            break
        reused += item["tokens"]
    return reused


def _stored_against_base(database_url: str, answers: list[dict[str, Any]]) -> int:
    engine = create_db_engine(Settings(database_url=database_url))
    with create_session_factory(engine)() as db:
        ids = [answer["assembly_id"] for answer in answers]
        bases = db.scalars(select(AssemblyRow.base_id).where(AssemblyRow.external_id.in_(ids)))
        found = sum(base is not None for base in bases)
    engine.dispose()
    return found


def test_plans_stored_against_a_base_read_back_as_sent_and_predict_reuse(
    service: TestClient, database_url: str, session_id: str
) -> None:
    answers = _play(service, session_id)
    assert len(answers) > 20
    # Most plans are stored as deltas, and every one reads back byte for byte.
    assert _stored_against_base(database_url, answers) > len(answers) // 2
    for answer in answers:
        read = service.get(f"/assemblies/{answer['assembly_id']}")
        assert read.status_code == 200, read.text
        assert json.dumps(read.json()["response"]) == json.dumps(answer)
    # Each call's reused prefix is measured against the plan before it, whole again.
    predicted = [answer["cache"]["reused_prefix_tokens"] for answer in answers[1:]]
    assert predicted == [
        _reused_tokens(previous, answer) for previous, answer in itertools.pairwise(answers)
    ]
    assert sum(predicted) > 0


def test_retention_keeps_the_base_of_every_plan_it_keeps(
    client: TestClient, postgres_url: str, session_id: str
) -> None:
    answers = _play(client, session_id)
    newest = answers[-1]["assembly_id"]
    engine = create_db_engine(Settings(database_url=postgres_url))
    with create_session_factory(engine)() as db:
        session_key = db.scalar(
            select(AssemblyRow.session_key).where(AssemblyRow.external_id == newest)
        )
        base = db.scalar(select(AssemblyRow.base_id).where(AssemblyRow.external_id == newest))
        assert base is not None
        retention.prune_assemblies(
            db, older_than=None, keep_per_session=1, keep_per_tenant=10**6, limit=10**6
        )
        db.commit()
        kept = db.execute(
            select(AssemblyRow.id, AssemblyRow.external_id).where(
                AssemblyRow.session_key == session_key
            )
        ).all()
    engine.dispose()
    assert sorted(row.id for row in kept) == sorted(
        [base, *(row.id for row in kept if row.external_id == newest)]
    )
    read = client.get(f"/assemblies/{newest}")
    assert json.dumps(read.json()["response"]) == json.dumps(answers[-1])


def test_a_plan_whose_base_is_gone_says_so_and_the_lineage_goes_on(
    client: TestClient, postgres_url: str, session_id: str
) -> None:
    answers = _play(client, session_id)
    newest = answers[-1]["assembly_id"]
    with psycopg.connect(_admin_conninfo(postgres_url), autocommit=True) as db:
        db.execute(
            "DELETE FROM assemblies WHERE id ="
            " (SELECT base_id FROM assemblies WHERE external_id = %s)",
            (newest,),
        )
    read = client.get(f"/assemblies/{newest}")
    assert read.status_code == 409
    assert read.json()["error"]["code"] == "stored_plan_mismatch"
    assert "no longer kept" in read.json()["error"]["message"]
    # The next call predicts nothing from a plan it cannot read, and is stored whole.
    made = client.post("/assemble", json={"session_id": session_id})
    assert made.status_code == 201, made.text
    assert made.json()["cache"]["reused_prefix_tokens"] == 0
    read = client.get(f"/assemblies/{made.json()['assembly_id']}")
    assert json.dumps(read.json()["response"]) == json.dumps(made.json())
    with psycopg.connect(_admin_conninfo(postgres_url)) as db:
        row = db.execute(
            "SELECT base_id FROM assemblies WHERE external_id = %s",
            (made.json()["assembly_id"],),
        ).fetchone()
    assert row == (None,)
