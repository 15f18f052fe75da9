"""How EDF, LLF and SJF rank a waiting job (Section 4.3): the one definition, shared by the
simulator and the live dispatcher through `dynamic.dispatch`. Round robin has no rank: the
dispatcher serves the query it served least recently.
"""

from __future__ import annotations

from airflow_iqp.constants import Policy


def check_policy(name: str) -> Policy:
    """`name` as a Policy, or ValueError listing the policies there are."""
    try:
        return Policy(name)
    except ValueError:
        raise ValueError(f"policy must be one of {', '.join(Policy)}, got {name!r}") from None


def rank(policy: Policy, deadline: float, remaining: float, now: float) -> float:
    """Smaller runs first: the deadline (EDF), the laxity D - now - remaining (LLF, eq. 9),
    or the remaining work (SJF).
    """
    if policy == Policy.EDF:
        return deadline
    if policy == Policy.LLF:
        return deadline - now - remaining
    if policy == Policy.SJF:
        return remaining
    raise ValueError(f"policy {policy!r} does not rank queries (one of edf, llf, sjf)")
