"""``srw``: a clairvoyant reference, shortest remaining work first with strict consolidation.

Not a paper's scheduler: a headroom reference. It declares ``clairvoyant = True`` and reads
every job's TRUE remaining work from the oracle (remaining iterations x compute per iteration x
GPUs), which no real scheduler knows, so it shows how much room is left above the
non-clairvoyant heuristics; the ``ideal`` bound (sim/bounds.py) shows the room left with no
queueing at all.

At every instant, waiting jobs are taken in increasing remaining GPU-seconds (ties: the
longest waiting, then job id), and each starts only on the most consolidated tier it could
ever have on this cluster (one machine if it fits on one, else one rack, else anywhere;
``baselines.consolidation.best_possible_tier``), best-fit (``sim.placement.consolidated``).
A job whose tier is not free now waits while smaller jobs backfill. No preemption. (A
greedy variant that takes any tier was 1.3-1.4x worse than this on dally-poisson-2rack and
-4rack, seed 1: network-sensitive jobs lose more by spreading than they gain by starting.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dlcluster_gym.scheduler import BaseScheduler
from dlcluster_gym.sim.actions import Action
from dlcluster_gym.sim.view import ClusterView

from .consolidation import best_possible_tier


class ShortestRemainingWork(BaseScheduler):
    """Clairvoyant shortest-remaining-work first, strict consolidation, backfilling."""

    name = "srw"
    clairvoyant = True

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        jobs = view.oracle.jobs
        self._demand = np.array([j.num_gpus for j in jobs], dtype=np.int64)
        self._work = np.array([j.iterations * j.compute_s for j in jobs], dtype=np.float64)
        self._iters = np.array([j.iterations for j in jobs], dtype=np.float64)
        self._tier = [best_possible_tier(view.cluster, int(d)) for d in range(
            int(self._demand.max(initial=1)) + 1)]  # fmt: skip

    def remaining(self, view: ClusterView, jobs: np.ndarray) -> np.ndarray:
        """True remaining GPU-seconds of ``jobs`` at their ideal speed."""
        done = view.iterations_done_of(jobs)
        left = np.maximum(1.0 - done / self._iters[jobs], 0.0) * self._work[jobs]
        return left * self._demand[jobs]

    def schedule(self, view: ClusterView) -> Sequence[Action]:
        if view.num_waiting == 0 or view.num_free == 0:
            return ()
        waiting = np.fromiter(view.iter_waiting(), dtype=np.int64, count=view.num_waiting)
        return start_in_order(view, waiting, self.remaining(view, waiting), self._demand[waiting],
                              self._tier)  # fmt: skip


def start_in_order(
    view: ClusterView,
    waiting: np.ndarray,
    key: np.ndarray,
    demand: np.ndarray,
    tiers: Sequence[Any],
) -> Sequence[Action]:
    """Start ``waiting`` jobs in increasing ``key`` (ties: the longest waiting, then job id),
    each only on its most consolidated possible tier (``tiers[demand]``), best-fit; a job
    whose tier is not free now waits while later ones backfill.

    A demand whose placement is not found is not searched again in the same call: the plan
    only loses free GPUs, so it stays without one (same decisions, far fewer searches when
    many jobs wait)."""
    since = np.asarray(view.wait_since)[waiting]
    plan = view.plan()
    failed: set[int] = set()
    for k in np.lexsort((waiting, since, key)).tolist():
        job, n = int(waiting[k]), int(demand[k])
        if n <= plan.num_free and n not in failed:
            gpus = plan.find(n, max_tier=tiers[n])
            if gpus is None:
                failed.add(n)
            else:
                plan.start(job, gpus)
    return plan.actions
