"""Provider metadata Airflow reads through the `apache_airflow_provider` entry point.

Airflow loads this while importing its own configuration, so it must import nothing (least of
all Airflow) and stay a plain dict.
"""

from __future__ import annotations

from typing import Any


def get_provider_info() -> dict[str, Any]:
    """Our connection type and extra link, in the shape of Airflow's `provider_info.schema.json`."""
    return {
        "package-name": "airflow-iqp",
        "name": "Intermittent Query Processing",
        "description": "Deadline-bound intermittent queries on Apache Spark: plan, partial batches, merge.",
        "versions": ["0.1.0"],
        "connection-types": [
            {
                "hook-class-name": "airflow_iqp.hooks.ledger.LedgerHook",
                "hook-name": "IQP ledger",
                "connection-type": "iqp",
                # Declared here, not by the hook: Airflow >= 3.2 reads UI metadata from provider info.
                "ui-field-behaviour": {
                    "hidden-fields": ["schema", "login", "password", "port"],
                    "relabeling": {"host": "SQLAlchemy URL"},
                    "placeholders": {
                        "host": "postgresql+psycopg://user:password@db:5432/ledger",
                        "extra": '{"sqlalchemy_url": "overrides the URL above, e.g. to keep a password out of host"}',
                    },
                },
            }
        ],
        "extra-links": ["airflow_iqp.links.output.BatchOutputLink"],
    }
