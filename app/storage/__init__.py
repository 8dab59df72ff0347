"""Persistence shell: typed tables, row functions (by aggregate: tenant_rows, session_rows,
fact_log, manifest_rows) that never commit, error translation."""
