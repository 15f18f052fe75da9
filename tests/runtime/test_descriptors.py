"""What the `plan` task hands each mapped partial task: a static batch or a dynamic slot, read
back from plain JSON values by its kind."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from airflow_iqp.runtime.descriptors import DynamicSlot, StaticBatch, descriptor
from airflow_iqp.runtime.inputs import InputSpec
from airflow_iqp.streams.spec import FileStream

T0 = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
INPUT = InputSpec.of({"lineitem": FileStream("/data/lineitem")}, T0, timedelta(minutes=2)).to_dict()
BATCH = StaticBatch(
    window_id=3, index=1, upto=12, planned_start=T0 + timedelta(seconds=90), predicted_cost=4.5, input=INPUT
)
SLOT = DynamicSlot(window_id=3, slot=2, slots=5, input=INPUT, expected_files=40, min_batch=8, max_batch=12)


def over_the_wire(data: dict[str, Any]) -> dict[str, Any]:
    """As XCom and trigger kwargs carry it: JSON."""
    loaded: dict[str, Any] = json.loads(json.dumps(data))
    return loaded


@pytest.mark.parametrize("sent", [BATCH, SLOT])
def test_each_kind_travels_as_plain_values_and_comes_back_as_itself(sent: StaticBatch | DynamicSlot) -> None:
    data = over_the_wire(sent.to_dict())
    assert data["kind"] == sent.kind
    assert descriptor(data) == sent
    assert descriptor(data).window_input.window_start == T0


def test_descriptors_handed_out_before_they_named_their_kind_still_read() -> None:
    """A run planned before an upgrade: its XCom and its deferred triggers hold no `kind`."""
    batch = {k: v for k, v in over_the_wire(BATCH.to_dict()).items() if k != "kind"}
    slot = {k: v for k, v in over_the_wire(SLOT.to_dict()).items() if k != "kind"}
    assert descriptor(batch) == BATCH
    assert descriptor(slot) == SLOT


def test_a_descriptor_of_one_kind_with_the_others_fields_is_refused() -> None:
    with pytest.raises(ValidationError):
        descriptor(over_the_wire(SLOT.to_dict()) | {"kind": "batch"})


def test_a_planned_batch_is_labelled_by_what_it_takes_and_when() -> None:
    assert BATCH.label == "batch 1 · units ..12 · start 10:01:30"
    assert BATCH.model_copy(update={"upto": None}).label == "batch 1 · the rest · start 10:01:30"
    assert SLOT.label == "slot 2"
