"""Themis: finish-time fairness with leases and auction epochs, the base scheduler of the
Cassini evaluation (Cassini thesis 4.4.2, 4.5.1).

The Themis paper (Mahajan et al., NSDI'20) is not in ../shared/papers; this follows the
thesis's description and documents what it fills in:

- **Finish-time fairness** rho = T_shared / T_ideal. T_shared = time since arrival + remaining
  iterations x the job's current iteration time (its uncontended compute time when waiting);
  T_ideal = the job's run time alone on its fair share of the cluster, 1/N of the GPUs with N
  active jobs: iterations x compute time x max(1, demand / (GPUs / N)). A larger rho is further
  from fair.
- **Leases and auctions** (4.5.1): GPU allocations are leases of ``lease_s`` (10 min, the
  thesis's bidding period). At every lease expiry (an epoch; the policy wakes itself at
  multiples of ``lease_s``) all jobs bid and the arbiter serves them in decreasing rho: a
  running job whose rho ranks it a winner renews its lease on the same GPUs; a waiting job is
  placed on free GPUs or, failing that, on GPUs released by running jobs of lower rho (lowest
  first, as few as it needs), which are preempted. Between epochs, free GPUs go to waiting
  jobs in decreasing rho without preemption (work conservation).
- **Placement**: Themis's network model is a slowdown for spanning racks (4.4.2), so it takes
  the most consolidated placement available (one machine, else one rack, else the fewest
  racks).
- **Not modelled**: Themis's worker-count tuning (the thesis lets Themis change a job's number
  of workers); jobs here keep the GPU count they asked for, and the fairness-knob filter that
  lets only the worst 1-f of jobs bid (every job bids).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from baselines.consolidation import make_room
from dlcluster_gym.errors import ConfigError
from dlcluster_gym.scheduler import BaseScheduler
from dlcluster_gym.sim.actions import Action, WakeUp
from dlcluster_gym.sim.view import ClusterView, Plan


class Themis(BaseScheduler):
    """Finish-time fair allocation with leases and auction epochs."""

    name = "themis"

    def __init__(self, *, lease_s: float = 600.0) -> None:
        if not isinstance(lease_s, int | float) or not (math.isfinite(lease_s) and lease_s > 0):
            raise ConfigError(f"lease_s must be a finite number of seconds > 0, got {lease_s!r}")
        super().__init__(lease_s=lease_s)
        self.lease_s = float(lease_s)

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        self._demand = np.array([j.num_gpus for j in view.jobs], dtype=np.int64)
        self._iters = np.array([j.iterations for j in view.jobs], dtype=np.float64)
        self._compute = np.array([j.compute_s for j in view.jobs], dtype=np.float64)
        self._arrival = np.array([j.arrival_s for j in view.jobs], dtype=np.float64)
        self._next_epoch = self.lease_s

    def rho(self, view: ClusterView, jobs: np.ndarray, running: np.ndarray) -> np.ndarray:
        """Finish-time fairness of ``jobs`` (``running`` flags which of them run)."""
        done, _, _ = view.live(jobs)
        it = np.where(running, np.asarray(view.iter_time_s)[jobs], self._compute[jobs])
        it = np.where(np.isfinite(it), it, self._compute[jobs])
        shared = (view.now - self._arrival[jobs]) + (self._iters[jobs] - done) * it
        fair_share = view.num_gpus / max(jobs.size, 1)
        ideal = (
            self._iters[jobs]
            * self._compute[jobs]
            * np.maximum(1.0, self._demand[jobs] / fair_share)
        )
        return shared / ideal

    def place(self, plan: Plan, job: int) -> np.ndarray | None:
        n = int(self._demand[job])
        return plan.find(n) if plan.num_free >= n else None

    def schedule(self, view: ClusterView) -> Sequence[Action]:
        now = view.now
        epoch = now >= self._next_epoch
        if epoch:
            self._next_epoch = (math.floor(now / self.lease_s) + 1) * self.lease_s
        n_running = view.num_running
        if not (view.num_waiting and (view.num_free or (epoch and n_running))):
            # Nothing can start: only the lease renewal wake-up (no plan to build).
            return [WakeUp(self._next_epoch)] if n_running else []
        waiting = np.fromiter(view.iter_waiting(), dtype=np.int64, count=view.num_waiting)
        running = np.asarray(view.running(), dtype=np.int64)
        plan = view.plan()
        ids = np.concatenate((waiting, running))
        is_run = np.zeros(ids.size, dtype=bool)
        is_run[waiting.size :] = True
        rho = self.rho(view, ids, is_run)
        rho_w, rho_r = rho[: waiting.size], rho[waiting.size :]
        vorder = np.lexsort((running, rho_r))  # lowest rho first: the first to lose
        victims, victim_rho = running[vorder], rho_r[vorder]
        victim_open = np.ones(victims.size, dtype=bool)
        for k in np.lexsort((waiting, -rho_w)).tolist():
            job = int(waiting[k])
            gpus = self.place(plan, job)
            if gpus is None and epoch:
                lower = victim_open & (victim_rho < rho_w[k])
                if plan.num_free == 0 and not lower.any():
                    # Later jobs have no higher rho, so no victim is open to them either.
                    break
                plan, gpus = make_room(
                    plan,
                    lambda p, j=job: self.place(p, j),
                    int(self._demand[job]),
                    victims,
                    self._demand[victims],
                    lower,
                )
                victim_open &= ~(victim_rho < rho_w[k]) | lower
            elif gpus is None and plan.num_free == 0:
                break  # between epochs nobody is preempted: nothing left to give
            if gpus is not None:
                plan.start(job, gpus)
        if running.size or plan.actions:  # leases to renew; nothing to renew once idle
            plan.wake_up(self._next_epoch)
        return plan.actions
