"""``random``: FCFS order with head-of-line blocking, uniformly random free GPUs.

The comparison point of Cassini (4.5.1, "Random placement"); the only randomness comes from
the generator the engine hands to ``reset`` (seeded from the scenario seed).
"""

from __future__ import annotations

import numpy as np

from dlcluster_gym.sim.view import ClusterView, Plan

from .fcfs import FCFS


class RandomPlacement(FCFS):
    """Random feasible GPUs for each job, in arrival order."""

    name = "random"
    supports_ps_jobs = False

    def place(self, view: ClusterView, plan: Plan, job: int) -> np.ndarray | None:
        n = view.jobs[job].num_gpus
        free = np.flatnonzero(plan.free_mask)
        if free.size < n:
            return None
        return np.sort(self.rng.choice(free, size=n, replace=False))
