from __future__ import annotations

from airflow_iqp.constants import ExecutionPath
from benchmarks.ssbench.measure import Selector
from benchmarks.ssbench.spark_worker import CONFIGS, WorkerSystem, spark_side


def test_the_spark_side_is_the_named_server_else_the_jobs_children_else_the_worker():
    assert spark_side(100, [7, 9], jobs_elsewhere=True) == Selector(pids=frozenset({7, 9}))
    assert spark_side(100, [], jobs_elsewhere=True) == Selector(parents=frozenset({100}))
    assert spark_side(100, [], jobs_elsewhere=False) == Selector(pids=frozenset({100}))


def test_ours_on_connect_runs_its_jobs_outside_the_worker():
    for config, path in (("IQP-1D-connect", ExecutionPath.SPARK_CONNECT), ("IQP-dyn", ExecutionPath.IN_PROCESS)):
        system = CONFIGS[config]()
        assert isinstance(system, WorkerSystem)
        assert system.settings["path"] == path.value
        assert system.jobs_elsewhere is (path is not ExecutionPath.IN_PROCESS)
