"""What a DAG file declares about one intermittent query, checked when the DAG file is parsed.

A declaration names a query file, a window, a deadline after the window end, the streams its
input arrives on (`FileStream`s) and its static tables, where each window's result goes, the
expected arrival rate (or "learn") and a cost model (a fitted file, or "learn"). Everything that
can be wrong with it is found here, at parse time, with a message that says what to fix, so a
broken declaration never reaches a worker.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, TypeVar
from urllib.parse import urlsplit

from airflow_iqp.constants import ExecutionPath, Mode, OnCorrupt, OnLate
from airflow_iqp.example_files import example_dir
from airflow_iqp.exceptions import InvalidDeclaration
from airflow_iqp.planning.cost_model_file import FittedCostModel, fitted_paths, load_cost_model
from airflow_iqp.queries import QueryDefinition, load_query
from airflow_iqp.results.template import OutputTemplate
from airflow_iqp.runtime.sizing import dynamic_batching, plan_files
from airflow_iqp.settings import LOCAL_MASTER
from airflow_iqp.spark.paths import PATH_OF_CONN_TYPE
from airflow_iqp.sql import Decomposition, decompose
from airflow_iqp.streams.spec import FileStream
from airflow_iqp.streams.static import StaticInput, static_input
from airflow_iqp.validation import number

if TYPE_CHECKING:
    from collections.abc import Iterable

    from airflow_iqp.planning import PiecewiseLinearCost

_E = TypeVar("_E", bound=StrEnum)
EXAMPLE_COST_MODELS = example_dir("cost_models")
LEARN: Literal["learn"] = "learn"
RUNS_ON = (ExecutionPath.SPARK_SUBMIT, ExecutionPath.SPARK_CONNECT)  # the paths a Spark connection picks


class CostModel(Protocol):
    """A partial model (seconds by rows) and a merge model (seconds by partials): a fitted file's
    or a learned one's; a fitted one is also what a learned fit starts from (`fit_cost`'s prior).
    """

    @property
    def partial(self) -> PiecewiseLinearCost:
        """Seconds of one partial job by its input rows."""

    @property
    def merge(self) -> PiecewiseLinearCost:
        """Seconds of the merge job by the partials it merges."""


@dataclass(frozen=True)
class ArrivalRate:
    """Expected input: stream files per second, each holding about rows_per_file rows."""

    files_per_second: float
    rows_per_file: float

    def __post_init__(self) -> None:
        for name in ("files_per_second", "rows_per_file"):
            try:
                value = number(getattr(self, name), f"rate.{name}", above=0)
            except ValueError as err:
                raise InvalidDeclaration(str(err)) from None
            object.__setattr__(self, name, value)

    def files_in(self, window: timedelta) -> int:
        """Files expected in one window; at least one, so every window plans a batch."""
        return max(1, round(window.total_seconds() * self.files_per_second))


@dataclass(frozen=True)
class Declaration:
    """One intermittent query as its DAG file declared it, checked whole by `declare`."""

    dag_id: str
    query: QueryDefinition
    decomposition: Decomposition
    window: timedelta
    deadline: timedelta  # after the window end
    streams: Mapping[str, FileStream] = field(hash=False)
    static: Mapping[str, StaticInput] = field(hash=False)
    output: OutputTemplate
    output_conn_id: str | None
    rate: ArrivalRate | Literal["learn"]
    cost_model: Path | Literal["learn"]  # a fitted model file, or learned from the DAG's own jobs
    mode: Mode = Mode.STATIC  # static: batches planned per window; dynamic: MinBatch, picked live
    alpha: float | None = None  # dynamic: batched cost may exceed one batch by this fraction
    tau_max: float | None = None  # dynamic: seconds one batch may hold the shared resource
    on_late: OnLate = OnLate.RECORD
    on_corrupt: OnCorrupt = OnCorrupt.FAIL
    dag_folder: Path | None = None  # the DAG file's folder: the plan prices the queries declared beside it

    @property
    def name(self) -> str:
        """The query's name (its file's stem)."""
        return self.query.name

    @property
    def learns_cost(self) -> bool:
        """Whether the cost model is learned from the DAG's own jobs."""
        return self.cost_model == LEARN

    def fitted_model(self, path: ExecutionPath) -> FittedCostModel:
        """The declared model file's section for an execution path."""
        if self.cost_model == LEARN:
            raise InvalidDeclaration(f"{self.dag_id} learns its cost model: there is no fitted file to read")
        try:
            return load_cost_model(self.cost_model, path)
        except ValueError as err:
            raise InvalidDeclaration(f"cost_model: {err} (fit one with `iqp fit-cost-model`)") from None

    def dynamic_limits(self) -> tuple[float, float]:
        """The MinBatch limits (alpha, tau_max), which only a dynamic declaration has."""
        if self.alpha is None or self.tau_max is None:
            raise InvalidDeclaration(
                f"{self.dag_id} is declared mode={self.mode.value!r}: it has no alpha and tau_max to size MinBatch with"
            )
        return self.alpha, self.tau_max


