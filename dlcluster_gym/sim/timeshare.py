"""Time-shared GPU sets (``actions.TimeShare``): which running jobs share one GPU set's time,
and the rates they run at.

The engine gives each GPU to one job (``Engine.gpu_owner``, the set's *holder*). The other
jobs of a set (its *sharers*) run on the holder's GPUs without owning them. With ``k`` jobs
on a set each holds it ``1 / k`` of the time (``time_share``) and, while ``k >= 2``, makes
progress at ``(1 - f) / k`` of its full speed (``progress_rate``), ``f`` its switch fraction:
the rate form of a round robin in quanta whose every turn loses ``f`` of the quantum to a
suspend-resume. When the holder leaves, the next job in join order holds the set.
"""

from __future__ import annotations

import math

import numpy as np


def check_fraction(name: str, value: object) -> float:
    """A switch fraction: a finite number in [0, 1); raises ValueError naming ``name``."""
    ok = isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or not 0.0 <= value < 1.0:  # type: ignore[arg-type]
        raise ValueError(f"{name} must be a number in [0, 1), got {value!r}")
    return float(value)  # type: ignore[arg-type]


class TimeShares:
    """The time-shared GPU sets of one run, and each job's rates."""

    def __init__(self, num_jobs: int) -> None:
        self.sets: dict[int, list[int]] = {}  # holder -> its set's jobs, holder first
        self.holder = np.full(num_jobs, -1, dtype=np.int64)  # -1: not in a shared set
        self.switch_frac = np.zeros(num_jobs)
        self.time_share = np.ones(num_jobs)
        self.progress_rate = np.ones(num_jobs)

    def members(self, job: int) -> list[int]:
        """The jobs sharing ``job``'s GPU set, its holder first (``[job]`` when unshared)."""
        h = int(self.holder[job])
        return [job] if h < 0 else self.sets[h]

    def join(self, host: int, job: int, switch_frac: float, host_switch_frac: float) -> None:
        """``job`` joins the GPU set held by ``host``."""
        group = self.sets.get(host)
        if group is None:
            group = self.sets[host] = [host]
            self.holder[host] = host
        group.append(job)
        self.holder[job] = host
        self.switch_frac[job] = switch_frac
        self.switch_frac[host] = host_switch_frac
        self._rates(group)

    def leave(self, job: int) -> int:
        """``job`` leaves its shared set; returns the set's holder afterwards (-1 when no
        other job remains on the GPUs: then ``job`` held them alone)."""
        h = int(self.holder[job])
        self.holder[job] = -1
        self.time_share[job] = self.progress_rate[job] = 1.0
        group = self.sets.pop(h)
        group.remove(job)
        if len(group) == 1:  # no longer shared
            self.holder[group[0]] = -1
            self._rates(group)
            return group[0]
        new = group[0]
        self.sets[new] = group
        self.holder[group] = new
        self._rates(group)
        return new

    def _rates(self, group: list[int]) -> None:
        k = len(group)
        for m in group:
            if k == 1:
                self.time_share[m] = self.progress_rate[m] = 1.0
            else:
                self.time_share[m] = 1.0 / k
                self.progress_rate[m] = (1.0 - self.switch_frac[m]) / k
