"""Operator extra links, registered through the provider's `extra-links`."""

from airflow_iqp.links.output import BatchOutputLink

__all__ = ["BatchOutputLink"]