def declare(
    *,
    dag_id: str,
    query: str | Path,
    window: timedelta,
    deadline: timedelta,
    streams: Mapping[str, FileStream],
    output: str,
    output_conn_id: str | None = None,
    static: Mapping[str, str] | None = None,
    rate: ArrivalRate | Literal["learn"] = LEARN,
    cost_model: str | Path = LEARN,
    mode: Mode | str = Mode.STATIC,
    alpha: float | None = None,
    tau_max: float | timedelta | None = None,
    on_late: OnLate | str = OnLate.RECORD,
    on_corrupt: OnCorrupt | str = OnCorrupt.FAIL,
    base_dir: Path | None = None,
    execution_path: ExecutionPath | None = None,
) -> Declaration:
    """Check a declaration whole; the first problem found is raised as InvalidDeclaration.

    `base_dir` is the DAG file's folder, against which a relative query path is resolved, and
    where the plan task finds the queries declared beside this one (`dag_folder`). A
    fitted cost model must meet the deadline on `execution_path`, or (None) on one of the paths
    a Spark connection can pick that the file fits: which one runs is known only in the task.
    """
    try:
        definition = load_query(query, base_dir)
    except ValueError as err:
        raise InvalidDeclaration(f"query: {err}") from None
    checked_streams = _check_streams(streams)
    checked_static = {name: static_input(name, value) for name, value in (static or {}).items()}
    _check_tables(definition, checked_streams, checked_static)
    try:
        decomposition = decompose(definition.sql, checked_streams)
    except ValueError as err:  # UnsupportedQuery and parse errors
        raise InvalidDeclaration(f"query {definition.name} ({definition.path}): {err}") from None
    if not isinstance(window, timedelta) or window <= timedelta(0):
        raise InvalidDeclaration(f"window must be a positive timedelta, got {window!r}")
    if not isinstance(deadline, timedelta) or deadline < timedelta(0):
        raise InvalidDeclaration(f"deadline must be a timedelta >= 0 after the window end, got {deadline!r}")
    if rate != LEARN and not isinstance(rate, ArrivalRate):
        raise InvalidDeclaration(
            f"rate must be ArrivalRate(files_per_second=..., rows_per_file=...) or 'learn', got {rate!r}"
        )
    if isinstance(tau_max, timedelta):
        tau_max = tau_max.total_seconds()
    checked_mode, alpha, tau_max = _check_mode(mode, alpha, tau_max)
    declaration = Declaration(
        dag_id=dag_id,
        query=definition,
        decomposition=decomposition,
        window=window,
        deadline=deadline,
        streams=checked_streams,
        static=checked_static,
        output=OutputTemplate(output),
        output_conn_id=output_conn_id,
        rate=rate,
        cost_model=_resolve_cost_model(cost_model, base_dir),
        mode=checked_mode,
        alpha=alpha,
        tau_max=tau_max,
        on_late=_choice(on_late, OnLate, "on_late"),
        on_corrupt=_choice(on_corrupt, OnCorrupt, "on_corrupt"),
        dag_folder=base_dir,
    )
    if isinstance(rate, ArrivalRate) and isinstance(declaration.cost_model, Path):
        fitted = [p for p in fitted_paths(declaration.cost_model) if p in RUNS_ON]
        paths = [execution_path] if execution_path else fitted
        problems = []
        for path in paths or [ExecutionPath.SPARK_SUBMIT]:  # a file fitting neither: the error names the section
            try:
                _check_feasible(declaration, rate, declaration.fitted_model(path))
                break
            except InvalidDeclaration as err:
                problems.append((path, err))
        else:
            if len(problems) == 1:
                raise problems[0][1]
            raise InvalidDeclaration("; ".join(f"on {path.value}: {err}" for path, err in problems))
    return declaration


