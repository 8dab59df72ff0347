-- Distribute contextd's schema on Citus: every session-scoped table on the session key,
-- co-located with `sessions`; the small tables every node reads as reference tables.
--
-- Run once with psql on the coordinator, as the database owner, after `contextd migrate` on a
-- database the service has not written to (or a re-keyed copy): sessions created before
-- migration 20261205_0011 keep serial ids that no lookup by name can route, so this refuses a
-- database holding any. Not run in the tests (Citus is not installed there); checked against
-- the Citus documentation (DDL reference: keys and foreign keys must include the distribution
-- column, foreign keys only between co-located tables or to reference tables).
\set ON_ERROR_STOP on

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM sessions WHERE id < 4611686018427387904) THEN
        RAISE EXCEPTION 'sessions with serial ids (created before migration 20261205_0011): '
            'distribute a fresh database, or a copy re-keyed with contextd_session_key';
    END IF;
END $$;

-- A lookup by name is then by session key alone: the legacy branch of the lookup folds away.
CREATE OR REPLACE FUNCTION contextd_has_legacy_sessions() RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT false $$;

-- Every statement planned with its values, so that the session key the lookup computes from
-- them (contextd_session_key, an inlined SQL function) is a constant Citus routes on.
DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET plan_cache_mode = force_custom_plan',
                           current_database()); END $$;

-- Foreign keys between session-scoped tables that do not carry the session key on both sides:
-- a child session lives on another shard than its parent, and a stateless plan has no session.
ALTER TABLE sessions DROP CONSTRAINT fk_sessions_parent;
ALTER TABLE assemblies DROP CONSTRAINT assemblies_session_id_fkey;

-- Reference tables: replicated to every node (foreign keys to them stay).
SELECT create_reference_table('tenants');
SELECT create_reference_table('api_keys');
SELECT create_reference_table('manifests');

-- The fact log's append-only triggers raise an error and touch no other table: safe on shards.
SET citus.enable_unsafe_triggers TO on;

-- Session-scoped tables, co-located: a session's row, facts, plans, candidate bodies and
-- checkpoint live on one shard. `assemblies` stays partitioned by week on every shard; partitions made or dropped
-- on the coordinator (the service's retention) are made or dropped on the shards.
SELECT create_distributed_table('sessions', 'id');
SELECT create_distributed_table('facts', 'session_id', colocate_with => 'sessions');
SELECT create_distributed_table('assemblies', 'session_key', colocate_with => 'sessions');
SELECT create_distributed_table('candidate_bodies', 'session_key', colocate_with => 'sessions');
SELECT create_distributed_table('checkpoints', 'session_id', colocate_with => 'sessions');

-- Evaluation jobs: every statement names a job by its id, which is what they are spread on.
SELECT create_distributed_table('evaluations', 'id');

-- alembic_version stays a local table of the coordinator, which runs the migrations.
