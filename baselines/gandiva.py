"""Gandiva as the Dally evaluation uses it (Dally 5.1.3): network-agnostic placement, plus
migration to better-consolidated GPUs when they free up.

- **Placement**: jobs start as soon as enough GPUs are free, in arrival order, a job that does
  not fit letting later ones that do go first (Gandiva schedules greedily rather than holding
  a FIFO queue); a job takes the lowest-numbered free GPUs (first fit), whatever tiers they
  span.
- **Migration** (Gandiva's introspective migration for locality): whenever GPUs free up, each
  running job placed wider than the tightest tier it could have (jobs on the network tier
  first, then the rack tier; older jobs first) moves to the most consolidated placement among
  the free GPUs, if that is strictly tighter and the saving over its remaining iterations
  exceeds the checkpoint + restore overhead (``baselines.consolidation.worth_moving``).
  Gandiva does not know how long a job will run; its introspection measures iteration
  times. The remaining iterations of that test are therefore estimated (``remaining``,
  default ``"history"``: the expected remaining work given the work done, under the lengths
  of the jobs finished so far, ``sim.estimators``); ``remaining="known"`` reads the true
  remaining iterations (a clairvoyant variant).
  Waiting jobs are started first and migrations use the GPUs still free afterwards: Gandiva
  puts early feedback for new jobs first, and uses its introspective mechanisms on the
  resources left over (so in a congested cluster few jobs get migrated).
- **Not modelled: time-slicing.** Gandiva suspends and resumes jobs to share oversubscribed
  GPUs at a ~1 minute granularity. This engine gives each job exclusive GPUs (gang scheduling,
  no GPU sharing), and Dally 5.1.3 characterizes Gandiva by its placement and migration only,
  so jobs here run to completion once started.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dlcluster_gym.cluster.topology import Tier
from dlcluster_gym.scheduler import BaseScheduler
from dlcluster_gym.sim.actions import Action
from dlcluster_gym.sim.offers import FIRST_FIT, WAIT, Offer, OfferGen, drive, make_offer
from dlcluster_gym.sim.view import ClusterView, Plan

from .consolidation import best_tiers, check_remaining, worth_moving


class Gandiva(BaseScheduler):
    """Greedy network-agnostic placement with migration for locality."""

    name = "gandiva"

    def __init__(self, *, migration: bool = True, remaining: str = "history") -> None:
        super().__init__(migration=migration, remaining=check_remaining(remaining))
        self.migration = bool(migration)
        self.remaining = remaining
        self.clairvoyant = remaining == "known"

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        self._demand = view.demand
        self._best = best_tiers(view)
        self._tier = np.full(view.num_job_ids, -1, dtype=np.int8)

    def schedule(self, view: ClusterView) -> Sequence[Action]:
        return drive(self.offers(view), self.choose)

    @staticmethod
    def choose(offer: Offer) -> int:
        """Network-agnostic: the lowest-numbered free GPUs."""
        return FIRST_FIT if offer.mask[FIRST_FIT] else WAIT

    def offers(self, view: ClusterView) -> OfferGen:
        """Waiting jobs in arrival order, each offered the free GPUs if enough are free;
        then migrations with what is left (base-policy decisions, not offered)."""
        plan = view.plan()
        if plan.num_free == 0:
            return ()
        now = view.now
        for job in view.waiting():
            if plan.num_free == 0:
                break
            n = int(self._demand[job])
            if n <= plan.num_free:
                offer = make_offer(plan, job, n, now - float(view.wait_since[job]))
                gpus = offer.placement((yield offer))
                if gpus is not None:
                    plan.start(job, gpus)
                    self._tier[job] = view.cluster.placement_tier(gpus)
        if self.migration and plan.num_free and any(t.kind == "finish" for t in view.triggers):
            self._migrate(view, plan)
        return plan.actions

    def _migrate(self, view: ClusterView, plan: Plan) -> None:
        running = np.asarray(view.running(), dtype=np.int64)
        if running.size == 0:
            return
        wide = running[self._tier[running] > self._best[running]]
        start = np.asarray(view.last_start_s)[wide]
        for job in wide[np.lexsort((wide, start, -self._tier[wide]))].tolist():
            tighter = Tier(int(self._tier[job]) - 1)
            gpus = plan.find(int(self._demand[job]), max_tier=tighter)
            if gpus is not None and worth_moving(view, job, gpus, self.remaining):
                plan.migrate(job, gpus)
                self._tier[job] = view.cluster.placement_tier(gpus)
