"""Leasing cores by the billing time unit (BTU): what a provider bills is every started unit.

A core leased at `start` is paid per started `btu` seconds (a VM or executor billed per
started minute or hour), so releasing it before its unit ends saves nothing: Hochreiner et
al.'s BTU-based provisioning keeps a core it no longer needs until the end of its paid unit
and releases it then unless the plan needs it again, while a threshold controller releases as
soon as it is idle and pays the started unit all the same. `LeasePool` does both
(`need` and `release_now`) and bills started units x cores.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from airflow_iqp.validation import number, whole_number


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
