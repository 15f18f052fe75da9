"""Triggers: waits that belong in the triggerer, not in a worker slot."""
