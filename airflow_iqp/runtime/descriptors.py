"""What the `plan` task hands each mapped `partial_aggregate` task: a planned static batch or a
dynamic slot, told apart by `kind`. Plain values on the wire (they travel in XCom and in trigger
kwargs); `descriptor` reads either back.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from airflow_iqp.runtime.inputs import InputSpec

if TYPE_CHECKING:
    from collections.abc import Mapping


class _Descriptor(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    window_id: int
    input: dict[str, Any]  # InputSpec.to_dict()

    @property
    def window_input(self) -> InputSpec:
        """Where the window's input lands."""
        return InputSpec.from_dict(self.input)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values; `descriptor` reads them back."""
        return self.model_dump(mode="json")


class StaticBatch(_Descriptor):
    """One planned batch: the window's units up to `upto` (None: the rest, once the input is final)."""

    kind: Literal["batch"] = "batch"
    index: int
    upto: int | None
    planned_start: datetime
    predicted_cost: float

    @property
    def label(self) -> str:
        """Map-index label: which batch, how far into the window, when it starts."""
        upto = "the rest" if self.upto is None else f"units ..{self.upto}"
        return f"batch {self.index} · {upto} · start {self.planned_start.strftime('%H:%M:%S')}"


class DynamicSlot(_Descriptor):
    """One slot of a dynamic window (`runtime.slots`): it cuts a batch when one is eligible."""

    kind: Literal["slot"] = "slot"
    slot: int
    slots: int
    expected_files: int
    min_batch: int
    max_batch: int
    first_unit: bool = False  # the window's first batch is one unit (`runtime.costs.measures_intercept`)
    planned_at: float = 0.0  # epoch seconds the slots were handed out; 0: planned before they took turns

    @property
    def label(self) -> str:
        """Map-index label until the slot cuts its batch."""
        return f"slot {self.slot}"


Descriptor = StaticBatch | DynamicSlot
_DESCRIPTOR: TypeAdapter[Descriptor] = TypeAdapter(Annotated[Descriptor, Field(discriminator="kind")])


def descriptor(data: Mapping[str, Any]) -> Descriptor:
    """The batch or slot `to_dict` gave. One handed out before descriptors named their kind (a
    run planned before an upgrade) is a slot if it has one.
    """
    if "kind" not in data:
        data = {**data, "kind": "slot" if "slot" in data else "batch"}
    return _DESCRIPTOR.validate_python(data)
