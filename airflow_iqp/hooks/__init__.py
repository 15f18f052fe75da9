"""Airflow hooks, registered through the provider's `connection-types`."""

from __future__ import annotations

from airflow_iqp.hooks.ledger import LedgerHook

__all__ = ["LedgerHook"]
