"""Gavel, as the Crius evaluation uses it (Crius 8.1): heterogeneity-aware, throughput
maximisation, no change of GPU counts; decisions from data-parallel-only profiles while the
jobs themselves run with adaptive parallelism.

The Gavel paper is not in ../shared/papers; Crius 8.1 and 9 describe it as a
heterogeneity-aware scheduler with policies such as throughput maximisation that does not
scale GPU numbers. Our choices:

- **Policy** (max-sum-throughput): every round, a linear program over the active jobs (waiting
  and running) chooses ``X[j, k]``, the fraction of time job ``j`` should run on GPU type
  ``k``: maximise ``sum_jk T[j, k] X[j, k]`` subject to ``sum_k X[j, k] <= 1`` and
  ``sum_j N_j X[j, k] <= GPUs of type k``, solved with scipy's HiGHS (``linprog``). ``T[j, k]``
  is the job's data-parallel-only throughput on ``N_j`` GPUs of type ``k``
  (``perf.parallelism.data_parallel_plan``), normalised by its best type. A type where the
  data-parallel plan runs out of memory gets 0; a job whose data-parallel plan fits nowhere is
  profiled only on its requested type (value 1), where its user said it runs.
- **Mechanism** (rounds, the scenario's ``round_period_s``; 5 minutes in the presets): jobs
  are considered in decreasing priority ``X[j, k] / (share of its time so far on k)`` and
  placed gang-wise on a type with enough free GPUs; a job that keeps its type keeps running
  (a lease renewal), one that moves is migrated, one not chosen is preempted.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.optimize import linprog

from dlcluster_gym.perf.parallelism import cluster_hardware, data_parallel_plan
from dlcluster_gym.scheduler import BaseScheduler
from dlcluster_gym.sim.actions import Action, WakeUp
from dlcluster_gym.sim.boundary import JobTable
from dlcluster_gym.sim.view import ClusterView

from .heterogeneous import (
    Alloc,
    current_alloc,
    finalize,
    requested_type,
    require_adaptive_jobs,
)


def max_sum_throughput(thr: np.ndarray, demand: np.ndarray, caps: np.ndarray) -> np.ndarray:
    """Gavel's max-sum-throughput allocation ``X`` [jobs, types] (HiGHS LP)."""
    J, K = thr.shape
    if J == 0:
        return np.zeros((0, K))
    c = -thr.reshape(-1)
    rows_job = np.zeros((J, J * K))
    for j in range(J):
        rows_job[j, j * K : (j + 1) * K] = 1.0
    rows_type = np.zeros((K, J * K))
    for k in range(K):
        rows_type[k, k::K] = demand
    a = np.vstack((rows_job, rows_type))
    b = np.concatenate((np.ones(J), caps.astype(np.float64)))
    ub = np.where(thr.reshape(-1) > 0, 1.0, 0.0)
    res = linprog(c, A_ub=a, b_ub=b, bounds=list(zip(np.zeros(J * K), ub, strict=True)),
                  method="highs")  # fmt: skip
    if res.status != 0:  # pragma: no cover - the LP is always feasible (X = 0)
        raise RuntimeError(f"gavel LP failed: {res.message}")
    return np.clip(res.x.reshape(J, K), 0.0, 1.0)


class Gavel(BaseScheduler):
    """Heterogeneity-aware max-sum-throughput, round based, fixed GPU counts."""

    name = "gavel"

    def check_workload(self, view: ClusterView, jobs: JobTable) -> None:
        require_adaptive_jobs(view, jobs, "gavel")

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        hw = cluster_hardware(view.cluster)
        self.caps = view.cluster.type_num_gpus.astype(np.int64)
        n, K = view.num_job_ids, len(hw)
        self.hw = hw
        self.thr = np.zeros((n, K))  # normalised throughput per type, filled at arrival
        self.demand = view.demand
        self._seen = 0
        self.time_on = np.zeros((n, K))
        self._last = 0.0
        self._rounds = view.scenario.round_period_s is not None

    def _sync(self, view: ClusterView) -> None:
        """Profile the jobs that arrived since the last call on every GPU type."""
        new = view.arrivals(self._seen)
        self._seen += len(new)
        for j in new:
            spec = view.jobs[j]
            for k in range(len(self.hw)):
                if spec.num_gpus <= self.caps[k]:
                    p = data_parallel_plan(spec.model, self.hw[k], spec.num_gpus)
                    if p is not None:
                        self.thr[j, k] = 1.0 / p.iter_time_s
            if self.thr[j].max() > 0:
                self.thr[j] /= self.thr[j].max()
            else:
                self.thr[j, requested_type(view, j)] = 1.0

    def schedule(self, view: ClusterView) -> Sequence[Action]:
        self._sync(view)
        if self._rounds and not any(t.kind == "round" for t in view.triggers):
            if view.num_waiting and not view.running():  # idle until the next round
                period = float(view.scenario.round_period_s)
                return [WakeUp((view.now // period + 1) * period)]
            return ()
        dt = view.now - self._last
        self._last = view.now
        running = view.running()
        for j in running:
            a = current_alloc(view, j)
            if a is not None:
                self.time_on[j, a[1]] += dt
        active = np.asarray(sorted({*running, *view.iter_waiting()}), dtype=np.int64)
        if active.size == 0:
            return ()
        x = max_sum_throughput(self.thr[active], self.demand[active], self.caps)
        age = np.array([max(view.now - view.jobs[j].arrival_s, 1.0) for j in active.tolist()])
        share = self.time_on[active] / age[:, None]
        prio = np.where(x > 1e-9, x / np.maximum(share, 1e-3), -1.0)
        # current type first on ties (keeps leases); then job id
        free = self.caps.copy()
        target: dict[int, Alloc | None] = {int(j): None for j in active.tolist()}
        order = np.argsort(-prio, axis=None, kind="stable")
        placed: set[int] = set()
        for flat in order.tolist():
            i, k = divmod(flat, self.caps.size)
            if prio[i, k] < 0:
                break
            j = int(active[i])
            if j in placed or free[k] < self.demand[j]:
                continue
            placed.add(j)
            free[k] -= self.demand[j]
            target[j] = (int(self.demand[j]), int(k))
        return finalize(view, target)
