"""`iqp simulate --workload FILE.json`: queries described by hand instead of fitted models.

The file is checked by pydantic models, strictly (a number is a JSON number, never a string or
a bool; no NaN or infinity; no unknown field), and every problem is reported with the path of
the field to fix, e.g. `workload.queries[2].cost.points[0][1]`.

    {
      "window_end": 100,                      # seconds >= 0, shared by every query
      "queries": [
        {
          "name": "q1",
          "cost": {"points": [[tuples, seconds], ...]} | {"per_tuple": s, "overhead": s},
          "merge": same forms as "cost" (optional: merges are free),
          "arrival": {"points": [[time, cumulative tuples], ...]} | {"start": s, "end": s, "total": n},
          "total": n | null,                  # optional: the arrival's tuples; null = unknown
          "submit_at": s                      # optional: the first arrival
        }
      ]
    }
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from airflow_iqp.field_errors import common
from airflow_iqp.planning.arrival import ArrivalCurve
from airflow_iqp.planning.cost import LinearCost, PiecewiseLinearCost
from airflow_iqp.simulation.engine import SimQuery

if TYPE_CHECKING:
    from pathlib import Path

    from pydantic_core import ErrorDetails

Seconds = Annotated[float, Field(ge=0)]
Tuples = Annotated[int, Field(ge=0)]


class _Section(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, frozen=True)


class CostSection(_Section):
    """A cost model: measured points, or a per-tuple rate plus a per-batch overhead."""

    points: Annotated[list[tuple[Seconds, Seconds]], Field(min_length=1)] | None = None
    per_tuple: Seconds | None = None
    overhead: Seconds | None = None

    @model_validator(mode="after")
    def _one_form(self) -> CostSection:
        if (self.points is None) == (self.per_tuple is None) or (self.points and self.overhead is not None):
            raise ValueError("give either 'points' or 'per_tuple' (with an optional 'overhead')")
        self.model()  # the points' order
        return self

    def model(self) -> LinearCost | PiecewiseLinearCost:
        """The cost model this section describes."""
        if self.points is not None:
            return PiecewiseLinearCost(self.points)
        return LinearCost(self.per_tuple or 0.0, self.overhead or 0.0)


class ArrivalSection(_Section):
    """An arrival curve: cumulative (time, tuples) points, or a fixed rate from start to end."""

    points: Annotated[list[tuple[Seconds, Tuples]], Field(min_length=1)] | None = None
    start: Seconds | None = None
    end: Seconds | None = None
    total: Annotated[int, Field(ge=1)] | None = None

    @model_validator(mode="after")
    def _one_form(self) -> ArrivalSection:
        rate = (self.start, self.end, self.total)
        if (self.points is None) == all(v is None for v in rate) or (self.points is None and None in rate):
            raise ValueError("give either 'points' or all of 'start', 'end' and 'total'")
        if self.curve().total < 1:
            raise ValueError("must deliver at least one tuple")
        return self

    def curve(self) -> ArrivalCurve:
        """The arrival curve this section describes."""
        if self.points is not None:
            return ArrivalCurve.from_points(self.points)
        return ArrivalCurve.fixed_rate(self.start or 0.0, self.end or 0.0, self.total or 0)


class QuerySection(_Section):
    """One query of the workload."""

    name: str
    cost: CostSection
    merge: CostSection | None = None
    arrival: ArrivalSection
    total: Annotated[int, Field(ge=1)] | None = None  # absent: the arrival's; null: unknown
    submit_at: Seconds | None = None

    @field_validator("name")
    @classmethod
    def _named(cls, name: str) -> str:
        if not name.strip():
            raise ValueError("must be a non-empty string")
        return name

    @model_validator(mode="after")
    def _total_fits(self) -> QuerySection:
        delivered = self.arrival.curve().total
        if self.total is not None and self.total > delivered:
            raise ValueError(f"total ({self.total}) exceeds the {delivered} tuples of its arrival")
        return self

    def query(self, window_end: float) -> SimQuery:
        """The simulator's query; its deadline is the window end until the protocol staggers it."""
        arrival = self.arrival.curve()
        return SimQuery(
            name=self.name,
            total=self.total if "total" in self.model_fields_set else arrival.total,
            arrival=arrival,
            window_end=window_end,
            deadline=window_end,
            cost=self.cost.model(),
            agg_cost=None if self.merge is None else self.merge.model(),
            submit_at=self.submit_at,
        )


class Workload(_Section):
    """The whole file: one window end shared by every query."""

    window_end: Seconds
    queries: Annotated[list[QuerySection], Field(min_length=1)]

    @field_validator("queries")
    @classmethod
    def _names_differ(cls, queries: list[QuerySection]) -> list[QuerySection]:
        first: dict[str, int] = {}
        for i, q in enumerate(queries):
            if q.name in first:
                raise ValueError(f"names must differ: queries[{i}] is named {q.name!r} like queries[{first[q.name]}]")
            first[q.name] = i
        return queries

    def sim_queries(self) -> list[SimQuery]:
        """The simulator's queries, in the file's order."""
        return [q.query(self.window_end) for q in self.queries]


def _where(loc: tuple[int | str, ...]) -> str:
    return "workload" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc)


def _describe(error: ErrorDetails) -> str:
    """One pydantic error as `<path> <what is wrong>`."""
    if (told := common(error, _where)) is not None:
        return told
    where, kind, message = _where(error["loc"]), error["type"], error["msg"]
    if kind == "too_short":
        return f"{where} must not be empty"
    if kind == "model_type":
        return f"{where} must be a JSON object, got {error['input']!r}"
    return f"{where} {message.replace('Input should be', 'must be', 1)}, got {error['input']!r}"


def load_workload(file: Path) -> tuple[list[SimQuery], float]:
    """The queries of a workload file and their shared window end; ValueError saying what to fix."""
    try:
        text = file.read_text()
    except FileNotFoundError:
        raise ValueError(f"--workload {file} does not exist") from None
    except OSError as err:
        raise ValueError(f"--workload {file} cannot be read: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise ValueError(f"--workload {file} is not UTF-8 text: {err}") from None
    try:
        workload = Workload.model_validate_json(text)
    except ValidationError as err:
        errors = err.errors()
        if errors[0]["type"] == "json_invalid":
            raise ValueError(f"--workload {file} is not valid JSON: {errors[0]['ctx']['error']}") from None
        problems = [_describe(e) for e in errors]
        raise ValueError(f"--workload {file}: " + "; ".join(problems)) from None
    return workload.sim_queries(), workload.window_end
