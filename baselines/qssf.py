"""``qssf``: quasi-shortest-service-first on history estimates (after Helios, Hu et al. SC'21,
section 5), a deployable shortest-first order.

Helios observed that the GPU-time of a job is predictable from the history of the jobs its
user submitted before under a similar name, and orders the queue by a job's *estimated*
service (GPU count x estimated duration), shortest first, non-preemptive. The estimate here is
:func:`dlcluster_gym.sim.estimators.keyed_length`: the mean length of the latest finished jobs
(20 per key) with the same user and job name, else the same virtual cluster and GPU count,
else the same virtual cluster, else all finished jobs. Before any job has finished every
estimate is unknown and the order is the arrival order (the longest waiting first).

Our choices where the paper leaves the simulator's details open (the Helios paper is not in
this project's source set; these follow its section 5 description):

- Names match exactly (Helios matches similar names); traces and generators here give each
  recurring job one name.
- The estimate is recomputed at every decision from the history at that time (a rolling
  update), not frozen at submission.
- Placement and blocking are ``srw``'s (``baselines.srw``): each job starts only on the most
  consolidated tier it could ever have on this cluster, best-fit, and a job whose tier is not
  free waits while later jobs backfill. ``qssf`` against ``srw`` is thus estimated against
  true lengths, everything else equal. Jobs with no estimate rank after every estimated one.

The preemptive variant is ``qssf-preemptive`` (``baselines.queue_policies.QSSFSlots``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dlcluster_gym.scheduler import BaseScheduler
from dlcluster_gym.sim.actions import Action
from dlcluster_gym.sim.estimators import keyed_length
from dlcluster_gym.sim.view import ClusterView

from .consolidation import best_possible_tier
from .srw import start_in_order


class QSSF(BaseScheduler):
    """Shortest estimated GPU-service first (history keyed by user/job name, VC/GPUs),
    consolidated placement with backfilling, no preemption."""

    name = "qssf"

    def estimated_service(self, view: ClusterView, jobs: np.ndarray) -> np.ndarray:
        """Estimated GPU-seconds of ``jobs`` (inf where no job has finished yet)."""
        length, _, _ = keyed_length(view.history, jobs)
        return np.where(np.isnan(length), np.inf, length * np.asarray(view.demand)[jobs])

    def schedule(self, view: ClusterView) -> Sequence[Action]:
        if view.num_waiting == 0 or view.num_free == 0:
            return ()
        waiting = np.fromiter(view.iter_waiting(), dtype=np.int64, count=view.num_waiting)
        demand = np.asarray(view.demand)[waiting]
        tiers = {n: best_possible_tier(view.cluster, n) for n in set(demand.tolist())}
        return start_in_order(view, waiting, self.estimated_service(view, waiting), demand,
                              tiers)  # fmt: skip
