#!/bin/sh
# One-shot, on the primary (the `standby` profile's `standby-setup`): the role the standby
# streams as, allowed in by ../postgres/pg_hba.conf, and every commit made to wait for one
# standby ('*': whichever is streaming). Commits wait from here until the standby streams,
# seconds later; they resume on their own. Idempotent: safe on every `docker compose up`.
set -eu
psql -v ON_ERROR_STOP=1 -v password="$REPLICATOR_PASSWORD" <<'SQL'
SELECT format('CREATE ROLE replicator WITH REPLICATION LOGIN PASSWORD %L', :'password')
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'replicator') \gexec
ALTER SYSTEM SET synchronous_standby_names = '*';
SELECT pg_reload_conf();
SQL
