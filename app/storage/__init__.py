"""Persistence shell: typed tables, repository functions that never commit, error translation."""
