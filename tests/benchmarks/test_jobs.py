from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from airflow_iqp.constants import ExecutionPath
from airflow_iqp.queries import load_query
from airflow_iqp.spark import connect
from airflow_iqp.spark.connect_server import ConnectServer
from airflow_iqp.spark.jobs import merge_job, partial_job
from benchmarks.ssbench import jobs
from benchmarks.ssbench.systems import SPARK_CONF


def test_a_partial_spec_names_the_batch_files_and_the_generated_static_tables(tmp_path):
    batch = {"lineitem": [tmp_path / "landing" / "lineitem" / "part-00003.parquet"]}
    spec = jobs.partial_spec(load_query("q14"), tmp_path / "source", batch, tmp_path / "work" / "batch-0000")
    assert spec.name == "q14"
    assert Path(spec.query) == load_query("q14").path
    assert spec.streams["lineitem"].files == [str(batch["lineitem"][0])]
    assert spec.static["part"].path == str(tmp_path / "source" / "static" / "part")
    assert spec.output == str(tmp_path / "work" / "batch-0000")


def test_a_merge_spec_keeps_the_partials_in_order(tmp_path):
    partials = [tmp_path / "batch-0001", tmp_path / "batch-0000"]
    spec = jobs.merge_spec(load_query("q3"), partials, tmp_path / "result")
    assert spec.partials == [str(p) for p in partials]
    assert sorted(spec.streams) == ["lineitem", "orders"]


@dataclass
class FakeConf:
    values: dict[str, str] = field(default_factory=dict)

    def set(self, key, value):
        self.values[key] = value


@dataclass
class FakeSpark:
    conf: FakeConf


@dataclass
class FakeJob:
    """Stands in for ConnectJob: records each session it opens and the conf set in it."""

    opened: list = field(default_factory=list)

    def __call__(self, url, tag, shared, last):
        session = {"url": url, "tag": tag, "shared": shared, "last": last}
        self.opened.append({**session, "spark": FakeSpark(FakeConf()), "open": False})
        return self

    def __enter__(self):
        self.opened[-1]["open"] = True
        return self

    def __exit__(self, *exc):
        self.opened[-1]["open"] = False

    @property
    def spark(self):
        return self.opened[-1]["spark"]


@pytest.fixture
def connect_path(tmp_path, monkeypatch):
    started: list[dict[str, str]] = []
    stopped: list[Path] = []

    def start(state_dir, *, port, master, driver_memory):
        started.append({"master": master, "driver_memory": driver_memory})
        return ConnectServer(pid=4242, port=port, master=master, state_dir=state_dir, token="t0k")

    job = FakeJob()
    runs: list[tuple[str, object, object]] = []
    monkeypatch.setattr(jobs.connect_server, "start", start)
    monkeypatch.setattr(jobs.connect_server, "stop", stopped.append)
    monkeypatch.setattr(connect, "ConnectJob", job)
    monkeypatch.setattr(partial_job, "run", lambda spec, spark: runs.append(("partial", spec, spark)))
    monkeypatch.setattr(merge_job, "run", lambda spec, spark: runs.append(("merge", spec, spark)))
    path = jobs.JOB_PATHS[ExecutionPath.SPARK_CONNECT](SPARK_CONF, "q6", tmp_path / "source", tmp_path / "work")
    return path, started, stopped, job, runs


def test_connect_starts_its_server_with_the_shared_conf_and_names_it_as_the_spark_side(connect_path, tmp_path):
    path, started, _, _, _ = connect_path
    assert started == [{"master": SPARK_CONF["spark.master"], "driver_memory": SPARK_CONF["spark.driver.memory"]}]
    assert path.spark_pids == frozenset({4242})
    assert path.warm_spark  # the server outlives the jobs: warmed up before the window like in_process


def test_connect_runs_a_windows_jobs_in_its_session_with_the_sql_conf(connect_path, tmp_path):
    path, _, stopped, job, runs = connect_path
    for window in ("w0", "w1"):
        path.partial({"lineitem": [tmp_path / "a.parquet"]}, tmp_path / window / "batch-0000")
        path.merge([tmp_path / window / "batch-0000"], tmp_path / window / "result")
    assert [kind for kind, _, _ in runs] == ["partial", "merge"] * 2
    assert len(job.opened) == 4
    sessions = [s["shared"] for s in job.opened]
    assert sessions[0] == sessions[1] != sessions[2] == sessions[3]  # one session per window
    assert [s["last"] for s in job.opened] == [False, True] * 2  # the merge releases it
    assert all(s["url"].endswith(";token=t0k") and s["tag"] == jobs.CONNECT_TAG for s in job.opened)
    sql_conf = {k: v for k, v in SPARK_CONF.items() if k.startswith("spark.sql.")}
    assert all(s["spark"].conf.values == sql_conf for s in job.opened)
    assert all(spark is opened["spark"] for (_, _, spark), opened in zip(runs, job.opened, strict=True))
    assert not any(s["open"] for s in job.opened)
    path.close()
    assert stopped == [tmp_path / "work" / "connect-server"]