def check_work_dir(work_dir: str | Path | None, spark_conn_id: str) -> None:
    """A Spark cluster on other machines writes the jobs' outputs under `work_dir` on its own
    machines, and the task renames them there: it must be a directory every Airflow worker and
    every Spark node share. Not declared, it is $AIRFLOW_HOME/iqp on each machine, so with a
    connection that sends jobs to another machine (`remote_spark`) the declaration is refused,
    saying what to declare. A declared `work_dir` is taken to be shared: that cannot be seen from
    here. A connection not defined where the file is parsed is left to the task, which names it.
    """
    if work_dir is not None:
        return
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        conn = BaseHook.get_connection(spark_conn_id)
    except AirflowNotFoundException:
        return
    remote = remote_spark(conn.conn_type, conn.host)
    if remote is not None:
        raise InvalidDeclaration(
            f"work_dir is not declared, so job specs and partial outputs go to $AIRFLOW_HOME/iqp on whichever "
            f"machine runs each task, but connection {spark_conn_id!r} sends the jobs to {remote}, whose "
            "executors write there on their own machines: declare work_dir= a directory that every Airflow "
            "worker and every Spark node mount at the same path (a shared volume, NFS)"
        )


def remote_spark(conn_type: str | None, host: str | None) -> str | None:
    """The Spark master or Connect server a connection of this type sends jobs to, if it is on
    another machine: not a `local` master, not on loopback. None for a type no IQP job runs on.
    """
    if conn_type not in PATH_OF_CONN_TYPE or not host or LOCAL_MASTER.fullmatch(host.strip()):
        return None
    address = host.strip()
    try:
        name = urlsplit(address if "://" in address else f"//{address}").hostname
    except ValueError:  # e.g. several masters, spark://a:7077,b:7077
        return address
    return None if name is not None and _loopback(name) else address


def _loopback(name: str) -> bool:
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _check_feasible(declaration: Declaration, rate: ArrivalRate, model: CostModel) -> None:
    """With a declared rate and a fitted model, an unmeetable deadline is found at parse time."""
    if declaration.mode is Mode.DYNAMIC:
        dynamic_batching(declaration, rate, model)  # tau_max against one file's cost
        return
    planned = plan_files(declaration, rate, model)
    if planned.plan.earliest_deadline is not None:  # set exactly when the deadline cannot be met
        window_s = declaration.window.total_seconds()
        earliest = planned.plan.earliest_deadline + planned.merge_seconds - window_s
        raise InvalidDeclaration(
            f"deadline {declaration.deadline.total_seconds():g} s after the window end can never be met for "
            f"{rate.files_in(declaration.window)} files of ~{rate.rows_per_file:g} rows per window: the earliest "
            f"feasible deadline is {math.ceil(earliest * 10) / 10:g} s after the window end"
        )


