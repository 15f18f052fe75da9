"""Subcommands of the `iqp` CLI, one module each."""
