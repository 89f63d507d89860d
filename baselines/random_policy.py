"""``random``: FCFS order with head-of-line blocking, uniformly random free GPUs.

The comparison point of Cassini (4.5.1, "Random placement"); the only randomness comes from
the generator the engine hands to ``reset`` (seeded from the scenario seed).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dlcluster_gym.scheduler import BaseScheduler
from dlcluster_gym.sim.actions import Action
from dlcluster_gym.sim.view import ClusterView


class RandomPlacement(BaseScheduler):
    """Random feasible GPUs for each job, in arrival order."""

    name = "random"

    def schedule(self, view: ClusterView) -> Sequence[Action]:
        if view.num_waiting == 0 or view.num_free == 0:
            return ()
        plan = view.plan()
        for job in view.iter_waiting():
            n = view.jobs[job].num_gpus
            free = np.flatnonzero(plan.free_mask)
            if free.size < n:
                break
            plan.start(job, np.sort(self.rng.choice(free, size=n, replace=False)))
        return plan.actions
