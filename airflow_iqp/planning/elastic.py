"""Leasing cores by the billing time unit (BTU): what a provider bills is every started unit.

A core leased at `start` is paid per started `btu` seconds (a VM or executor billed per
started minute or hour), so releasing it before its unit ends saves nothing: Hochreiner et
al.'s BTU-based provisioning keeps a core it no longer needs until the end of its paid unit
and releases it then unless the plan needs it again, while a threshold controller releases as
soon as it is idle and pays the started unit all the same. `LeasePool` does both
(`need` and `release_now`) and bills started units x cores; `enact` applies the same rule to
a cluster's running executors (the Connect server's lease controller, `spark.lease_driver`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_iqp.validation import number, whole_number

if TYPE_CHECKING:
    from collections.abc import Mapping


@dataclass
class Lease:
    """One core from `start`; `end` is when it is released (None: still held, or set ahead
    to the end of its paid unit, when it will be released unless needed again).
    """

    start: float
    end: float | None = None

    def held(self, now: float) -> bool:
        """Leased at `now` (and a release at the end of its unit has not come yet)."""
        return self.start <= now and (self.end is None or self.end > now)

    def unit_end(self, now: float, btu: float) -> float:
        """The end of the unit being paid at `now` (at least the first unit's)."""
        return self.start + max(1, math.ceil((now - self.start) / btu)) * btu

    def units(self, btu: float) -> int:
        """Started units of a released lease."""
        if self.end is None:
            raise ValueError("a held lease has no bill yet")
        return max(1, math.ceil((self.end - self.start) / btu))


class LeasePool:
    """The cores leased over time, one `Lease` per core, billed by `btu`."""

    def __init__(self, btu: float) -> None:
        self.btu = number(btu, "btu", above=0)
        self.leases: list[Lease] = []

    def held(self, now: float) -> int:
        """Cores leased at `now`, those waiting for their unit's end included: they are paid."""
        return sum(lease.held(now) for lease in self.leases)

    def need(self, now: float, cores: int) -> None:
        """The plan needs `cores` from `now` on: keep those due for release (cancelling it),
        lease the shortfall, and release any surplus at the end of its paid unit (those whose
        unit ends first go first).
        """
        whole_number(cores, "cores", minimum=0)
        held = [lease for lease in self.leases if lease.held(now)]
        kept = sorted(held, key=lambda lease: lease.unit_end(now, self.btu), reverse=True)  # paid longest first
        for lease in kept[:cores]:
            lease.end = None
        for lease in kept[cores:]:
            if lease.end is None:
                lease.end = lease.unit_end(now, self.btu)
        self.leases.extend(Lease(now) for _ in range(cores - len(held)))

    def release_now(self, now: float, cores: int) -> None:
        """Release `cores` at once (a threshold controller's down-scaling): the started unit is billed."""
        whole_number(cores, "cores", minimum=0)
        for lease in [lease for lease in self.leases if lease.held(now)][:cores]:
            lease.end = now

    def close(self, now: float) -> None:
        """Nothing more to run: every core goes at the end of its paid unit."""
        self.need(now, 0)

    def billed(self) -> float:
        """Core-seconds a provider bills: started units x btu, over every core; every lease must be released."""
        return math.fsum(lease.units(self.btu) * self.btu for lease in self.leases)

    def peak(self) -> int:
        """The most cores leased at once."""
        starts = [(lease.start, 1) for lease in self.leases]
        ends = [(math.inf if lease.end is None else lease.end, -1) for lease in self.leases]
        events = sorted(starts + ends)  # a release before a lease at the same time
        most = held = 0
        for _, change in events:
            held += change
            most = max(most, held)
        return most


@dataclass(frozen=True)
class Enactment:
    """What a controller holding executors does now: ask the cluster for `total` of them, and
    release those in `release` (their paid unit is about to end and the plan needs them no more).
    """

    total: int
    release: tuple[str, ...]


def enact(started: Mapping[str, float], need: int, now: float, btu: float, notice: float) -> Enactment:
    """The BTU rule of `LeasePool.need` applied to running executors (`started`: each one's
    registration time): the shortfall is asked for at once; a surplus executor is kept to the
    end of its paid unit and released within `notice` seconds of it (a kill takes a moment,
    and the provider's clock starts before the executor registers), those whose unit ends
    first going first; one the plan needs again before then is kept.
    """
    whole_number(need, "need", minimum=0)
    number(notice, "notice", minimum=0)
    pool = LeasePool(btu)
    ids = sorted(started, key=lambda executor: started[executor])
    pool.leases = [Lease(started[executor]) for executor in ids]
    pool.need(now, need)
    release = tuple(
        executor for executor, lease in zip(ids, pool.leases) if lease.end is not None and lease.end - now <= notice
    )
    return Enactment(total=max(need, len(ids) - len(release)), release=release)