def _check_streams(streams: object) -> dict[str, FileStream]:
    if not isinstance(streams, Mapping) or not streams:
        raise InvalidDeclaration(
            "streams must map each stream table the query reads to a FileStream, e.g. "
            "streams={'sales': FileStream('/data/sales/')}"
        )
    checked: dict[str, FileStream] = {}
    for name, stream in streams.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise InvalidDeclaration(f"streams: {name!r} is not a table name")
        if not isinstance(stream, FileStream):
            raise InvalidDeclaration(f"streams[{name!r}] must be a FileStream(...), got {stream!r}")
        checked[name.lower()] = stream
    return checked


def _check_tables(query: QueryDefinition, streams: Iterable[str], static: Mapping[str, StaticInput]) -> None:
    """Every table the SQL reads is declared exactly once, as a stream or a static input."""
    streams, static_names = set(streams), set(static)
    both = streams & static_names
    if both:
        raise InvalidDeclaration(f"declared both as stream and static: {', '.join(sorted(both))}")
    undeclared = sorted(query.tables - streams - static_names)
    if undeclared:
        raise InvalidDeclaration(
            f"query {query.name} ({query.path}) reads {', '.join(undeclared)}, declared neither in streams= "
            "(a FileStream) nor in static= (a path, or a Spark catalog table name)"
        )
    unread = sorted((streams | static_names) - query.tables)
    if unread:
        names = ", ".join(unread)
        raise InvalidDeclaration(f"query {query.name} ({query.path}) does not read declared table(s) {names}")
    if query.header is not None and set(query.header.streams) != streams:
        raise InvalidDeclaration(
            f"query {query.name}'s header names streams {', '.join(query.header.streams)}, "
            f"but streams= declares {', '.join(sorted(streams))}"
        )


def _resolve_cost_model(cost_model: str | Path, base_dir: Path | None) -> Path | Literal["learn"]:
    """'learn', a packaged example's name (`q6`), or a model file (relative to the DAG file's folder)."""
    if cost_model == LEARN:
        return LEARN
    path = Path(cost_model)
    if path.suffix != ".json":
        path = EXAMPLE_COST_MODELS / f"{cost_model}.json"
    elif not path.is_absolute():
        path = (base_dir or Path.cwd()) / path
    if not path.is_file():
        raise InvalidDeclaration(
            f"cost_model {str(cost_model)!r}: {path} does not exist; give 'learn', a fitted model file "
            "(`iqp fit-cost-model`), or a packaged example's name"
        )
    return path


def _choice(value: object, kind: type[_E], name: str) -> _E:
    try:
        return kind(str(value))
    except ValueError:
        raise InvalidDeclaration(
            f"{name} must be one of {', '.join(repr(v.value) for v in kind)}, got {value!r}"
        ) from None


def _check_mode(mode: str, alpha: object, tau_max: object) -> tuple[Mode, float | None, float | None]:
    """The mode and, in dynamic mode, alpha and tau_max as checked floats."""
    checked = _choice(mode, Mode, "mode")
    if checked is Mode.STATIC:
        if alpha is not None or tau_max is not None:
            raise InvalidDeclaration("alpha and tau_max apply to mode='dynamic' only; static mode plans its batches")
        return checked, None, None
    checked_alpha = _positive(alpha, "alpha", "a number > 0 (how much batching may add to one batch's cost, e.g. 0.5)")
    checked_tau_max = _positive(
        tau_max,
        "tau_max",
        "a positive timedelta or number of seconds (how long one batch may hold the shared Spark resource)",
    )
    return checked, checked_alpha, checked_tau_max


def _positive(value: object, name: str, meaning: str) -> float:
    """`value` as a number > 0, or InvalidDeclaration saying what `name` must be: `meaning`."""
    try:
        return number(value, name, above=0)
    except ValueError:
        raise InvalidDeclaration(f"{name} must be {meaning}, got {value!r}") from None
