"""Fact log: tenants, API keys, sessions, append-only facts.

Revision ID: 20261129_0001
Revises:
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261129_0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON_DOCUMENT = sa.JSON()
IDENTITY = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TIMESTAMP = sa.DateTime(timezone=True)

POSTGRES_APPEND_ONLY = [
    """
    CREATE FUNCTION contextd_refuse_fact_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'facts are append-only: % refused', TG_OP
            USING ERRCODE = 'restrict_violation';
    END
    $$
    """,
    """
    CREATE TRIGGER facts_append_only BEFORE UPDATE OR DELETE ON facts
    FOR EACH ROW EXECUTE FUNCTION contextd_refuse_fact_change()
    """,
    """
    CREATE TRIGGER facts_no_truncate BEFORE TRUNCATE ON facts
    FOR EACH STATEMENT EXECUTE FUNCTION contextd_refuse_fact_change()
    """,
]
SQLITE_APPEND_ONLY = [
    """
    CREATE TRIGGER facts_no_update BEFORE UPDATE ON facts
    BEGIN SELECT RAISE(ABORT, 'facts are append-only: UPDATE refused'); END
    """,
    """
    CREATE TRIGGER facts_no_delete BEFORE DELETE ON facts
    BEGIN SELECT RAISE(ABORT, 'facts are append-only: DELETE refused'); END
    """,
]


def upgrade() -> None:
    op.create_table(
        "tenants",
        sa.Column("id", IDENTITY, primary_key=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", IDENTITY, primary_key=True),
        sa.Column("tenant_id", IDENTITY, sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
    )
    op.create_index("ix_api_keys_tenant_id", "api_keys", ["tenant_id"])
    op.create_table(
        "sessions",
        sa.Column("id", IDENTITY, primary_key=True),
        sa.Column("tenant_id", IDENTITY, sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("external_id", sa.String(200), nullable=True),
        sa.Column("encoding", sa.String(32), nullable=False),
        sa.Column("context_window", sa.Integer(), nullable=False),
        sa.Column("model", sa.String(200), nullable=True),
        sa.Column("attributes", JSON_DOCUMENT, nullable=False),
        sa.Column("last_seq", sa.BigInteger(), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.UniqueConstraint("tenant_id", "external_id"),
    )
    op.create_table(
        "facts",
        sa.Column("session_id", IDENTITY, sa.ForeignKey("sessions.id"), primary_key=True),
        sa.Column("seq", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("item", JSON_DOCUMENT, nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("unit", sa.String(200), nullable=True),
        sa.Column("phase", sa.String(200), nullable=True),
        sa.Column("provenance", JSON_DOCUMENT, nullable=False),
        sa.Column("idempotency_key", sa.String(200), nullable=True),
        sa.Column("recorded_at", TIMESTAMP, nullable=False),
    )
    op.create_index("ix_facts_idempotency", "facts", ["session_id", "idempotency_key"])
    statements = (
        POSTGRES_APPEND_ONLY if op.get_bind().dialect.name == "postgresql" else SQLITE_APPEND_ONLY
    )
    for statement in statements:
        op.execute(statement)


def downgrade() -> None:
    # Dropping the table drops its triggers; no row-level DELETE ever runs on facts.
    op.drop_table("facts")
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION contextd_refuse_fact_change()")
    op.drop_table("sessions")
    op.drop_index("ix_api_keys_tenant_id", table_name="api_keys")
    op.drop_table("api_keys")
    op.drop_table("tenants")
