#!/bin/sh
# The standby (the `standby` profile's `postgres-standby`), run as the postgres user: on its
# first start, a base backup of the primary that streams from it (`-R` writes the standby
# settings), then the server. The primary's `synchronous_standby_names` comes with the backup;
# it is cleared here, so that once promoted this server does not wait for a standby of its own
# (what an HA manager does on a failover).
set -eu
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pg_basebackup -h "${PRIMARY_HOST:-postgres}" -p "${PRIMARY_PORT:-5432}" -U replicator \
        -D "$PGDATA" -R -X stream --checkpoint=fast
    echo "synchronous_standby_names = ''" >> "$PGDATA/postgresql.auto.conf"
    chmod 700 "$PGDATA"
fi
exec postgres
