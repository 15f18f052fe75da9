"""Provider metadata Airflow reads through the `apache_airflow_provider` entry point.

Airflow loads this while importing its own configuration, so it must import nothing (least of
all Airflow) and stay a plain dict.
"""

from __future__ import annotations

from typing import Any

from airflow_iqp import __version__


def get_provider_info() -> dict[str, Any]:
    """Our connection type and extra link, in the shape of Airflow's `provider_info.schema.json`."""
    return {
        "package-name": "airflow-iqp",
        "name": "Intermittent Query Processing",
        "description": "Deadline-bound intermittent queries on Apache Spark: plan, partial batches, merge.",
        "versions": [__version__],
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
        # The dispatcher that every IQP DAG's Spark jobs share (airflow_iqp/settings.py reads it).
        "config": {
            "iqp": {
                "description": "The dispatcher of the shared Spark resource.\n",
                "options": {
                    "policy": {
                        "description": "Which waiting Spark job runs next: edf (earliest deadline), llf (least "
                        "laxity), sjf (least remaining work) or rr (round robin).\n",
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "llf",
                        "default": "edf",
                    },
                    "resources": {
                        "description": "How many Spark jobs the cluster runs at once.\n",
                        "version_added": "0.1.0",
                        "type": "integer",
                        "example": "2",
                        "default": "1",
                    },
                    "lease_seconds": {
                        "description": "A job that stops heartbeating loses its resource after this long.\n",
                        "version_added": "0.1.0",
                        "type": "float",
                        "example": "120",
                        "default": "10",
                    },
                    "resume_seconds": {
                        "description": (
                            "How much longer than a lease a grant waits for its task to take it: a task "
                            "deferred in the triggerer resumes through the scheduler, the executor and a new "
                            "task process.\n"
                        ),
                        "version_added": "0.1.0",
                        "type": "float",
                        "example": "60",
                        "default": "30",
                    },
                    "cores": {
                        "description": (
                            "The cores a grant gives its Spark job: unset, what the Spark connection gives "
                            "(its `cores` extra, else the master's default); a number, that many for every job; "
                            "`plan`, the capacity plan's for the current phase of the registered queries' windows "
                            "(open or closed), as `iqp check --capacity` prints it.\n"
                        ),
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "plan",
                        "default": None,
                    },
                    "max_cores": {
                        "description": "With cores = plan: the most cores the plan may give a job (the cluster's).\n",
                        "version_added": "0.1.0",
                        "type": "integer",
                        "example": "8",
                        "default": "64",
                    },
                    "speedup": {
                        "description": (
                            "With cores = plan: how much faster a job runs on more cores, as measured "
                            "(benchmarks/per_core.py): cores:speedup points from 1:1, e.g. 1:1,2:1.6,4:2.5. "
                            "Unset: Amdahl's law with 10% of every job serial, a labelled default.\n"
                        ),
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "1:1,2:1.6",
                        "default": None,
                    },
                    "deadline_alerts": {
                        "description": (
                            "Whether IQP DAGs declare an Airflow Deadline Alert at each window's deadline. "
                            "False leaves misses to the ledger and the /iqp monitor (no Deadlines, no "
                            "callbacks). A run of `airflow dags test` has none either way "
                            "(apache/airflow#73428 would fail it).\n"
                        ),
                        "version_added": "0.1.0",
                        "type": "boolean",
                        "example": "False",
                        "default": "True",
                    },
                    "batch_task_seconds": {
                        "description": (
                            "What Airflow spends on each batch's task (its process, and the scheduler's "
                            "and triggerer's share), in CPU-seconds. Dynamic mode's MinBatch adds it to "
                            "every batch when it weighs more batches against alpha (not against tau_max): "
                            "where tasks are dear, batches are fewer. 1.7 was measured on 2 cores.\n"
                        ),
                        "version_added": "0.1.0",
                        "type": "float",
                        "example": "0.5",
                        "default": "1.7",
                    },
                    "prior_models": {
                        "description": (
                            "A directory of cost-model files (`iqp fit-cost-model`'s format) that a packaged "
                            "query learning its cost model starts from, where one has the query and path, "
                            "instead of the packaged cost_models/. `make demo` fits them on its machine.\n"
                        ),
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "/path/to/.demo/priors",
                        "default": None,
                    },
                },
            }
        },
    }
