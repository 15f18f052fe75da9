"""Operator extra links, registered through the provider's `extra-links`."""

from __future__ import annotations

from airflow_iqp.links.output import BatchOutputLink

__all__ = ["BatchOutputLink"]
