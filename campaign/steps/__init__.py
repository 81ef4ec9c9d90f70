"""Daemon steps: each a short, idempotent function of a Context that reads the store, acts, writes the store."""
