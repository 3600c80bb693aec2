"""The looks of a decision loop: jobs per arm at each look and how alpha is spent over them (`Design`). The planner
reads it at every Snakemake start to give each run the look that first needs it, so it imports no scipy: the
boundaries computed from a design are judge/sequential.py's."""

from __future__ import annotations

from dataclasses import dataclass

SPENDING = ("pocock", "obrien-fleming", "hsd")


@dataclass(frozen=True)
class Design:
    """The looks of a decision loop and how alpha is spent over them.

    first: jobs per arm at the first look (the spec's `repeats`); step: jobs added per arm at each later look;
    horizon: the most jobs per arm any budget may reach (the boundaries are computed for looks up to it);
    spending: pocock | obrien-fleming | hsd (Hwang-Shih-DeCani with `gamma`).
    """

    first: int
    step: int
    horizon: int
    spending: str = "hsd"
    gamma: float = 1.0

    def __post_init__(self) -> None:
        if not (1 <= self.first <= self.horizon and self.step >= 1):
            raise ValueError(f"Design: need 1 <= first ({self.first}) <= horizon ({self.horizon}) and step >= 1")
        if self.spending not in SPENDING:
            raise ValueError(f"Design: spending {self.spending!r} is not one of {', '.join(SPENDING)}")

    @property
    def looks(self) -> tuple[int, ...]:
        """Jobs per arm at each look: first, first + step, ..., and the horizon itself as the last look."""
        ns = list(range(self.first, self.horizon + 1, self.step))
        if ns[-1] != self.horizon:
            ns.append(self.horizon)
        return tuple(ns)

    def look_of(self, n: int) -> int:
        """The 1-based look at which an arm has n jobs (a count between looks is judged as the look it completes:
        the next one; fewer jobs than the first look is look 1, more than the horizon the last)."""
        for k, m in enumerate(self.looks, start=1):
            if n <= m:
                return k
        return len(self.looks)

    def fractions(self) -> tuple[float, ...]:
        """Information fraction of each look: jobs per arm over the horizon (both arms grow together)."""
        return tuple(n / self.horizon for n in self.looks)
